"""`hw.rtl_build`: recorded config reads, one conversion per distinct module, worker processes, the cache."""

from __future__ import annotations

import json

from hw.config import AcceleratorConfig, config_from_dict, load_config
from hw.rtl import convert, emit, main, plan, render
from hw.rtl_build import MANIFEST, WHOLE, build, recorded_reads

PARTS = ("kaleido_pe", "kaleido_scheduler", "kaleido_sram_1rw_32x9")  # cheap ones: a module of each kind


def test_recorded_reads_fields_properties_and_whole_reads():
    cfg, other = load_config("tiny-8x8"), load_config("small-32x32")
    with recorded_reads(cfg) as reads:
        assert cfg.array_rows == 8 and other.array_cols == 32  # another config's reads do not count
    assert reads == {"array_rows": 8}
    with recorded_reads(cfg) as reads:
        assert cfg.port_bits == 1  # a property (ports 0..1): recorded through the fields it reads (drain_rows_per_cycle = 2)
    assert reads == {"drain_rows_per_cycle": 2}
    with recorded_reads(cfg) as reads:
        cfg.model_dump()  # the config as a whole
    assert reads[WHOLE] and set(reads) == {*AcceleratorConfig.model_fields, WHOLE}
    assert "__getattribute__" not in vars(AcceleratorConfig)  # the hook is gone


def _cfg(name: str, **change) -> AcceleratorConfig:
    return config_from_dict(load_config(name).model_dump() | change)


def test_equal_modules_are_converted_once_in_parallel_and_match_a_fresh_emission(tmp_path):
    tiny = load_config("tiny-8x8")
    slower = _cfg("tiny-8x8", dram_gbps=1.0)  # no module reads the DRAM bandwidth: every part is reused
    bigger = _cfg("tiny-8x8", array_rows=16)  # the PE does not read R, the scheduler does
    targets = [(tiny, tmp_path / "a"), (slower, tmp_path / "b"), (bigger, tmp_path / "c")]
    files = build(targets, plan, convert, render, only=PARTS, jobs=2)
    hows = [[how for _, how in f] for f in files]
    assert hows == [["converted"] * 3, ["reused"] * 3, ["reused", "converted"]]  # R = 16: other macros
    for (cfg, folder), f in zip(targets, files, strict=True):
        fresh = emit(cfg, tmp_path / "fresh" / folder.name, only=PARTS)  # converted on its own, in this process
        assert [p.read_bytes() for p, _ in f] == [p.read_bytes() for p in fresh]
    assert (tmp_path / "c" / "kaleido_scheduler.v").read_bytes() != (tmp_path / "a" / "kaleido_scheduler.v").read_bytes()


def test_cache_keeps_unchanged_files_and_redoes_edited_or_changed_ones(tmp_path):
    cfg, folder = load_config("tiny-8x8"), tmp_path / "rtl"

    def run(c=cfg, force=False):
        [f] = build([(c, folder)], plan, convert, render, only=PARTS, cache=True, force=force)
        return {p.name: how for p, how in f}

    assert set(run().values()) == {"converted"}
    pe = folder / "kaleido_pe.v"
    good = pe.read_bytes()
    assert set(run().values()) == {"kept"}
    pe.write_bytes(good[:100])  # truncated (or edited) since: emitted again
    assert run() == {"kaleido_pe.v": "converted", "kaleido_scheduler.v": "kept", "kaleido_sram_1rw_32x9.v": "kept"}
    assert pe.read_bytes() == good
    # Any config change is a new key (the cache does not reason about reads): every file is emitted again.
    assert set(run(_cfg("tiny-8x8", dram_gbps=1.0)).values()) == {"converted"}
    (folder / MANIFEST).write_text("{not json")  # a damaged manifest trusts nothing
    assert set(run().values()) == {"converted"}
    assert set(json.loads((folder / MANIFEST).read_text())) == {f"{p}.v" for p in PARTS}
    # force (`python -m hw.rtl --force`): every file converted again, the manifest still written for the next run
    (folder / MANIFEST).unlink()
    assert set(run(force=True).values()) == {"converted"}
    assert set(run().values()) == {"kept"}


def test_bad_jobs_is_a_one_line_error(tmp_path, capsys):
    assert main(["tiny-8x8", "--out", str(tmp_path), "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs" in err and not any(tmp_path.iterdir())


def test_organisation_note_names_only_emitted_modules():
    """Every ``kaleido_*`` module `organisation_note` names for the example configs (and the balanced preset) is one
    `plan` emits: a new user found it naming ``kaleido_dcombine_w2_v2`` after D115 renamed it ``..._b3``."""
    import re
    from pathlib import Path

    from hw.rtl import organisation_note

    examples = Path(__file__).resolve().parents[1] / "hw" / "presets" / "examples"
    for cfg in (load_config(examples / "tiny-8x8-delta.toml"), load_config(examples / "tiny-8x8-compact.toml"),
                load_config("kaleido-16nm-128x128-balanced")):
        named = set(re.findall(r"\bkaleido_[a-z0-9_]+", organisation_note(cfg)))
        emitted = {name for name, _spec, _what in plan(cfg)}
        assert named and named <= emitted, (cfg.name, named - emitted)
        if cfg.organisation == "delta":
            assert "kaleido_dcore_stage" in named and any(n.endswith("_b3") for n in named)
            # which core the compiled engine runs: the staged one where the config has a weight stage and a
            # difference-sum buffer (sim.engines.verilator_core.simulate_trace_core, D119)
            assert organisation_note(cfg).endswith(" runs kaleido_dcore_stage\n  kaleido_core and kaleido_accel "
                                                   "beside them are the lockstep organisation's")


def test_optional_modules_only_on_request():
    """`make rtl` leaves out what no default core instantiates (`hw.rtl.OPTIONAL_ROLES`: the staged controller without
    the issue gate, D129); the compiled engine's plan (``optional=True``) has it, for `CoreEngine(stage=True,
    issue_hold=False)`."""
    from pathlib import Path

    from hw.delta_accel import DSGATE_MODULE_NAME, DSTAGE_MODULE_NAME

    cfg = load_config(Path(__file__).resolve().parents[1] / "hw" / "presets" / "examples" / "tiny-8x8-delta.toml")
    default = {n for n, _s, _w in plan(cfg)}
    assert DSGATE_MODULE_NAME in default and DSTAGE_MODULE_NAME not in default
    assert {n for n, _s, _w in plan(cfg, optional=True)} == default | {DSTAGE_MODULE_NAME}
