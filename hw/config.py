"""The accelerator configuration: one frozen type shared by `hw/` (RTL) and `sim/` (cycle model).

A configuration describes hardware only. Algorithm parameters (thresholds theta, b_msb, group
size G) belong to the trace (docs/spec.md §1); a trace whose b_msb is not in `msb_splits` is
rejected by the simulator.

Presets ship as TOML files in `hw/presets/` (`kaleido-16nm-128x128`, the default, and `tiny-8x8`
for tests). Unknown keys, non-positive sizes and non-power-of-two sizes where the hardware needs a
power of two raise `ConfigError` naming the key.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_PRESET = "kaleido-16nm-128x128"
#: The balanced preset (docs/decisions.md D41: the die sized so the block's units balance; the delta organisation's
#: default since D68), the one the benches and reports measure by default; hw/presets/ holds its TOML.
BALANCED_PRESET = "kaleido-16nm-128x128-balanced"

#: Array organisations the cycle model, the reference and the cost model know (docs/architecture.md
#: "Array organisations", docs/decisions.md): ``lockstep`` -- a tile's rows share one slot sequence, a
#: slot is saved only where every row agrees (the paper's organisation as we read it, docs/spec.md §3);
#: ``compact`` -- per-group compaction: the tokens that compute group g are packed into full tiles of
#: |g| slots (PARTIAL tokens at half width), REUSE costs no slot, a combine unit adds each token's
#: per-group partials kept in the partial-sum SRAM (`sim.timing.compact`); ``delta`` -- compact's
#: band-tiles, but on ops whose groups share one reuse axis each token carries one output value per column
#: (``Y[t] = Y[nb] + sum of the non-REUSE groups' differences``) instead of per-group partials, so X is
#: read once per group of resident column blocks (`sim.timing.delta`, docs/decisions.md D68).
ORGANISATIONS = ("lockstep", "compact", "delta")

#: How the cycle model times the banded organisations' combine (`AcceleratorConfig.combine_timing`, docs/decisions.md
#: D104): ``model``, the design's combine unit; ``rtl``, the combine stage as ``kaleido_ccore`` / ``kaleido_dcore`` are
#: built today.
COMBINE_TIMINGS = ("model", "rtl")

#: Buffer sizes an organisation does not build (its area model charges them 0 mm^2 and its timing never reads
#: them, `sim.cost.area.area_breakdown`): lockstep has no partial-sum, state, difference-sum buffer or weight
#: stage; compact no lockstep partial buffer, state, difference-sum buffer or stage (D50, D71, D84, D85); delta
#: no lockstep partial buffer (D68). A sweep that varies one of them across points of such an organisation
#: repeats the same result (`sim.sweep.spec.unbuilt_notes`).
UNBUILT_KEYS = {
    "lockstep": ("psum_sram_kib", "state_sram_kib", "diff_sram_kib", "wstage_sram_kib"),
    "compact": ("partial_sram_kib", "state_sram_kib", "diff_sram_kib", "wstage_sram_kib"),
    "delta": ("partial_sram_kib",),
}

#: Default scheduler window in tiles (``scheduler_window_tiles``), the one home of the value: positions
#: are clustered within windows of this many position blocks (8 tiles = 1,024 positions on 128 rows,
#: about two-thirds of a 480p frame's 1,560 positions; docs/decisions.md D20). `sim.timing.dispatch`
#: imports it as its functions' default.
WINDOW_TILES = 8

#: Largest unsigned operand value: P in `pv` is stored as uint8 exp numerators (docs/spec.md §1).
MAX_ABS_X = 255
#: Largest |W| of a symmetric int8 operand: -128 (docs/spec.md §1 quantisation clamps to [-128, 127]).
MAX_ABS_W = 128


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the offending key. The message is
    one line (line breaks in a file's own keys or values become spaces)."""

    def __init__(self, msg: object = ""):
        super().__init__(re.sub(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*", " ", str(msg)).strip())


def _is_pow2(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


class AcceleratorConfig(BaseModel):
    """Hardware parameters of one Kaleido accelerator instance.

    Attributes (units in the names): see the TOML presets for the source of each default.
    Derived widths (`acc_bits`, `x_bits`) are properties, so the RTL and the cycle model
    derive them the same way.
    """

    #: NaN and infinity are refused in every float field (a clock or bandwidth must be a number).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str
    description: str = ""
    technology_nm: int = Field(16, gt=0)
    array_rows: int = Field(gt=0, description="R: PE rows = tokens per tile (power of two)")
    array_cols: int = Field(gt=0, description="C: PE columns = output channels per tile (power of two)")
    clock_mhz: float = Field(gt=0)
    operand_bits: int = Field(8, description="streamed and stationary operand width; only 8 is supported")
    msb_splits: tuple[int, ...] = Field((4,), description="b_msb values the multiplier split supports")
    partial_regs: int = Field(8, gt=0, description="MSB/LSB partial-sum register pairs per PE")
    drain_rows_per_cycle: int = Field(gt=0, description="output ports per column (power of two, <= rows)")
    max_tokens: int = Field(gt=0, description="largest token count M a trace may have")
    max_k: int = Field(gt=0, description="largest reduction dimension K a trace may have")
    input_sram_kib: int = Field(gt=0)
    weight_sram_kib: int = Field(gt=0)
    output_sram_kib: int = Field(gt=0)
    partial_sram_kib: int = Field(gt=0)
    dram_gbps: float = Field(gt=0)
    accel_max_tokens: int = Field(
        256, gt=0, description="tokens M the op-level controller's buffers hold (hw/accel.py, D26); default: "
        "256 tokens x accel_max_k = 64 int8 channels = 16 KiB, tiny-8x8's input_sram_kib")
    accel_max_k: int = Field(64, gt=0, description="channels K the op-level controller holds (hw/accel.py, D26)")
    accel_tile_ring: int = Field(
        0, ge=0, description="the staged delta controller's descriptor list and kaleido_dcore's tile table as a ring "
        "of this many entries (a power of two >= 2), addressed by band-tile number mod the ring, the gather taking "
        "band-tile n only once band-tile n - ring has drained its last row (hw/delta_accel.py 'Ring', docs/decisions.md "
        "D130 item 4, D134; 128 = D130's TILE_RING holds every band-tile in flight on the balanced block); 0 = the "
        "whole list of hw.delta_accel.MAX_TILES band-tiles, written before start")
    accel_max_n: int = Field(
        256, gt=0, description="output channels N the op-level controller holds (hw/accel.py, D26); default: "
        "accel_max_k = 64 x 256 int8 weights = 16 KiB, tiny-8x8's weight_sram_kib")
    similarity_lanes: int | None = Field(
        None, gt=0, description="similarity-unit lanes (channels compared per cycle: one |x - nb| and one add "
        "each, hw/similarity.py); None = array_rows, the sim/cost/area.py estimate (R lanes keep pace with a tile's K "
        "slots for R tokens)")
    vector_lanes: int | None = Field(
        None, gt=0, description="fp16 vector-unit lanes (one add + one multiply per cycle each); None = "
        "array_cols * drain_rows_per_cycle, one lane per output value drained per cycle (the sim/cost/area.py estimate)")
    scheduler_window_tiles: int = Field(
        WINDOW_TILES, gt=0, description="tiles per scheduler window (sim.timing.dispatch.schedule_positions and "
        "hw.dispatcher.scheduler sort positions within windows of this many position blocks; hw.accel sizes its "
        "window from it); default WINDOW_TILES")
    fit_scheduler_window: bool = Field(
        False, description="each op's scheduler window is the largest of up to scheduler_window_tiles whose X over "
        "all frames fits the input SRAM (sim.cost.actions.scheduler_window), so the similarity pass reads X there")
    score_sram_kib: int = Field(
        0, ge=0, description="score buffer of fused attention (sim/timing/attention.py): one query tile's integer scores "
        "and P_eff state (tile rows x keys x 4 bytes), so P never goes to DRAM; 0 = no score buffer (qk writes P "
        "to DRAM and pv reads it back, unfused)")
    peff_sram_kib: int = Field(
        0, ge=0, description="Kaleido's P_eff buffer (sim/timing/attention.py): the similarity unit's neighbour state for "
        "fused pv, one query tile's previous-frame P (tile rows x keys x 1 byte), in its own buffer read at its own "
        "size (docs/decisions.md D58; not in the dense die); 0 = P_eff shares the score buffer (tile rows x keys x 4 "
        "bytes there)")

    organisation: str = Field(
        "lockstep", description="array organisation, one of hw.config.ORGANISATIONS: lockstep (a tile's rows share "
        "one slot sequence), compact (per-group compaction, combine unit, partial-sum SRAM; needs psum_sram_kib > 0) or "
        "delta (compact's band-tiles with one carried output per token and column; needs psum_sram_kib > 0)")
    psum_sram_kib: int = Field(
        0, ge=0, description="partial-sum SRAM of the compact organisation (sim/timing/compact.py): per-group "
        "neighbour partials of a window's positions, the combine unit's staged outputs and the queued operand rows; "
        "0 = none (compact cannot be built)")
    state_sram_kib: int = Field(
        0, ge=0, description="state SRAM of the delta organisation (sim/timing/delta.py, docs/decisions.md D71): the "
        "per-axis-class carried outputs of a fused score op (qk) from one query tile to the next frame's tile of the same "
        "positions, over every key; column banks; not in the dense die. 0 = none: such an op's temporal state is then "
        "unsized (counted as if it fit, noted by kaleido simulate, D70)")
    diff_sram_kib: int = Field(
        0, ge=0, description="difference-sum buffer of the delta organisation (sim/timing/delta.py, docs/decisions.md "
        "D84): D[t] of one chunk and one column block (a segment), issued column block by column block within a "
        "chunk; built as kaleido_dcore's dcore_d_buffers D buffers, an n-th each in words of array_cols x acc_bits, "
        "each holding one segment (hw.delta_combine.delta_combine_sizes), which bounds the frames per chunk "
        "(sim.timing.delta.plan), the partial-sum SRAM then holding only the carried values (docs/decisions.md D122); "
        "not in the dense die. 0 = none: D[t] is staged in the partial-sum SRAM for the chunk's whole column-block "
        "group (D68), the D buffers a third of psum_sram_kib each")
    wstage_sram_kib: int = Field(
        0, ge=0, description="weight stage of the delta organisation (sim/timing/delta.py, docs/decisions.md D85): "
        "column banks holding, double-buffered, the current column block's K weights of each column, filled from the "
        "weight SRAM once per chunk and column block and read by every band's weight lane; an op uses it when 2 K bytes "
        "fit a bank; not in the dense die. 0 = none: each band-tile reads its weights from the weight SRAM (D68)")
    compact_bands: int = Field(
        4, gt=0, description="compact organisation: row bands of array_rows / compact_bands rows, each with its own "
        "weight lane per column, running its own band-tiles (power of two, <= array_rows)")
    combine_lanes: int | None = Field(
        None, gt=0, description="combine-unit adders of the compact organisation (acc-bit adds per cycle); None = "
        "4 x array_cols x drain_rows_per_cycle (sim.timing.compact.combine_lanes)")
    combine_timing: str = Field(
        "model", description="how the cycle model times the compact and delta organisations' combine: model (the "
        "design's combine, combine_lanes adders overlapped pool by pool: sim.timing.compact.combine_stall) or rtl "
        "(the combine as kaleido_ccore and kaleido_dcore are built today, docs/decisions.md D104: "
        "sim.timing.compact_accel.core_done, sim.timing.delta_core.walk_done)")
    dcore_out_ways: int | None = Field(
        None, gt=0, description="delta, combine_timing = rtl: tokens kaleido_dcore's output walk takes a cycle, its "
        "output lanes (power of two, at most the core's accumulate ways, sim.timing.delta_core.core_ways); None = "
        "the core's default as built (sim.timing.delta_core.core_out_ways: the accumulate ways W, halved until they "
        "divide array_rows; hw.delta_combine.default_out_ways, docs/decisions.md D112, D113); 1 = one a cycle "
        "(D95's walk, still buildable with out_ways=1)")
    dcore_d_buffers: int | None = Field(
        None, ge=2, description="delta: kaleido_dcore's D buffers; a drained row of segment k waits at the row "
        "FIFO's head while a segment of k's residue mod this is walked (the head's gate, docs/decisions.md D108; "
        "timed with combine_timing = rtl); None = the core's default as built (sim.timing.delta_core.core_d_buffers: "
        "3 with output lanes V > 1, else 2; hw.delta_combine.default_d_buffers, D115); 2 = D108's core, still "
        "buildable; each buffer's macros are charged as built (sim.cost.controllers.built_sram_bits, D114, D122)")
    dcore_fifo_bypass: bool | None = Field(
        None, description="delta, combine_timing = rtl: kaleido_dcore's row-FIFO bypass (docs/decisions.md D118): a "
        "row popped the cycle after its write skips the FIFO's write and read (the cost charges only those that "
        "happen, and the bypass's registers); None = the core's default as built (sim.timing.delta_core."
        "core_fifo_bypass)")
    dcore_fifo_per_port: int = Field(
        8, ge=0, description="delta, combine_timing = rtl: kaleido_dcore's row-FIFO entries per drain port "
        "(hw.delta_core.FIFO_PER_PORT, 8 as built; d ports); kaleido_daccel runs a cycle only while the FIFO has d "
        "free entries (docs/decisions.md D116; modelled, the RTL designed); 0 = no such rule, the FIFO as deep as the op needs (the "
        "what-if before D116); the FIFO is charged at this size (sim.cost.controllers, 0 at the RTL's)")
    dcore_count_banks: int = Field(
        8, ge=0, description="delta, combine_timing = rtl: kaleido_dcore's segment count banks (hw.delta_core.NB_BANKS, "
        "8 as built); kaleido_daccel does not issue a band-tile of a segment this many or more past the walked one "
        "(docs/decisions.md D116); 0 = no such rule, a bank per segment (the what-if before D116)")

    @field_validator("organisation")
    @classmethod
    def _org(cls, v: str) -> str:
        if v not in ORGANISATIONS:
            raise ValueError(f"unknown array organisation {v!r}; known organisations: {', '.join(ORGANISATIONS)}")
        return v

    @field_validator("combine_timing")
    @classmethod
    def _combine_timing(cls, v: str) -> str:
        if v not in COMBINE_TIMINGS:
            raise ValueError(f"unknown combine timing {v!r}; known: {', '.join(COMBINE_TIMINGS)}")
        return v

    @field_validator(
        "array_rows", "array_cols", "drain_rows_per_cycle", "partial_regs",
        "input_sram_kib", "weight_sram_kib", "output_sram_kib", "partial_sram_kib", "compact_bands",
        "dcore_out_ways",
    )
    @classmethod
    def _pow2(cls, v: int | None) -> int | None:
        if v is not None and not _is_pow2(v):
            raise ValueError(f"must be a power of two, got {v}")
        return v

    @field_validator("accel_tile_ring")
    @classmethod
    def _ring(cls, v: int) -> int:
        if v and (v < 2 or not _is_pow2(v)):
            raise ValueError(f"must be 0 (no ring) or a power of two >= 2, got {v}")
        return v

    @field_validator("operand_bits")
    @classmethod
    def _bits(cls, v: int) -> int:
        if v != 8:
            raise ValueError(f"only 8-bit operands are supported, got {v}")
        return v

    @field_validator("msb_splits")
    @classmethod
    def _splits(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v:
            raise ValueError("at least one b_msb split is needed")
        for s in v:
            if not 1 <= s <= 7:
                raise ValueError(f"b_msb must be in 1..7, got {s}")
        if v != (4,):
            # The RTL multiplier is two 4-bit halves (docs/spec.md §3); other splits are
            # modelled by the golden model only (docs/decisions.md).
            raise ValueError(f"the hardware supports b_msb = 4 only, got {list(v)}")
        return v

    @model_validator(mode="after")
    def _cross(self) -> AcceleratorConfig:
        if self.drain_rows_per_cycle > self.array_rows:
            raise ValueError(
                f"drain_rows_per_cycle ({self.drain_rows_per_cycle}) exceeds array_rows ({self.array_rows})"
            )
        banded = self.organisation in ("compact", "delta")
        if banded and self.compact_bands > self.array_rows:
            raise ValueError(f"compact_bands ({self.compact_bands}) exceeds array_rows ({self.array_rows})")
        if banded and self.psum_sram_kib == 0:
            raise ValueError(
                f"array organisation {self.organisation!r} cannot be built on this config: psum_sram_kib = 0 (it keeps "
                f"partial sums in that SRAM); known organisations: {', '.join(ORGANISATIONS)}")
        if self.wstage_sram_kib and not self.diff_sram_kib:
            raise ValueError(
                f"wstage_sram_kib = {self.wstage_sram_kib} needs diff_sram_kib > 0: the weight stage holds one column "
                "block at a time, which only the difference-sum buffer's column-block order gives (D84, D85)")
        return self

    # ---- derived quantities (shared by hw and sim) -------------------------------------------
    @property
    def acc_bits(self) -> int:
        """Signed accumulator width in bits, wide enough that no op can overflow.

        |Y| <= K * max|X| * max|W| with K <= max(max_k, max_tokens), max|X| = 255 (uint8 P in pv)
        and max|W| = 128 (int8); one more bit for the sign. E.g. 75,600 * 255 * 128 < 2^32 -> 33 bits.
        The per-group MSB/LSB partial registers use the same width (each is bounded by the same sum).
        """
        bound = max(self.max_k, self.max_tokens) * MAX_ABS_X * MAX_ABS_W
        return bound.bit_length() + 1

    @property
    def b_msb(self) -> int:
        """The multiplier split the RTL is built for (the first of `msb_splits`)."""
        return self.msb_splits[0]

    @property
    def group_bits(self) -> int:
        """Bits of a partial-register (channel group) index."""
        return max(1, (self.partial_regs - 1).bit_length())

    @property
    def port_bits(self) -> int:
        """Bits of an output-port index (`drain_rows_per_cycle` ports per column)."""
        return max(1, (self.drain_rows_per_cycle - 1).bit_length())


def _format_error(err: ValidationError, source: str) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])  # empty for a rule across keys (`_cross`): its sentence names them
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "missing key"
        elif e["type"] == "value_error":  # our validators' own sentences, without pydantic's "Value error, "
            msg = msg.removeprefix("Value error, ")
        parts.append(f"{key}: {msg}" if key else msg)
    return f"invalid accelerator config {source}: " + "; ".join(parts)


def config_from_dict(data: dict, source: str = "<dict>") -> AcceleratorConfig:
    """Validate a mapping into an `AcceleratorConfig`; raises `ConfigError` naming the key."""
    try:
        return AcceleratorConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None


def with_organisation(cfg: AcceleratorConfig, name: str | None) -> AcceleratorConfig:
    """``cfg`` with its ``organisation`` replaced by ``name`` (None: unchanged), validated again.

    Raises:
        ConfigError: ``name`` is not in `ORGANISATIONS`, or ``cfg`` cannot build it (e.g. compact with
            ``psum_sram_kib = 0``); the message names it and the known organisations.
    """
    if name is None or name == cfg.organisation:
        return cfg
    if name not in ORGANISATIONS:
        raise ConfigError(f"--organisation {name!r}: unknown array organisation; known organisations: "
                          f"{', '.join(ORGANISATIONS)}")
    return config_from_dict(cfg.model_dump() | {"organisation": name}, f"{cfg.name!r} with --organisation")


def with_combine_timing(cfg: AcceleratorConfig, timing: str | None) -> AcceleratorConfig:
    """``cfg`` with its ``combine_timing`` replaced by ``timing`` (None: unchanged), validated again.

    Raises:
        ConfigError: ``timing`` is not in `COMBINE_TIMINGS`, or ``cfg``'s organisation is lockstep (no combine
            unit to time); the message names it.
    """
    if timing is None or timing == cfg.combine_timing:
        return cfg
    if timing not in COMBINE_TIMINGS:
        raise ConfigError(f"--combine-timing {timing!r}: must be one of {', '.join(COMBINE_TIMINGS)}")
    if cfg.organisation == "lockstep":
        raise ConfigError(f"--combine-timing applies to the compact and delta organisations; {cfg.name!r} is "
                          "lockstep (give --organisation delta or compact, or a delta or compact config)")
    return config_from_dict(cfg.model_dump() | {"combine_timing": timing}, f"{cfg.name!r} with --combine-timing")


def preset_names() -> list[str]:
    """Names of the presets shipped in `hw/presets/`."""
    root = resources.files("hw.presets")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def load_config(name_or_path: str | Path = DEFAULT_PRESET) -> AcceleratorConfig:
    """Load a preset by name (e.g. ``"tiny-8x8"``) or a TOML file by path.

    Raises:
        ConfigError: unknown preset, unreadable or malformed TOML, or invalid values.
    """
    text: str
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        source = str(p)
        try:
            text = p.read_bytes().decode("utf-8")
        except OSError as err:
            raise ConfigError(f"cannot read config file {p} ({err.strerror or err})") from None
        except UnicodeDecodeError as err:
            raise ConfigError(f"config file {p} is not UTF-8 text (byte {err.start}: {err.reason})") from None
    else:
        name = str(name_or_path)
        if name not in preset_names():
            if "/" in name or "\\" in name or ".toml" in name:  # a path that does not exist, not a preset's name
                raise ConfigError(f"config file not found: {name} (nor a preset: {', '.join(preset_names())})")
            raise ConfigError(f"unknown config preset {name!r}; choose one of {', '.join(preset_names())}")
        text = resources.files("hw.presets").joinpath(f"{name}.toml").read_text()
        source = f"preset {name!r}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"malformed TOML in {source}: {err}") from None
    return config_from_dict(data, source)
