"""What a host writes into the delta op-level controller (`hw.delta_accel.DeltaAccel`) for one op: the difference,
weight and descriptor buffers' words (hw/delta_accel.py's docstring), and the capacity checks. Used by the test
benches (tests/rtl/daccel_bench.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hw.compact_array import TILE_BITS
from hw.delta_accel import WEIGHT_LANES
from hw.pe import W_BITS, X_BITS

if TYPE_CHECKING:
    from hw.delta_accel import DeltaAccel

#: The write port's buffer selects (``wr_sel``).
SEL_X, SEL_W, SEL_DESC = 0, 1, 2


def group_layout(acc: DeltaAccel, groups) -> list[tuple[int, int, int]]:
    """Per group ``(xoff, xwords, woff)``: its first X word in a token's words, its X words per row
    (``ceil(|g| / P)``) and its first weight word in a column block's words; groups in order, each starting
    on a word. On a controller with the weight port (``WEIGHT_PORT``, the compact controller, docs/decisions.md
    D109) ``woff`` counts half-words of ``B`` channels (`stage_group_layout`'s ``hoff``) within ``KWH``.

    Raises:
        ValueError: more groups than ``partial_regs``, a group wider than ``max_k``, or the words do not fit
            ``KW`` / ``KWW`` (``KWH``).
    """
    if len(groups) > acc.cfg.partial_regs:
        raise ValueError(f"{len(groups)} groups: the controller holds {acc.cfg.partial_regs} (partial_regs)")
    port = acc.WEIGHT_PORT and not acc.stage
    unit, wmax = (acc.cfg.compact_bands, acc.KWH) if port else (WEIGHT_LANES, acc.KWW)
    out, xo, wo = [], 0, 0
    for k0, k1, _ in groups:
        width = k1 - k0
        if not 1 <= width <= acc.max_k:
            raise ValueError(f"group ({k0}, {k1}): width must be 1 .. max_k = {acc.max_k}")
        xw, ww = -(-width // acc.P), -(-width // unit)
        out.append((xo, xw, wo))
        xo, wo = xo + xw, wo + ww
    if xo > acc.KW or wo > wmax:
        raise ValueError(f"the groups take {xo} X words and {wo} weight words: the controller holds {acc.KW} and "
                         f"{wmax}")
    return out


def _pack(values, bits: int) -> int:
    out, mask = 0, (1 << bits) - 1
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (bits * i)
    return out


def x_words(acc: DeltaAccel, diffs: np.ndarray, groups) -> list[tuple[int, int]]:
    """``(address, word)`` of the difference buffer: ``diffs`` int ``[M, K]`` (9-bit differences, -255 .. 255)
    group-aligned (hw/delta_accel.py's docstring).

    Raises:
        ValueError: M above ``max_tokens``, a difference outside 9 bits signed, or as `group_layout`.
    """
    M = diffs.shape[0]  # noqa: N806
    if M > acc.max_tokens:
        raise ValueError(f"M = {M} tokens: the controller holds {acc.max_tokens}")
    if diffs.size and np.abs(diffs).max() >= 1 << (X_BITS - 1):
        raise ValueError("a difference outside 9 bits signed")
    out = []
    for (k0, k1, _), (xo, xw, _) in zip(groups, group_layout(acc, groups), strict=True):
        for t in range(M):
            for j in range(xw):
                lanes = diffs[t, k0 + acc.P * j:min(k1, k0 + acc.P * (j + 1))]
                out.append((t * acc.KW + xo + j, _pack(lanes, X_BITS)))
    return out


def _padded_weights(acc: DeltaAccel, W: np.ndarray) -> tuple[int, np.ndarray]:  # noqa: N803
    """``(N, Wp)``: ``W`` int8 ``[K, N]`` as int64 ``[K, n_cb C]``, columns past N zero (`w_words`,
    `stage_w_words`).

    Raises:
        ValueError: N above the controller's ``max_n``.
    """
    C = acc.cfg.array_cols  # noqa: N806
    K, N = W.shape  # noqa: N806
    if N > acc.max_n:
        raise ValueError(f"N = {N} output channels: the controller holds {acc.max_n}")
    Wp = np.zeros((K, -(-N // C) * C), dtype=np.int64)  # noqa: N806
    Wp[:, :N] = W
    return N, Wp


def w_words(acc: DeltaAccel, W: np.ndarray, groups) -> list[tuple[int, int]]:  # noqa: N803
    """``(address, word)`` of the weight buffer: ``W`` int8 ``[K, N]`` per column block and group, two channels
    a word (lane ``h C + c``: channel ``k0 + 2 j + h``, column ``cb C + c``; columns past N zero).

    On a controller with the weight port (``WEIGHT_PORT``, D109): `stage_w_words`' half-words instead.

    Raises:
        ValueError: N above ``max_n``, or as `group_layout`.
    """
    if acc.WEIGHT_PORT and not acc.stage:
        return stage_w_words(acc, W, groups)
    C = acc.cfg.array_cols  # noqa: N806
    N, Wp = _padded_weights(acc, W)  # noqa: N806
    out = []
    for (k0, k1, _), (_, _, wo) in zip(groups, group_layout(acc, groups), strict=True):
        for cb in range(-(-N // C)):
            for j in range(-(-(k1 - k0) // WEIGHT_LANES)):
                lanes = []
                for h in range(WEIGHT_LANES):
                    k = k0 + WEIGHT_LANES * j + h
                    lanes += list(Wp[k, cb * C:(cb + 1) * C]) if k < k1 else [0] * C
                out.append((cb * acc.KWW + wo + j, _pack(lanes, W_BITS)))
    return out


def descriptor_word(acc: DeltaAccel, groups, group: int, cb: int, tokens, n_compute: int, slots: int,
                    stage: dict | None = None) -> int:
    """One band-tile's descriptor word (`DeltaAccel.fields`): ``tokens`` its rows' tokens (COMPUTE rows first,
    ``n_compute`` of them), ``slots`` its slot count (paired: all PARTIAL and fewer slots than channels);
    ``stage``: its stage fields (`stage_plan`; a controller built with ``stage=True``).

    Raises:
        ValueError: more rows than a band holds, no rows, a token beyond ``max_tokens``, a column block beyond
            ``max_n``, or as `group_layout`.
    """
    k0, k1, _ = groups[group]
    xo, xw, wo = group_layout(acc, groups)[group]
    rows = len(tokens)
    if not 1 <= rows <= acc.brows or not 0 <= n_compute <= rows:
        raise ValueError(f"a band-tile of {rows} rows ({n_compute} COMPUTE): a band has {acc.brows}")
    if max(tokens) >= acc.max_tokens or cb >= acc.max_nb:
        raise ValueError(f"token {max(tokens)} or column block {cb} beyond the controller's capacity")
    vals = {"nrows": rows, "ncomp": n_compute, "width": k1 - k0, "paired": int(n_compute == 0 and slots < k1 - k0),
            "cb": cb, "xoff": xo, "xwords": xw, "woff": wo, "tokens": _pack(tokens, acc.tb), **(stage or {})}
    word, pos = 0, 0
    for name, bits in acc.fields:
        word |= (vals[name] & ((1 << bits) - 1)) << pos
        pos += bits
    return word


def op_words(acc: DeltaAccel, diffs: np.ndarray, W: np.ndarray, groups, tiles) -> list[tuple[int, int, int]]:  # noqa: N803
    """Every write of one op: ``(wr_sel, wr_addr, wr_data)``: the difference buffer, the weight buffer, then one
    descriptor per band-tile of ``tiles`` (issue order; each ``(group, cb, tokens, n_compute, slots)``).

    Raises:
        ValueError: more band-tiles than ``max_tiles``, or as `x_words`, `w_words`, `descriptor_word`.
    """
    tiles = list(tiles)
    if len(tiles) > acc.max_tiles:
        raise ValueError(f"{len(tiles)} band-tiles: the controller holds {acc.max_tiles}")
    out = [(SEL_X, a, w) for a, w in x_words(acc, diffs, groups)]
    out += [(SEL_W, a, w) for a, w in w_words(acc, W, groups)]
    out += [(SEL_DESC, n, descriptor_word(acc, groups, *t)) for n, t in enumerate(tiles)]
    return out


#: The write port's select of the decision buffer (a `DeltaAccel` built with ``queues=True``).
SEL_DEC = 3


def dec_words(acc: DeltaAccel, dec: np.ndarray) -> list[tuple[int, int]]:
    """``(address, word)`` of the queues' decision buffer (`hw.delta_queue`): ``dec`` int8 ``[M, G]`` codes
    (COMPUTE 0, PARTIAL 1, REUSE 2), token t's G codes in word t (group g at bits ``[2 g, 2 g + 2)``).

    Raises:
        ValueError: M above ``max_tokens``, more groups than ``partial_regs``, or a code outside 0 .. 2.
    """
    M, G = dec.shape  # noqa: N806
    if M > acc.max_tokens:
        raise ValueError(f"M = {M} tokens: the controller holds {acc.max_tokens}")
    if G > acc.cfg.partial_regs:
        raise ValueError(f"{G} groups: the controller holds {acc.cfg.partial_regs} (partial_regs)")
    if dec.size and (dec.min() < 0 or dec.max() > 2):
        raise ValueError("a decision code outside 0 .. 2 (COMPUTE, PARTIAL, REUSE)")
    return [(t, _pack(dec[t], 2)) for t in range(M)]


def queue_ports(acc: DeltaAccel, grid, groups, fw: int, n_cb: int, s: int, chunk_major: bool) -> dict[str, int]:
    """The op's values of the queues' ``c_*`` ports (`hw.delta_queue` module docstring): grid ``(F, H, W)``,
    ``fw`` frames per chunk, ``n_cb`` column blocks, ``s`` column blocks per group, the issue order.

    Raises:
        ValueError: a size outside the ports' ranges (tokens, column blocks), or as `group_layout`.
    """
    from hw.delta_queue import layout_bits, layout_fields

    F, H, W = grid  # noqa: N806
    if F * H * W > acc.max_tokens or not 1 <= n_cb <= acc.max_nb or not 1 <= s or not 1 <= fw:
        raise ValueError(f"grid {grid}, {n_cb} column blocks, s = {s}, fw = {fw}: outside the controller's capacity")
    lay, pos = 0, 0
    for (k0, k1, _), (xo, xw, wo) in zip(groups, group_layout(acc, groups), strict=True):
        vals = {"width": k1 - k0, "xoff": xo, "xwords": xw, "woff": wo}
        word, p = 0, 0
        for name, bits in layout_fields(acc):
            word |= vals[name] << p
            p += bits
        lay |= word << pos
        pos += layout_bits(acc)
    return {"c_frames": F, "c_hw": H * W, "c_fw": min(fw, F), "c_groups": len(groups), "c_ncb": n_cb,
            "c_s": min(s, n_cb), "c_cm": int(chunk_major), "c_layout": lay}


# ---- the weight stage (a `DeltaAccel` built with ``stage=True``, docs/decisions.md D96) ----

def stage_group_layout(acc: DeltaAccel, groups) -> list[tuple[int, int]]:
    """Per group ``(hoff, halves)``: its first weight-buffer half-word in a column block's (``B`` channels x C
    columns a half-word) and its half-words ``ceil(|g| / B)``; groups in order, each starting on a half-word.

    Raises:
        ValueError: as `group_layout`, or the half-words do not fit ``KWH``.
    """
    group_layout(acc, groups)
    B = acc.cfg.compact_bands  # noqa: N806
    out, ho = [], 0
    for k0, k1, _ in groups:
        n = -(-(k1 - k0) // B)
        out.append((ho, n))
        ho += n
    if ho > acc.KWH:
        raise ValueError(f"the groups take {ho} weight half-words: the controller holds {acc.KWH}")
    return out


def stage_w_words(acc: DeltaAccel, W: np.ndarray, groups) -> list[tuple[int, int]]:  # noqa: N803
    """``(address, word)`` of the single weight buffer of the staged controller: ``W`` int8 ``[K, N]`` per column
    block and group, ``B`` channels a word (half a stage word; lane ``h C + c``: channel ``k0 + B j + h``, column
    ``cb C + c``; channels past the group and columns past N zero), word ``cb KWH + hoff + j``.

    Raises:
        ValueError: N above ``max_n``, or as `stage_group_layout`.
    """
    C, B = acc.cfg.array_cols, acc.cfg.compact_bands  # noqa: N806
    N, Wp = _padded_weights(acc, W)  # noqa: N806
    out = []
    for (k0, k1, _), (ho, n) in zip(groups, stage_group_layout(acc, groups), strict=True):
        for cb in range(-(-N // C)):
            for j in range(n):
                lanes = []
                for h in range(B):
                    k = k0 + B * j + h
                    lanes += list(Wp[k, cb * C:(cb + 1) * C]) if k < k1 else [0] * C
                out.append((cb * acc.KWH + ho + j, _pack(lanes, W_BITS)))
    return out


def stage_plan(acc: DeltaAccel, groups, tiles, segment, sliced: bool) -> tuple[list[dict], int, int]:
    """The stage fields of each band-tile's descriptor: ``(fields, buffers, buffer half-words)``, ``fields`` a dict
    per band-tile of ``tiles`` (issue order, each ``(group, cb, ...)`` as `op_words`' list) with ``seg`` (first
    band-tile of its segment), ``sbuf`` (the segment's buffer, segment number mod ``buffers``), ``fsrc`` /
    ``fcount`` (the segment's fill: first weight-buffer word and half-words), ``fdst`` (the buffer's first stage
    half-word) and ``saddr`` (the stage half-word of its group's word 0).

    ``segment``: int ``[T]`` non-decreasing from 0, each band-tile's segment (`sim.timing.delta_accel.
    staged_tiles`). A segment fills every group of its column block (the op's whole K, D85), or with ``sliced``
    only its own group (the groups are then D88's slices). A buffer holds the largest fill; a column bank holds
    ``buffers = bank half-words // that`` of them (bank half-words ``wstage_sram_kib x 1024 / C / B``; group-
    aligned, as `sim.timing.delta.stage_buffers` with the op's groups since D96's plan item 5 was taken).

    Raises:
        ValueError: segments not numbered in order, a segment of two column blocks (or, ``sliced``, two groups), a
            fill larger than a column bank, or as `stage_group_layout`.
    """
    lay = stage_group_layout(acc, groups)
    seg = [int(x) for x in segment]
    if len(seg) != len(tiles) or any(b - a not in (0, 1) for a, b in zip(seg, seg[1:], strict=False)) or (
            seg and seg[0] != 0):
        raise ValueError("segments must be numbered 0, 1, ... in issue order, one per band-tile")
    heads = {}
    for (g, cb, *_), sg in zip(tiles, seg, strict=True):
        h = heads.setdefault(sg, (g, cb))
        if h[1] != cb or (sliced and h[0] != g):
            raise ValueError(f"segment {sg} mixes column blocks or slices")
    size = max((lay[g][1] for g, _ in heads.values()), default=1) if sliced else sum(n for _, n in lay)
    bank = acc.stage_halves
    if size > bank:
        raise ValueError(f"a stage buffer of {size} half-words: a column bank holds {bank}")
    nbuf = bank // size
    out = []
    for (g, cb, *_), sg in zip(tiles, seg, strict=True):
        g0 = heads[sg][0] if sliced else 0
        lo = lay[g0][0]
        fcount = lay[g0][1] if sliced else size
        base = (sg % nbuf) * size
        first = not out or out[-1]["_seg"] != sg
        out.append({"_seg": sg, "seg": int(first), "sbuf": sg % nbuf, "fsrc": cb * acc.KWH + lo, "fcount": fcount,
                    "fdst": base, "saddr": base + lay[g][0] - lo})
    for f in out:
        del f["_seg"]
    return out, nbuf, size


def stage_op_words(acc: DeltaAccel, diffs: np.ndarray, W: np.ndarray, groups, tiles, segment,  # noqa: N803
                   sliced: bool) -> list[tuple[int, int, int]]:
    """Every write of one op into the staged controller: the difference buffer, the weight buffer
    (`stage_w_words`), then one descriptor per band-tile with its stage fields (`stage_plan`).

    Raises:
        ValueError: as `op_words` and `stage_plan`.
    """
    tiles = list(tiles)
    cap = (1 << TILE_BITS) - 1 if acc.ring else acc.max_tiles  # a ring: the band-tile number's range (D134)
    if len(tiles) > cap:
        raise ValueError(f"{len(tiles)} band-tiles: the controller holds {cap}")
    plan, _nbuf, _size = stage_plan(acc, groups, tiles, segment, sliced)
    out = [(SEL_X, a, w) for a, w in x_words(acc, diffs, groups)]
    out += [(SEL_W, a, w) for a, w in stage_w_words(acc, W, groups)]
    out += [(SEL_DESC, n, descriptor_word(acc, groups, *t, stage=p)) for n, (t, p) in enumerate(zip(tiles, plan,
                                                                                                      strict=True))]
    return out


def ring_split(acc: DeltaAccel, words) -> tuple[list, list]:
    """The host's protocol with the descriptor ring (``acc.ring`` > 0, docs/decisions.md D134): ``words`` (as
    `stage_op_words` gives them) split into ``(before, during)``: every buffer word and the first ``ring``
    descriptors are written before ``start``; the rest, in band-tile order, while the op runs, each write held until
    ``wr_ready`` (an entry is free once the gather has taken the band-tile ``ring`` before). The ring ignores a
    descriptor's ``wr_addr`` (its entry is the count written mod ``ring``), so both lists keep the order given.
    Without a ring: ``(words, [])``."""
    words = list(words)
    if not acc.ring:
        return words, []
    desc = [w for w in words if w[0] == SEL_DESC]
    return [w for w in words if w[0] != SEL_DESC] + desc[:acc.ring], desc[acc.ring:]
