"""The delta organisation's combine unit, its partial-sum SRAM and its state SRAM (`sim.timing.delta` "Combine unit",
`sim.timing.delta_reference.delta_gemm`, docs/decisions.md D68, D71, D73, D79).

Each row the delta array drains (`hw.compact_array.CompactTop` on a delta config, ``kaleido_dtop``) is
one token's difference sum of one group for C outputs (one ``acc_bits`` word per column). The unit works
per *axis class* (`sim.timing.delta.classes`: the groups that reuse along one axis; every op but ``qk`` has
one), with two command streams, each one command per cycle (one *way*, as `hw.combine`):

- *Accumulate* (``a_*``, as rows drain): ``D_a[t] = (a_first ? 0 : D_a[t]) + a_data`` at ``a_addr`` -- the
  (token, class)'s first row writes, the others read, add and write (`sim.cost.compact_actions`' delta rule:
  one write per difference row, one read per row after a (token, class)'s first). The class is part of the
  controller's address.
- *Output* (``c_*``, at the chunk's end; per column block, the chunk's tokens in raster order, per token one
  command per class, ``c_first`` on its first, ``c_last`` on its last):
  ``S_a[t] = (c_direct ? 0 : S_a[nb]) + (c_has ? D_a[t] : 0)`` and ``Y = (c_first ? 0 : Y) + S_a[t]``;
  on ``c_last`` ``Y = sum_a S_a[t]`` leaves on ``y_data``. ``c_direct``: t COMPUTEs every group of the class
  (its differences are X itself, no neighbour read); ``c_has``: t does not REUSE every group of it.
  ``S_a[nb]`` comes from one of three places: the *lane register* (``c_reg``: a ``w`` neighbour inside the
  pool, the previous token of the walk, `sim.cost.compact_actions.in_pool`), the *state SRAM* (``c_sram``: a
  fused score op's carried values, D71) or the partial-sum SRAM's *state* buffer (otherwise), read at
  ``c_raddr``. ``S_a[t]`` is written to that carried store at ``c_waddr`` where ``c_keep`` (a successor along
  the axis outside the pool reads it, `sim.cost.compact_actions.delta_successor_reads`) and into the lane
  register where ``c_hold`` (the successor inside the pool reads it). ``c_cols``: the column block's valid
  columns; only their state-SRAM banks and lane registers are enabled (a column-banked SRAM does not touch the
  banks of keys that do not exist).

Macros (`hw.sram`, behavioural, replaceable by a memory compiler's of the same name):

- the partial-sum SRAM: ``D`` double-buffered as two buffers (``c_sel`` picks the one the accumulate stream
  writes; the output stream reads the other, the previous chunk's), and the *state* buffer of carried values
  (one word per (class, position, column block)); each a third of ``psum_sram_kib`` in words of C acc bits
  (`delta_combine_sizes`). With ``buffers`` n > 2 D buffers (W > 1 ways, ``kaleido_dcombine_..._b<n>``,
  docs/decisions.md D115) way w accumulates into buffer ``a_sel[w]`` (a buffer number) and the output reads buffer
  ``c_buf``; each D buffer the same size, so the SRAM is ``psum_sram_kib (1 + n) / 3`` (`psum_buffers_kib`).
  With a difference-sum buffer (``diff_sram_kib`` > 0, D84; `diff_layout`, docs/decisions.md D122) the D buffers
  are it: each of the n a ``1 / n`` of ``diff_sram_kib`` (each holds one segment's sums while it accumulates and
  is walked), and the state buffer is all of ``psum_sram_kib``, so every SRAM is built once, at its config size;
- the state SRAM (``state_sram_kib`` > 0, `state_sram_sizes`): C column banks (key column n's values are only
  touched by the lane of column n mod C, the model's banking, `sim.cost.energy.COLUMN_BANKED`), each of
  `STATE_BITS`-bit words (the model's carried-value width, `sim.timing.delta.output_bytes`), stored truncated
  and sign-extended on read.

A buffer or bank above `MACRO_MAX_BITS` is split over ``2^k``-word macros (the high address bits choose one).
The addresses are the controller's (not RTL yet).

Pipeline (both streams): a command's reads issue in its cycle (synchronous-read macros); the cycle after, the
adds happen and the words are written. A command reading the word the previous command of its stream writes
gets it forwarded (the macros read before write): two rows of one (token, class) in a row, and a carried value
read by the next command. So an output command with ``c_last`` issued at cycle k has ``y_data`` valid at
k + 2 (``y_valid``).

Per way (`combine_way_counts`): 3 C acc-bit adders (``D`` accumulate; ``S_a``; ``Y``) and 5 C acc-bit
registers (the accumulate stream's row and forwarded word, the output stream's forwarded ``S``, ``y_data``,
which is also ``Y``'s running sum, and the lane register). `sim.timing.compact.combine_lanes` counts
4 C d adders, 2 d ways. With W accumulate ways (``ways``, ``kaleido_dcombine_w<W>``, docs/decisions.md D107; the
W ``kaleido_dcore`` builds by default is `default_ways`, d, D108) each
D buffer is W ways and W accumulate commands issue a cycle (``a_*`` W slices, ``a_sel`` each one's buffer): per
extra way one C acc-bit adder and 2 C acc-bit registers; the output stream stays one command a cycle. With V > 1
output lanes (``out_ways`` <= W, ``kaleido_dcombine_w<W>_v<V>``, docs/decisions.md D112; `default_out_ways` = W in ``kaleido_dcore`` since D113) the output stream
takes V commands a cycle, one per lane, of V consecutive tokens (`DeltaCombine._elaborate_lanes`); the state buffer
and each of the state SRAM's column banks are V position banks (the address's low log2 V bits).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.combine import _abits
from hw.config import MAX_ABS_W, MAX_ABS_X, AcceleratorConfig
from hw.sram import MACRO_MAX_BITS, macro, split_banks

DCOMBINE_MODULE_NAME = "kaleido_dcombine"


def carried_bytes(K: int) -> int:  # noqa: N803
    """Bytes of one carried value (a token's ``Y`` or a class's ``S_a``) of a reduction over K channels: its exact
    bound ``K x MAX_ABS_X x MAX_ABS_W`` (`hw.config`: 255 x 128) plus the sign, in whole bytes. The model's
    `sim.timing.delta.output_bytes`."""
    return -(-((K * MAX_ABS_X * MAX_ABS_W).bit_length() + 1) // 8)


#: The largest reduction K of a fused score op (its head dimension) whose carried values the state SRAM's
#: words hold exactly (docs/decisions.md D79; Wan2.1's is 128).
STATE_MAX_K = 256
#: Bits of one state-SRAM word: `carried_bytes` at K = `STATE_MAX_K` (``256 x 255 x 128 < 2^23``): 24.
STATE_BITS = 8 * carried_bytes(STATE_MAX_K)

#: Adders and registers of one way (module docstring), in units of C acc-bit words.
WAY_ADDER_ROWS, WAY_REGISTER_ROWS = 3, 5


def _split(words: int, word: int) -> tuple[int, int]:
    """`hw.sram.split_banks` at this module's `MACRO_MAX_BITS` (tests lower it to bank small buffers)."""
    return split_banks(words, word, MACRO_MAX_BITS)


def diff_layout(cfg: AcceleratorConfig) -> bool:
    """True where the D buffers are the difference-sum buffer (docs/decisions.md D122): a delta config with
    ``diff_sram_kib`` > 0 (D84). Then the D buffers split ``diff_sram_kib`` and the state buffer is all of
    ``psum_sram_kib``; else (D73) the state buffer and each D buffer are a third of ``psum_sram_kib``."""
    return cfg.organisation == "delta" and cfg.diff_sram_kib > 0


def delta_combine_sizes(cfg: AcceleratorConfig, ways: int = 1, out_ways: int = 1, buffers: int = 2) -> dict:
    """``{"word": bits, "bank_depth": words per macro, "banks": macros per buffer, "state_depth": words,
    "d_depth": words per D buffer, "way_depth": words per macro of a D buffer's way, "way_banks": its macros}``
    (module docstring), in words of C acc bits. Without a difference-sum buffer (D73) each buffer of the
    partial-sum SRAM (the state, each D) takes a third of ``psum_sram_kib``; with one (`diff_layout`,
    docs/decisions.md D122) the state buffer takes all of ``psum_sram_kib`` and each of the ``buffers`` D buffers a
    ``buffers``-th of ``diff_sram_kib``. A buffer is ``banks`` macros of ``bank_depth`` words; with W accumulate
    ``ways`` (a power of two, docs/decisions.md D107) each D buffer is W ways of a W-th each (``d_depth`` = W x
    ``way_banks`` x ``way_depth``; W = 1: one buffer's banking). With V > 1 ``out_ways`` (docs/decisions.md D112)
    the state buffer is V position banks of a V-th each, keys added: ``"lane_depth"`` words per macro,
    ``"lane_banks"`` its macros, ``"lane_words"`` words per position bank (``lane_banks x lane_depth``).

    Raises:
        ValueError: the state buffer or a D buffer holds fewer than ``array_rows`` words (one pool's values; the
            message names ``psum_sram_kib`` or ``diff_sram_kib``)."""
    word = cfg.array_cols * cfg.acc_bits
    diff = diff_layout(cfg)
    state = cfg.psum_sram_kib * 8192 // word // (1 if diff else 3)
    dwords = cfg.diff_sram_kib * 8192 // word // buffers if diff else state
    for what, kib, n, per in (("psum_sram_kib", cfg.psum_sram_kib, state, "state buffer" if diff else "buffer"),
                              ("diff_sram_kib", cfg.diff_sram_kib, dwords, f"of its {buffers} D buffers")):
        if n < cfg.array_rows:
            raise ValueError(f"{cfg.name}: {what} = {kib} holds {n} words of {word} bits per delta combine {per}, "
                             f"fewer than array_rows = {cfg.array_rows}")
        if not diff:
            break
    bank, banks = _split(state, word)
    wd, wb = _split(dwords // ways, word)
    out = {"word": word, "bank_depth": bank, "banks": banks, "state_depth": banks * bank,
           "d_depth": ways * wb * wd, "way_depth": wd, "way_banks": wb}
    if out_ways > 1:
        ld, lb = _split(state // out_ways, word)
        out.update(lane_depth=ld, lane_banks=lb, lane_words=ld * lb)
    return out


def pool_state_words(cfg: AcceleratorConfig, grid, axes, s: int, out_ways: int = 1) -> int:
    """Words (C acc bits each) of the partial-sum state buffer that ``kaleido_dcore`` built with ``pool_state``
    (docs/decisions.md D133) addresses for an op of ``grid`` ``(F, H, W)``, axis classes ``axes`` (``"f"``, ``"h"``,
    ``"w"``; `sim.timing.delta.classes`), ``s`` column blocks a group: the state SRAM's regions (D79) over the
    walked group's column blocks instead of the op's: per column block of the group the pool's R slots (an ``f``
    class: a value lives from frame f to f + 1 of the same pool), from word R the frame's word (a ``w`` class: the
    pool's last position, read by the next pool's first, F words), from R + F the (frame, column) words (an ``h``
    class: F W), at fixed offsets, so ``s (R + F [w or h] + F W [h])``; with V > 1 ``out_ways`` (D112) each of the V
    position banks holds ``s (R / V + F [w or h] + F W / V [h])`` (the ``h`` words need V | W, `hw.delta_core.
    core_ports` refuses others): V times that. One ``f`` class (every op but a fused ``qk`` at 480p, D130): ``R s``,
    against ``A F H W n_cb`` at the op's address."""
    F, _H, W = grid  # noqa: N806
    R, V = cfg.array_rows, out_ways  # noqa: N806
    per = R // V + (F if {"w", "h"} & set(axes) else 0) + (F * W // V if "h" in axes else 0)
    return V * per * s


def default_ways(cfg: AcceleratorConfig) -> int:
    """``kaleido_dcore``'s accumulate ways by default (docs/decisions.md D107, D108): the largest power of two W <= d
    (``drain_rows_per_cycle``, itself a power of two: the row FIFO's banks) whose D buffer on W ways
    (`delta_combine_sizes`' ``d_depth``) still holds ``array_rows`` words, the least one buffer must hold (one pool's
    sums). That is d on every shipped delta config (tiny-8x8 delta: 2, the balanced preset: 4).

    Raises:
        ValueError: as `delta_combine_sizes`."""
    w = 1 << (max(1, cfg.drain_rows_per_cycle).bit_length() - 1)
    while w > 1 and delta_combine_sizes(cfg, w, buffers=3)["d_depth"] < cfg.array_rows:
        w //= 2
    return w


def default_out_ways(cfg: AcceleratorConfig) -> int:
    """``kaleido_dcore``'s output lanes V by default (docs/decisions.md D113, D112's lanes): the largest power of two
    V <= `default_ways` (the accumulate ways W, D108) dividing ``array_rows`` (D112: a run's next x is the next pool's
    first). That is W on every shipped delta config (tiny-8x8 delta: 2, the balanced preset: 4).
    ``kaleido_dcore_front`` stays at V = 1 (the front is not built with lanes, D112).

    Raises:
        ValueError: as `default_ways`."""
    v = default_ways(cfg)
    while v > 1 and cfg.array_rows % v:
        v //= 2
    return v


def default_d_buffers(cfg: AcceleratorConfig) -> int:
    """``kaleido_dcore``'s D buffers by default (docs/decisions.md D115): 3 where it has V > 1 output lanes
    (`default_out_ways`, so W > 1 ways; every shipped delta config: ``kaleido_dcombine_w<W>_v<V>_b3``), else 2 (the
    one-way core has no residue path). A third buffer lets a row of segment k + 2 accumulate while k is walked
    (D108's head's gate); `sim.cost.controllers.built_sram_bits` charges its macros (D114, D122). ``kaleido_dcore_front`` stays on 2.

    Raises:
        ValueError: as `default_ways`."""
    return 3 if default_out_ways(cfg) > 1 else 2


def state_sram_sizes(cfg: AcceleratorConfig, out_ways: int = 1) -> dict | None:
    """``{"word": STATE_BITS, "depth": words per column bank, "bank_depth", "banks"}`` of the state SRAM's C
    column banks (module docstring), ``state_sram_kib x 8192 / (C x STATE_BITS)`` words each; None without one.
    With V > 1 ``out_ways`` (docs/decisions.md D112) each column bank is V position banks of a V-th each: keys
    ``"lane_depth"``, ``"lane_banks"``, ``"lane_words"`` as `delta_combine_sizes`'.

    Raises:
        ValueError: ``state_sram_kib`` holds fewer than ``array_rows`` words per column bank (one query tile's
            f class over one column block)."""
    if not cfg.state_sram_kib:
        return None
    words = cfg.state_sram_kib * 8192 // (cfg.array_cols * STATE_BITS)
    if words < cfg.array_rows:
        raise ValueError(f"{cfg.name}: state_sram_kib = {cfg.state_sram_kib} holds {words} words of {STATE_BITS} "
                         f"bits per column bank, fewer than array_rows = {cfg.array_rows}")
    bank, banks = _split(words, STATE_BITS)
    out = {"word": STATE_BITS, "depth": banks * bank, "bank_depth": bank, "banks": banks}
    if out_ways > 1:
        ld, lb = _split(words // out_ways, STATE_BITS)
        out.update(lane_depth=ld, lane_banks=lb, lane_words=ld * lb)
    return out


def combine_way_counts(cfg: AcceleratorConfig) -> dict:
    """``{"adders": n, "add_bits": bits, "reg_bits": bits}`` of one way's datapath (module docstring): the
    acc-bit adders and word registers counted by `sim.cost.area` (control registers, address registers and
    the selects are not counted, as for the other combine units)."""
    C, acc = cfg.array_cols, cfg.acc_bits  # noqa: N806
    return {"adders": WAY_ADDER_ROWS * C, "add_bits": WAY_ADDER_ROWS * C * acc,
            "reg_bits": WAY_REGISTER_ROWS * C * acc}


def dcombine_module_name(ways: int = 1, out_ways: int = 1, buffers: int = 2) -> str:
    """Verilog module name of `DeltaCombine` with ``ways`` accumulate ways, ``out_ways`` output lanes and ``buffers``
    D buffers (``kaleido_dcombine_w<W>``, ``kaleido_dcombine_w<W>_v<V>`` with V > 1, ``..._b<n>`` with n != 2 D
    buffers, docs/decisions.md D115; one way: the plain name)."""
    name = DCOMBINE_MODULE_NAME if ways == 1 else f"{DCOMBINE_MODULE_NAME}_w{ways}"
    name = name if out_ways == 1 else f"{name}_v{out_ways}"
    return name if buffers == 2 else f"{name}_b{buffers}"


def psum_buffers_kib(cfg: AcceleratorConfig, buffers: int = 2) -> float:
    """KiB of the delta combine's partial-sum SRAM with ``buffers`` D buffers (docs/decisions.md D115): the state
    buffer and each D buffer are a third of ``psum_sram_kib`` each (`delta_combine_sizes`), so ``buffers`` D buffers
    take ``psum_sram_kib (1 + buffers) / 3``; 2 (as ``psum_sram_kib`` is sized, D68) gives ``psum_sram_kib``. With
    a difference-sum buffer (`diff_layout`, D122) the D buffers are not in it: ``psum_sram_kib``."""
    return cfg.psum_sram_kib * (1 if diff_layout(cfg) else (1 + buffers) / 3)


def _sel_bits(buffers: int) -> int:
    """Bits of a D-buffer number: ``a_sel``'s per way and ``c_buf`` with ``buffers`` > 2 (docs/decisions.md D115)."""
    return (buffers - 1).bit_length()


def way_address_bits(cfg: AcceleratorConfig, ways: int = 1, buffers: int = 2) -> int:
    """Bits of a D address within one way (``a_addr``'s per way; ``c_daddr`` has log2 W more, the way low)."""
    sz = delta_combine_sizes(cfg, ways, buffers=buffers)
    return _abits(sz["d_depth"] // ways)


def _sel_ports(ways: int, buffers: int) -> dict:
    """The buffer selects (module docstring): with 2 D buffers ``c_sel`` (1 bit: the buffer the output does not read)
    and ``a_sel`` (W > 1: one bit per way); with ``buffers`` n > 2 (docs/decisions.md D115) ``c_buf`` (the buffer
    the output reads) and ``a_sel`` (`_sel_bits` per way, way w at bits ``[w b, (w + 1) b)``)."""
    if buffers == 2:
        return {"c_sel": In(1), **({"a_sel": In(ways)} if ways > 1 else {})}
    return {"c_buf": In(range(buffers)), "a_sel": In(unsigned(ways * _sel_bits(buffers)))}


def dcombine_signature(cfg: AcceleratorConfig, ways: int = 1, out_ways: int = 1, buffers: int = 2) -> wiring.Signature:
    sz, st = delta_combine_sizes(cfg, ways, out_ways, buffers), state_sram_sizes(cfg, out_ways)
    daw = way_address_bits(cfg, ways, buffers)
    da = daw + (ways - 1).bit_length()
    if out_ways > 1:
        return _lanes_signature(sz, st, daw, da, ways, out_ways, cfg.array_cols, buffers)
    ra = max(_abits(sz["state_depth"]), _abits(st["depth"]) if st else 1)
    sel = _sel_ports(ways, buffers)
    return wiring.Signature({
        **({"c_sel": sel.pop("c_sel")} if buffers == 2 else {}),
        "a_valid": In(ways), "a_first": In(ways), "a_addr": In(unsigned(ways * daw)),
        "a_data": In(unsigned(ways * sz["word"])), **sel,
        "c_valid": In(1), "c_first": In(1), "c_last": In(1), "c_direct": In(1), "c_has": In(1),
        "c_daddr": In(unsigned(da)), "c_reg": In(1), "c_sram": In(1), "c_raddr": In(unsigned(ra)),
        "c_waddr": In(unsigned(ra)), "c_keep": In(1), "c_hold": In(1), "c_cols": In(range(cfg.array_cols + 1)),
        "y_valid": Out(1), "y_data": Out(unsigned(sz["word"])),
    })


def _lanes_signature(sz, st, daw, da, W, V, C, buffers=2) -> wiring.Signature:  # noqa: N803
    """`dcombine_signature` with V > 1 output lanes (docs/decisions.md D112): per lane (slice l of each V-wide
    port) ``c_valid``, ``c_direct``, ``c_has``, ``c_daddr`` (way low, as one lane's), ``c_reg`` (lane 0: the lane
    register; lane l > 0: lane l - 1's ``S`` of the same step), ``c_raddr``/``c_waddr`` (the carried store's
    position bank low, log2 V bits, the word in it above), ``c_keep``, ``c_hold``; shared by the step ``c_sel``,
    ``c_first``, ``c_last``, ``c_sram``, ``c_cols``; ``y_valid``/``y_data`` one bit / word per lane."""
    ra = max(_abits(sz["lane_words"]), _abits(st["lane_words"]) if st else 1) + (V - 1).bit_length()
    sel = _sel_ports(W, buffers)
    return wiring.Signature({
        **({"c_sel": sel.pop("c_sel")} if buffers == 2 else {}),
        "a_valid": In(W), "a_first": In(W), "a_addr": In(unsigned(W * daw)),
        "a_data": In(unsigned(W * sz["word"])), **sel,
        "c_valid": In(V), "c_first": In(1), "c_last": In(1), "c_direct": In(V), "c_has": In(V),
        "c_daddr": In(unsigned(V * da)), "c_reg": In(V), "c_sram": In(1), "c_raddr": In(unsigned(V * ra)),
        "c_waddr": In(unsigned(V * ra)), "c_keep": In(V), "c_hold": In(V), "c_cols": In(range(C + 1)),
        "y_valid": Out(V), "y_data": Out(unsigned(V * sz["word"])),
    })


class DeltaCombine(wiring.Component):
    """The delta combine unit with its partial-sum SRAM and state SRAM macros (module docstring).

    Words: column j's value at bits ``[j acc, (j + 1) acc)``, signed (``a_data`` as the delta array drains
    it, ``y_data``, the partial-sum macros' words); a state-SRAM bank holds column j's `STATE_BITS` bits.

    Args:
        instance: the SRAM macros as instances of their emitted modules (Verilog) or inline (simulation).
        ways, out_ways: accumulate ways W and output lanes V (module docstring).
        buffers: D buffers n (docs/decisions.md D115; 2 by default, the module as before): n > 2 needs W > 1; way
            w's accumulate command writes buffer ``a_sel[w]`` and the output reads buffer ``c_buf``; the controller
            never has them meet in one way and cycle.

    After elaboration, ``probes`` names the enables a test bench counts: ``"st_re"``/``"st_we"`` (per column
    bank of the state SRAM), ``"ps_re"``/``"ps_we"`` (the partial-sum state buffer), ``"lane_we"`` (C bits).
    """

    def __init__(self, cfg: AcceleratorConfig, instance: bool = False, ways: int = 1, out_ways: int = 1,
                 buffers: int = 2):
        if ways < 1 or ways & (ways - 1):
            raise ValueError(f"ways = {ways}: a power of two")
        if out_ways < 1 or out_ways & (out_ways - 1) or (out_ways > 1 and out_ways > ways):
            raise ValueError(f"out_ways = {out_ways}: a power of two at most ways = {ways}")
        if buffers < 2 or (buffers > 2 and ways == 1):
            raise ValueError(f"buffers = {buffers}: at least 2, more than 2 only on ways > 1 (docs/decisions.md D115)")
        self.cfg, self.instance, self.ways, self.out_ways, self.buffers = cfg, instance, ways, out_ways, buffers
        self.probes: dict = {}
        super().__init__(dcombine_signature(cfg, ways, out_ways, buffers))

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates: the partial-sum buffers'
        banks (with ways, the state buffer's, then the D ways'), then the state SRAM's (when it has one)."""
        sz, st = delta_combine_sizes(self.cfg, self.ways, self.out_ways, self.buffers), state_sram_sizes(self.cfg)
        if self.out_ways > 1:  # the carried stores' position banks, the D ways (D112)
            st = state_sram_sizes(self.cfg, self.out_ways)
            return list(dict.fromkeys([("1r1w", sz["lane_depth"], sz["word"], None),
                                       ("1r1w", sz["way_depth"], sz["word"], None)]
                                      + ([("1r1w", st["lane_depth"], st["word"], None)] if st else [])))
        out = [("1r1w", sz["bank_depth"], sz["word"], None)]
        if ("1r1w", sz["way_depth"], sz["word"], None) not in out:
            out.append(("1r1w", sz["way_depth"], sz["word"], None))
        if st and ("1r1w", st["bank_depth"], st["word"], None) not in out:
            out.append(("1r1w", st["bank_depth"], st["word"], None))
        return out

    def elaborate(self, platform):
        if self.out_ways > 1:
            return self._elaborate_lanes()
        if self.ways > 1:
            return self._elaborate_ways()
        m = Module()
        C, ab = self.cfg.array_cols, self.cfg.acc_bits  # noqa: N806
        sz, st = delta_combine_sizes(self.cfg, buffers=self.buffers), state_sram_sizes(self.cfg)
        word = sz["word"]
        dbuf = [_banked(m, f"d{i}", sz["way_banks"], sz["way_depth"], word, self.instance) for i in range(2)]
        state = _banked(m, "state", sz["banks"], sz["bank_depth"], word, self.instance)
        cols = ([_banked(m, f"st{j}", st["banks"], st["bank_depth"], st["word"], self.instance) for j in range(C)]
                if st else [])

        # Second-stage registers of the accumulate stream (the commands of the previous cycle); `_output` has the
        # output stream's.
        a_v, a_first, a_addr = Signal(name="a_v"), Signal(name="a_first_q"), Signal.like(self.a_addr, name="a_addr_q")
        a_data, a_fwd, a_sum = Signal(word, name="a_data_q"), Signal(name="a_fwd"), Signal(word, name="a_sum")
        sel, last_a = Signal(name="sel_q"), Signal(word, name="last_a")
        m.d.sync += [a_v.eq(self.a_valid), a_first.eq(self.a_first), a_addr.eq(self.a_addr), a_data.eq(self.a_data),
                     a_fwd.eq(a_v & (a_addr == self.a_addr) & (sel == self.c_sel)), last_a.eq(a_sum),
                     sel.eq(self.c_sel)]
        for i, ports in enumerate(dbuf):  # buffer c_sel: accumulate; the other: output
            acc_here = self.c_sel == i
            m.d.comb += [ports.re.eq(Mux(acc_here, self.a_valid & ~self.a_first, self.c_valid & self.c_has)),
                         ports.raddr.eq(Mux(acc_here, self.a_addr, self.c_daddr)),
                         ports.we.eq(a_v & (sel == i)), ports.wmask.eq(1), ports.waddr.eq(a_addr),
                         ports.wdata.eq(a_sum)]
        # Named words: Amaranth re-emits an expression at every use, and each column slices these.
        d_old, d_out = Signal(word, name="d_old"), Signal(word, name="d_out")
        m.d.comb += [d_old.eq(Mux(a_fwd, last_a, Mux(sel, dbuf[1].rdata, dbuf[0].rdata))),
                     d_out.eq(Mux(sel, dbuf[0].rdata, dbuf[1].rdata))]
        for j in range(C):
            col = slice(j * ab, (j + 1) * ab)
            a_new = Signal(signed(ab), name=f"a_new{j}")  # D_a[t] += the drained row
            m.d.comb += [a_new.eq(Mux(a_first, 0, d_old[col].as_signed()) + a_data[col].as_signed()),
                         a_sum[col].eq(a_new)]
        self._output(m, state, cols, d_out, C, ab, word)
        return m

    def _elaborate_ways(self):  # noqa: C901
        """`elaborate` with W > 1 accumulate ways (docs/decisions.md D107): way w's command (``a_*``'s w-th slice)
        reads, adds and writes way w of the D buffer ``a_sel[w]`` at its in-way address, with its own forwarding;
        the output command reads way ``c_daddr mod W`` of the buffer other than ``c_sel`` at ``c_daddr div W``
        (the controller never has a way accumulate into the buffer the output reads in one cycle)."""
        m = Module()
        C, ab, W = self.cfg.array_cols, self.cfg.acc_bits, self.ways  # noqa: N806
        sz, st = delta_combine_sizes(self.cfg, W, buffers=self.buffers), state_sram_sizes(self.cfg)
        word, lw = sz["word"], (W - 1).bit_length()
        dbuf = [[_banked(m, f"d{i}_w{w}", sz["way_banks"], sz["way_depth"], word, self.instance) for w in range(W)]
                for i in range(self.buffers)]
        state = _banked(m, "state", sz["banks"], sz["bank_depth"], word, self.instance)
        cols = ([_banked(m, f"st{j}", st["banks"], st["bank_depth"], st["word"], self.instance) for j in range(C)]
                if st else [])

        out_read = self._out_buffer(m)
        c_way = Signal(max(1, lw), name="c_way_q")  # the output command's way (its D read)
        m.d.sync += c_way.eq(self.c_daddr[:lw])
        c_way_now = self.c_daddr[:lw]
        c_in = self.c_daddr[lw:]
        for w in range(W):
            self._accumulate_way(m, dbuf, w, self.c_valid & self.c_has & (c_way_now == w), c_in)
        d_out = Signal(word, name="d_out")
        out_w = out_read(dbuf, 0)
        for w in range(1, W):
            out_w = Mux(c_way == w, out_read(dbuf, w), out_w)
        m.d.comb += d_out.eq(out_w)
        self._output(m, state, cols, d_out, C, ab, word)
        return m

    def _elaborate_lanes(self):  # noqa: C901
        """`elaborate` with V > 1 output lanes (docs/decisions.md D112, D111's items 3-5) on W >= V accumulate ways:
        lane l's output command reads way ``c_daddr_l mod W`` of the buffer other than ``c_sel`` (a step's V tokens
        are consecutive, so their ways are distinct: each way is read by at most one lane, the lanes' addresses
        rotated onto the ways and the words back); the carried store is the state buffer, or (``c_sram``) the state
        SRAM's C column banks, each in V position banks (the address's low log2 V bits), a step's V reads and V
        writes in distinct banks; lane l's
        ``S_l = (c_direct_l ? 0 : S_nb,l) + (c_has_l ? D_l : 0)`` with ``S_nb,l`` lane l - 1's ``S_{l-1}`` of the
        same step where ``c_reg_l`` and l > 0 (the w axis's chain), the lane register where ``c_reg_0``, else the
        store (forwarded from any lane's write of the previous step: V x V address compares); ``Y_l`` summed over
        the step's classes, V rows a cycle. The lane register takes the highest lane's ``S`` with ``c_hold``."""
        m = Module()
        C, ab, W, V = self.cfg.array_cols, self.cfg.acc_bits, self.ways, self.out_ways  # noqa: N806
        sz = delta_combine_sizes(self.cfg, W, V, self.buffers)
        word, lw, lv = sz["word"], (W - 1).bit_length(), (V - 1).bit_length()
        da = way_address_bits(self.cfg, W, self.buffers) + lw
        ra = len(self.c_raddr) // V
        dbuf = [[_banked(m, f"d{i}_w{w}", sz["way_banks"], sz["way_depth"], word, self.instance) for w in range(W)]
                for i in range(self.buffers)]
        banks = [_banked(m, f"state_v{b}", sz["lane_banks"], sz["lane_depth"], word, self.instance) for b in range(V)]
        st = state_sram_sizes(self.cfg, V)
        cols = ([[_banked(m, f"st{j}_v{b}", st["lane_banks"], st["lane_depth"], st["word"], self.instance)
                  for b in range(V)] for j in range(C)] if st else [])
        out_read = self._out_buffer(m)
        daddr = [self.c_daddr[lane * da:(lane + 1) * da] for lane in range(V)]
        reads_d = [self.c_valid[lane] & self.c_has[lane] for lane in range(V)]
        c_way = [Signal(max(1, lw), name=f"c_way_q{lane}") for lane in range(V)]  # each lane's way (its D read)
        m.d.sync += [c_way[lane].eq(daddr[lane][:lw]) for lane in range(V)]
        for w in range(W):  # way w is read by the lane whose token sits there (at most one)
            hit, addr = Const(0, 1), Const(0, da - lw)
            for lane in range(V):
                mine = reads_d[lane] & (daddr[lane][:lw] == w)
                hit, addr = hit | mine, Mux(mine, daddr[lane][lw:], addr)
            out_hit, out_addr = Signal(name=f"out_hit{w}"), Signal(da - lw, name=f"out_addr{w}")
            m.d.comb += [out_hit.eq(hit), out_addr.eq(addr)]
            self._accumulate_way(m, dbuf, w, out_hit, out_addr)
        d_outs = []
        for lane in range(V):
            d_out = Signal(word, name=f"d_out{lane}")
            out_w = out_read(dbuf, 0)
            for w in range(1, W):
                out_w = Mux(c_way[lane] == w, out_read(dbuf, w), out_w)
            m.d.comb += d_out.eq(out_w)
            d_outs.append(d_out)

        # the output stream's second stage, per lane
        V_ = range(V)  # noqa: N806
        c_v, c_direct, c_has, c_reg = (Signal(V, name=n) for n in ("c_v", "c_direct_q", "c_has_q", "c_reg_q"))
        c_first, c_last, c_hold = Signal(name="c_first_q"), Signal(name="c_last_q"), Signal(V, name="c_hold_q")
        c_sram = Signal(name="c_sram_q")
        c_cols, c_we = Signal.like(self.c_cols, name="c_cols_q"), Signal(V, name="c_we")
        c_waddr = [Signal(ra, name=f"c_waddr_q{lane}") for lane in V_]
        raddr = [self.c_raddr[lane * ra:(lane + 1) * ra] for lane in V_]
        waddr = [self.c_waddr[lane * ra:(lane + 1) * ra] for lane in V_]
        s = [Signal(word, name=f"s{lane}") for lane in V_]
        last_s = [Signal(word, name=f"last_s{lane}") for lane in V_]
        fwd = [Signal(V, name=f"c_fwd{lane}") for lane in V_]  # lane l's read is lane k's write of the step before
        rbank = [Signal(max(1, lv), name=f"c_rbank_q{lane}") for lane in V_]
        lane_reg, y = Signal(word, name="lane"), [Signal(word, name=f"y{lane}") for lane in V_]
        reads = [self.c_valid[lane] & ~self.c_direct[lane] & ~self.c_reg[lane] for lane in V_]
        m.d.sync += [c_v.eq(self.c_valid), c_direct.eq(self.c_direct), c_has.eq(self.c_has), c_reg.eq(self.c_reg),
                     c_first.eq(self.c_first), c_last.eq(self.c_last), c_hold.eq(self.c_valid & self.c_hold),
                     c_cols.eq(self.c_cols), c_we.eq(self.c_valid & self.c_keep), c_sram.eq(self.c_sram)]
        for lane in V_:
            m.d.sync += [c_waddr[lane].eq(waddr[lane]), last_s[lane].eq(s[lane]), rbank[lane].eq(raddr[lane][:lv]),
                         fwd[lane].eq(Cat(*(c_we[k] & (c_sram == self.c_sram) & (c_waddr[k] == raddr[lane])
                                            for k in V_)))]

        def route(ports, b, rd, wr, data):  # bank b: read and written by at most one lane a step
            re, ra_, we, wa, wd = Const(0, 1), Const(0, ra - lv), Const(0, 1), Const(0, ra - lv), Const(0, len(data[0]))
            for lane in V_:
                rh = rd & reads[lane] & (raddr[lane][:lv] == b)
                wh = wr & c_we[lane] & (c_waddr[lane][:lv] == b)
                re, ra_ = re | rh, Mux(rh, raddr[lane][lv:], ra_)
                we, wa, wd = we | wh, Mux(wh, c_waddr[lane][lv:], wa), Mux(wh, data[lane], wd)
            m.d.comb += [ports.re.eq(re), ports.raddr.eq(ra_), ports.we.eq(we), ports.wmask.eq(1),
                         ports.waddr.eq(wa), ports.wdata.eq(wd)]

        for b, ports in enumerate(banks):
            route(ports, b, ~self.c_sram, ~c_sram, s)
        for j, col in enumerate(cols):  # the state SRAM's column j, its valid columns only
            for b, ports in enumerate(col):
                route(ports, b, self.c_sram & (self.c_cols > j), c_sram & (c_cols > j),
                      [s[lane][j * ab:j * ab + STATE_BITS] for lane in V_])
        lane_we = Signal(C, name="lane_we")
        hold_s = Const(0, word)
        for lane in V_:  # the highest lane holding: the next step's lane 0 reads it
            hold_s = Mux(c_hold[lane], s[lane], hold_s)
        for j in range(C):
            m.d.comb += lane_we[j].eq(c_hold.any() & (c_cols > j))
            with m.If(lane_we[j]):
                m.d.sync += lane_reg[j * ab:(j + 1) * ab].eq(hold_s[j * ab:(j + 1) * ab])
        for lane in V_:
            stored = banks[0].rdata
            for b in range(1, V):
                stored = Mux(rbank[lane] == b, banks[b].rdata, stored)
            if cols:  # the state SRAM's words, sign-extended to acc bits
                st_rdata = Signal(word, name=f"st_rdata{lane}")
                for j, col in enumerate(cols):
                    cw = col[0].rdata
                    for b in range(1, V):
                        cw = Mux(rbank[lane] == b, col[b].rdata, cw)
                    m.d.comb += st_rdata[j * ab:(j + 1) * ab].eq(cw.as_signed())
                stored = Mux(c_sram, st_rdata, stored)
            for k in V_:
                stored = Mux(fwd[lane][k], last_s[k], stored)
            s_nb = Signal(word, name=f"s_nb{lane}")
            m.d.comb += s_nb.eq(Mux(c_reg[lane], lane_reg if lane == 0 else s[lane - 1], stored))
            y_l = self.y_data[lane * word:(lane + 1) * word]
            for j in range(C):
                col = slice(j * ab, (j + 1) * ab)
                s_new = Signal(signed(ab), name=f"s_new{lane}_{j}")
                m.d.comb += [s_new.eq(Mux(c_direct[lane], 0, s_nb[col].as_signed())
                                      + Mux(c_has[lane], d_outs[lane][col].as_signed(), 0)), s[lane][col].eq(s_new)]
                y_new = Signal(signed(ab), name=f"y_new{lane}_{j}")
                m.d.comb += [y_new.eq(Mux(c_first, 0, y_l[col].as_signed()) + s_new), y[lane][col].eq(y_new)]
            with m.If(c_v[lane]):
                m.d.sync += y_l.eq(y[lane])
        m.d.sync += self.y_valid.eq(c_v & Mux(c_last, (1 << V) - 1, 0))
        self.probes = {"st_re": [Cat(*(p.re for p in col)) for col in cols],
                       "st_we": [Cat(*(p.we for p in col)) for col in cols], "ps_re": Cat(*(p.re for p in banks)),
                       "ps_we": Cat(*(p.we for p in banks)), "lane_we": lane_we}
        return m

    def _out_buffer(self, m):
        """The output's D buffer, registered for its read data: returns ``read(dbuf, w)``, way w's word of it. Two
        buffers: the one other than ``c_sel``; n > 2 (docs/decisions.md D115): ``c_buf``."""
        if self.buffers == 2:
            sel = Signal(name="sel_q")
            m.d.sync += sel.eq(self.c_sel)
            return lambda dbuf, w: Mux(sel, dbuf[0][w].rdata, dbuf[1][w].rdata)
        buf = Signal(range(self.buffers), name="c_buf_q")
        m.d.sync += buf.eq(self.c_buf)

        def read(dbuf, w):
            out = dbuf[0][w].rdata
            for i in range(1, self.buffers):
                out = Mux(buf == i, dbuf[i][w].rdata, out)
            return out
        return read

    def _accumulate_way(self, m, dbuf, w, out_hit, out_addr):
        """Way w of the W accumulate ways (`_elaborate_ways`, `_elaborate_lanes`): its command (``a_*``'s w-th
        slice) reads, adds and writes way w of D buffer ``a_sel[w]`` with its own forwarding; the other buffer's
        way w is read for the output where ``out_hit`` (an output read of this way) at ``out_addr`` (in the way)."""
        C, ab, word = self.cfg.array_cols, self.cfg.acc_bits, self.cfg.array_cols * self.cfg.acc_bits  # noqa: N806
        daw = way_address_bits(self.cfg, self.ways, self.buffers)
        av, af = self.a_valid[w], self.a_first[w]
        aa, ad = self.a_addr[w * daw:(w + 1) * daw], self.a_data[w * word:(w + 1) * word]
        a_v, a_first = Signal(name=f"a_v{w}"), Signal(name=f"a_first_q{w}")
        a_addr, a_data = Signal(daw, name=f"a_addr_q{w}"), Signal(word, name=f"a_data_q{w}")
        a_fwd, a_sum, last_a = Signal(name=f"a_fwd{w}"), Signal(word, name=f"a_sum{w}"), Signal(word,
                                                                                               name=f"last_a{w}")
        n, sb = self.buffers, _sel_bits(self.buffers)
        asel, a_selq = self.a_sel[w * sb:(w + 1) * sb], Signal(sb, name=f"a_sel_q{w}")
        m.d.sync += [a_v.eq(av), a_first.eq(af), a_addr.eq(aa), a_data.eq(ad), a_selq.eq(asel),
                     a_fwd.eq(a_v & (a_addr == aa) & (a_selq == asel)), last_a.eq(a_sum)]
        for i in range(n):
            ports, acc_here = dbuf[i][w], av & (asel == i)
            out_here = out_hit & ((self.c_sel != i) if n == 2 else (self.c_buf == i))
            m.d.comb += [ports.re.eq(Mux(acc_here, ~af, out_here)),
                         ports.raddr.eq(Mux(acc_here, aa, out_addr)), ports.we.eq(a_v & (a_selq == i)),
                         ports.wmask.eq(1), ports.waddr.eq(a_addr), ports.wdata.eq(a_sum)]
        d_old = Signal(word, name=f"d_old{w}")
        old = Mux(a_selq, dbuf[1][w].rdata, dbuf[0][w].rdata)
        for i in range(2, n):
            old = Mux(a_selq == i, dbuf[i][w].rdata, old)
        m.d.comb += d_old.eq(Mux(a_fwd, last_a, old))
        for j in range(C):
            col = slice(j * ab, (j + 1) * ab)
            a_new = Signal(signed(ab), name=f"a_new{w}_{j}")  # D_a[t] += the drained row
            m.d.comb += [a_new.eq(Mux(a_first, 0, d_old[col].as_signed()) + a_data[col].as_signed()),
                         a_sum[col].eq(a_new)]

    def _output(self, m, state, cols, d_out, C, ab, word):  # noqa: N803
        """The output stream, the same for one way and W: the carried store (state macro, state SRAM columns, lane
        register) read, ``S_a[t] = S_a[nb] + D_a[t]`` from ``d_out`` (the output buffer's word), ``Y`` summed."""
        c_v, c_direct, c_has = Signal(name="c_v"), Signal(name="c_direct_q"), Signal(name="c_has_q")
        c_first, c_last, c_reg = Signal(name="c_first_q"), Signal(name="c_last_q"), Signal(name="c_reg_q")
        c_sram, c_hold = Signal(name="c_sram_q"), Signal(name="c_hold_q")
        c_cols = Signal.like(self.c_cols, name="c_cols_q")
        c_waddr, c_we = Signal.like(self.c_waddr, name="c_waddr_q"), Signal(name="c_we")
        c_fwd, s = Signal(name="c_fwd"), Signal(word, name="s")
        last_s = Signal(word, name="last_s")
        lane, y = Signal(word, name="lane"), Signal(word, name="y")
        reads = self.c_valid & ~self.c_direct & ~self.c_reg  # the carried store is read
        m.d.sync += [c_v.eq(self.c_valid), c_direct.eq(self.c_direct), c_has.eq(self.c_has), c_waddr.eq(self.c_waddr),
                     c_first.eq(self.c_first), c_last.eq(self.c_last), c_reg.eq(self.c_reg), c_sram.eq(self.c_sram),
                     c_hold.eq(self.c_valid & self.c_hold), c_cols.eq(self.c_cols),
                     c_we.eq(self.c_valid & self.c_keep),
                     c_fwd.eq(c_we & (c_sram == self.c_sram) & (c_waddr == self.c_raddr)), last_s.eq(s)]
        m.d.comb += [state.re.eq(reads & ~self.c_sram), state.raddr.eq(self.c_raddr),
                     state.we.eq(c_we & ~c_sram), state.wmask.eq(1), state.waddr.eq(c_waddr), state.wdata.eq(s)]
        lane_we = Signal(C, name="lane_we")
        st_rdata = Signal(word, name="st_rdata")  # the state SRAM's words, sign-extended to acc bits
        for j, ports in enumerate(cols):
            m.d.comb += [ports.re.eq(reads & self.c_sram & (self.c_cols > j)), ports.raddr.eq(self.c_raddr),
                         ports.we.eq(c_we & c_sram & (c_cols > j)), ports.wmask.eq(1), ports.waddr.eq(c_waddr),
                         ports.wdata.eq(s[j * ab:j * ab + STATE_BITS]),
                         st_rdata[j * ab:(j + 1) * ab].eq(ports.rdata.as_signed())]
        for j in range(C):
            m.d.comb += lane_we[j].eq(c_hold & (c_cols > j))
            with m.If(lane_we[j]):
                m.d.sync += lane[j * ab:(j + 1) * ab].eq(s[j * ab:(j + 1) * ab])
        s_nb = Signal(word, name="s_nb")
        stored = Mux(c_sram, st_rdata, state.rdata) if cols else state.rdata
        m.d.comb += s_nb.eq(Mux(c_reg, lane, Mux(c_fwd, last_s, stored)))
        for j in range(C):
            col = slice(j * ab, (j + 1) * ab)
            s_new = Signal(signed(ab), name=f"s_new{j}")  # S_a[t] = S_a[nb] + D_a[t]
            m.d.comb += [s_new.eq(Mux(c_direct, 0, s_nb[col].as_signed()) + Mux(c_has, d_out[col].as_signed(), 0)),
                         s[col].eq(s_new)]
            y_new = Signal(signed(ab), name=f"y_new{j}")  # Y = sum_a S_a[t], y_data its running sum
            m.d.comb += [y_new.eq(Mux(c_first, 0, self.y_data[col].as_signed()) + s_new), y[col].eq(y_new)]
        with m.If(c_v):
            m.d.sync += self.y_data.eq(y)
        m.d.sync += self.y_valid.eq(c_v & c_last)
        self.probes = {"st_re": [p.re for p in cols], "st_we": [p.we for p in cols], "ps_re": state.re,
                       "ps_we": state.we, "lane_we": lane_we}


class _Ports:
    """The ports of one buffer (`hw.sram.Sram`'s 1r1w names), wired to its banks by `_banked`."""


def _banked(m: Module, name: str, banks: int, depth: int, word: int, instance: bool) -> _Ports:
    """One buffer of ``banks`` 1r1w macros of ``depth`` words of ``word`` bits: the address's high bits pick the
    macro; the read data is the macro read the cycle before (its bank registered)."""
    ab = _abits(banks * depth)
    p = _Ports()
    for f, w in (("raddr", ab), ("waddr", ab), ("re", 1), ("we", 1), ("wmask", 1), ("wdata", word), ("rdata", word)):
        setattr(p, f, Signal(w, name=f"{name}_{f}"))
    if banks == 1:
        ports, mac = macro("1r1w", depth, word, instance=instance)
        m.submodules[name] = mac
        m.d.comb += [ports.raddr.eq(p.raddr), ports.waddr.eq(p.waddr), ports.re.eq(p.re), ports.we.eq(p.we),
                     ports.wmask.eq(p.wmask), ports.wdata.eq(p.wdata), p.rdata.eq(ports.rdata)]
        return p
    lo = _abits(depth)
    rbank = Signal(range(banks), name=f"{name}_rbank")
    with m.If(p.re):
        m.d.sync += rbank.eq(p.raddr[lo:])
    rdata = Const(0, word)
    for k in range(banks):
        ports, mac = macro("1r1w", depth, word, instance=instance)
        m.submodules[f"{name}_b{k}"] = mac
        m.d.comb += [ports.raddr.eq(p.raddr[:lo]), ports.waddr.eq(p.waddr[:lo]),
                     ports.re.eq(p.re & (p.raddr[lo:] == k)), ports.we.eq(p.we & (p.waddr[lo:] == k)),
                     ports.wmask.eq(p.wmask), ports.wdata.eq(p.wdata)]
        rdata = ports.rdata if k == 0 else Mux(rbank == k, ports.rdata, rdata)
    m.d.comb += p.rdata.eq(rdata)
    return p
