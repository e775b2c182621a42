"""Kaleido's channel-wise reuse applied inside a diffusers video-DiT forward pass (fake-quantised int8).

`ReuseHooks` is a context manager that installs hooks on a model of any family
(`algo.models.families`: Wan, HunyuanVideo, CogVideoX; the hooks sit at the family's GEMM sites,
`Family.sites`) so that every
GEMM of the chosen op types runs the way the accelerator would run it (docs/spec.md §1-2):

1. the streamed operand ``X`` (tokens x K) is quantised to int8 exactly as `algo.capture` does
   (`algo.capture.quantize_int8`: symmetric, one scale per tensor per call, ``scale = max|x| / 127``
   (1 for an all-zero tensor), ``np.rint`` half to even in float64, clamp to [-128, 127]; per-head
   tensors share one scale across heads). For ``pv`` X is P from ``qk``'s int8 operands by the one
   rule capture, the trace format and the golden checks use (`algo.reuse.softmax.softmax_numerators_int8`:
   ``P = rint(255 exp(c (S - rowmax S)))``, S the exact integer scores of the int8 Q -- its effective
   operand when ``qk`` reuses -- and K, ``c = q_scale k_scale / sqrt(d_h)``; uint8). With ``qk`` outside
   ``quant_ops`` Q and K are still quantised for P, as the accelerator's ``qk`` GEMM always is;
2. in a *reuse* pass, ``X`` is replaced by its effective operand ``X_eff`` from
   `algo.reuse.golden.decide` (the bit-exact golden model itself, not a re-implementation), with the
   groups capture uses: ``qk`` the model's RoPE t/h/w groups (`algo.models.rope_groups`), every
   other op `algo.reuse.golden.block_groups` (``G = 8 ceil(K/64)``, axis ``"f"``); token grid ``(F, H, W)``
   = the latent grid divided by the patch size;
3. the result is dequantised (``X_eff * scale``, computed in float64 and rounded once to float32)
   and used in the op.

The stationary operand W is fake-quantised too (choice: the accelerator multiplies int8 by int8,
so its exact reference is the all-int8 model): linear weights with one scale per op (for ``qkv``
the concatenation ``[to_q; to_k; to_v]``, as capture quantises it), K and V of attention with one
scale per call across heads. Biases stay float (capture: they are not part of the GEMM).
For ``pv`` the output is ``O = (P_eff @ V_fq) / rowsum(P)``: the 1/rowsum normalisation runs on the
vector unit with the row sum of the *exact* (un-reused) uint8 P (docs/spec.md §1), so with reuse off
each row's weights sum to exactly 1.

Three pass modes (`ReuseHooks.set_pass`):

- ``"float"``: no hooks act (the float model; weights restored).
- ``"exact"``: every op in ``quant_ops`` fake-quantised, reuse off. This is the reference: it uses
  the same quantisation as the reuse pass, so comparing the two isolates the effect of reuse.
- ``"reuse"``: as ``"exact"``, and the ops in ``ops`` use ``X_eff``.

``quant_ops`` defaults to all six self-attention/FFN ops plus any enabled cross op, independent
of which ops have reuse enabled, so that the exact reference is the same int8 model whatever
subset is switched on. Ops outside ``quant_ops`` run in float in every mode.

Attention: the function the family's attention processor calls is wrapped (`Family.attention_patch`,
restored in ``__exit__``); when ``qk`` or ``pv`` (or a cross counterpart) is quantised, attention is
computed explicitly there: ``s = Q_used K_fq^T / sqrt(d_h)`` in float32, then P, then O. With
neither quantised the original function runs. Joint attention (HunyuanVideo, CogVideoX: text tokens
in the sequence): the video-token rows of every linear op's input and of Q are the streamed operand
(as capture records them); text-token rows pass through the fake-quantised weights in float, and
text-token queries attend in float. A fused layer (HunyuanVideo's single-stream ``proj_out``, ops
o_proj and ffn2 on its two input halves) has each half's weight columns quantised with their own
scale, and each op's output is its own half's GEMM.

Recorded per reuse pass (`ReuseStats`): decision counts per op and step, weighted by group width
(element counts of X) and by N (MACs); the op's *local* error (``Y = X_eff W`` against ``X W`` on
the same input: the op's own reuse error); and, when an exact pass of the same step ran just
before, the error of each op's output against the exact pass's output at the same
(step, block, op) (accumulated error, everything upstream included). Op outputs are the GEMM
results without bias: ``qkv`` = [Q | K | V] projections, ``qk`` = scores ``s`` (scaled by
1/sqrt(d_h)), ``pv`` = the normalised attention output ``O``, the linears ``x W^T``.

Limits: batch size 1 (as capture); no attention mask (an all-True one is accepted). Memory: the float and the fake-quantised
weights are both held while the context is open (2x the linear weights: 11.4 GB peak for the full
Wan2.1-1.3B config at 256 tokens, measured); attention materialises ``heads x M x M`` float32
scores and uint8 P at once (no query chunking), fine for the small grids quality runs use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import torch

from algo.capture.quantise import quantize_int8
from algo.capture.record import _per_head
from algo.models import CaptureError, model_family, rope_groups
from algo.models.families.base import Attention
from algo.reuse import policies as bp
from algo.reuse.fake_quant import (
    ALL_OPS,
    CROSS_OPS,
    MODES,
    SELF_OPS,
    Pair,
    QuantReuse,
    ReuseError,
    ReuseStats,
    _check_pair,
    _energy,
    dequantize,
    parse_ops,
    quantize_reuse,
    theta_for,
)
from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, block_groups
from algo.reuse.softmax import softmax_numerators_int8
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSpec

__all__ = ["PolicyHooks", "ReuseHooks"]


# -- the hooks -------------------------------------------------------------------------------------

class ReuseHooks:
    """Context manager: fake-quantised int8 GEMMs with Kaleido reuse inside a video-DiT transformer.

    Usage::

        with ReuseHooks(net, grid, ops=("ffn1",), theta=(4, 12)) as rh:
            rh.set_pass("exact", step=40); y_ref = net(...)
            rh.set_pass("reuse", step=40); y = net(...)
        rh.stats.fractions("ffn1")

    Args:
        model: a diffusers model of a registered family (`algo.models.families`; batch size 1 inputs).
        grid: token grid ``(F, H, W)`` after patching; every forward must have ``F*H*W`` tokens.
        ops: op types with reuse enabled (names from `ALL_OPS`, or a string for `parse_ops`).
        theta: pair, mapping op -> pair (optional ``"default"``), ``callable(step, op) -> pair`` or an
            `algo.reuse.thresholds.ThetaSchedule`; int8 units per channel (`theta_for`).
        b_msb: reused high bits of PARTIAL (1..7; project default 4, docs/spec.md §2).
        quant_ops: ops fake-quantised in ``"exact"`` and ``"reuse"`` passes; None: `SELF_OPS` plus the
            enabled cross ops. Must contain ``ops``.
        record_operands: keep every streamed operand of reuse/exact passes in ``operands`` (tests;
            memory grows with the run).

    Raises:
        ReuseError: unknown ops, ``ops`` not inside ``quant_ops``, bad b_msb, a model of no known
            family, or a second `ReuseHooks` active at the same time.
    """

    _active = False

    def __init__(self, model: torch.nn.Module, grid: tuple[int, int, int], ops: str | Iterable[str] = SELF_OPS,
                 theta: ThetaSpec = DEFAULT_THETA, b_msb: int = 4, quant_ops: Iterable[str] | None = None,
                 record_operands: bool = False):
        self.model = model
        self.grid = tuple(int(v) for v in grid)
        if len(self.grid) != 3 or min(self.grid) <= 0:
            raise ReuseError(f"grid must be 3 positive token counts (F, H, W), got {grid}")
        self.tokens = self.grid[0] * self.grid[1] * self.grid[2]
        self.ops = parse_ops(ops)
        base = SELF_OPS + tuple(o for o in CROSS_OPS if o in self.ops)
        self.quant_ops = parse_ops(base if quant_ops is None else quant_ops)
        missing = [o for o in self.ops if o not in self.quant_ops]
        if missing:
            raise ReuseError(f"ops with reuse must be quantised too; not in quant_ops: {missing}")
        if not 1 <= int(b_msb) <= 7:
            raise ReuseError(f"b_msb must be in 1..7, got {b_msb}")
        self.b_msb = int(b_msb)
        self.theta = theta
        if not callable(theta) and not isinstance(theta, Mapping):
            _check_pair(theta, "all ops")
        if isinstance(theta, Mapping):
            unknown = sorted(set(theta) - set(ALL_OPS) - {"default"})
            if unknown:
                raise ReuseError(f"theta given for unknown op types {unknown}; op types: {', '.join(ALL_OPS)}")
        try:
            self.family = model_family(model)
        except CaptureError as err:
            raise ReuseError(str(err)) from None
        self.qk_groups = [g.as_tuple() for g in rope_groups(model)]
        self.record_operands = bool(record_operands)
        self.operands: list[dict] = []
        self.stats = ReuseStats()
        self.mode = "float"
        self.step = 0
        self.context: tuple[int, str] | None = None
        self._ref: dict = {}
        self._ref_step: int | None = None
        self._handles: list = []
        self._weights: dict = {}  # module -> (float weight, fake-quant weight)
        self._patch = None
        self._theta_cache: dict = {}

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> ReuseHooks:
        if ReuseHooks._active:
            raise ReuseError("another ReuseHooks context is active (the attention wrapper is module-global)")
        ReuseHooks._active = True
        try:
            self._prepare_weights()
            self._register()
            self._patch = self.family.attention_patch(self._attention)
            self._patch.__enter__()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._patch is not None:
            self._patch.__exit__(None, None, None)
            self._patch = None
        for h in self._handles:
            h.remove()
        self._handles = []
        self._set_weights(quantised=False)
        self._ref = {}
        ReuseHooks._active = False

    def set_pass(self, mode: str, step: int) -> None:
        """Select the mode (``"float"``, ``"exact"``, ``"reuse"``) and schedule step of the next forward.

        An ``"exact"`` pass of a step replaces the stored reference outputs that the following
        ``"reuse"`` pass of the same step is compared with.
        """
        if mode not in MODES:
            raise ReuseError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode, self.step = mode, int(step)
        if mode == "exact":
            self._ref, self._ref_step = {}, self.step
        self._set_weights(quantised=mode != "float")

    # -- weights ---------------------------------------------------------------------------------
    def _sites(self):
        """``(block, site)`` of every GEMM site of the family (`algo.models.families.base.Family.sites`)."""
        for b, (kind, blk) in enumerate(self.family.blocks(self.model)):
            for site in self.family.sites(kind, blk):
                yield b, site

    def _linears(self):
        """``(block, Linear site)`` of every linear op; the hooked module's input is X."""
        return ((b, site) for b, site in self._sites() if not isinstance(site, Attention))

    @torch.no_grad()
    def _prepare_weights(self) -> None:
        """Fake-quantised copies of the quantised linear ops' weights (one scale per op, as capture;
        an op on input channels ``cols`` of a fused layer quantises those weight columns)."""
        for _b, site in self._linears():
            if site.op not in self.quant_ops:
                continue
            lins = site.linears
            for lin in lins:
                if getattr(lin, "weight", None) is None:
                    raise ReuseError(f"{site.op}: {type(lin).__name__} has no weight")
            w_t = torch.cat([lin.weight.detach() for lin in lins], dim=0).t()  # [in, out], as capture
            if site.cols is not None:
                w_t = w_t[site.cols[0]:site.cols[1]]
            w_q, w_s = quantize_int8(w_t)
            w_fq = dequantize(w_q, w_s).t().to(lins[0].weight.dtype)  # [out_total, in]
            if site.cols is not None:
                lin = lins[0]
                fused = self._weights[lin][1] if lin in self._weights else lin.weight.data.clone()
                fused[:, site.cols[0]:site.cols[1]] = w_fq
                self._weights[lin] = (lin.weight.data, fused)
                continue
            row = 0
            for lin in lins:
                n = lin.weight.shape[0]
                self._weights[lin] = (lin.weight.data, w_fq[row:row + n].contiguous())
                row += n

    def _set_weights(self, quantised: bool) -> None:
        for lin, (w_float, w_fq) in self._weights.items():
            lin.weight.data = w_fq if quantised else w_float

    # -- registration ----------------------------------------------------------------------------
    def _register(self) -> None:
        h = self._handles
        for b, site in self._linears():
            if site.op in self.quant_ops:
                h.append(site.hooked.register_forward_pre_hook(self._linear_pre(b, site), with_kwargs=True))
                if site.cols is None:  # a fused layer's part is recorded by its pre-hook
                    for part, lin in enumerate(site.linears):
                        h.append(lin.register_forward_hook(self._linear_out(b, site.op, part)))
        for b, site in self._sites():
            if isinstance(site, Attention):
                # Registered after the qkv / cross_q pre-hooks: context is set for the attention call.
                h.append(site.module.register_forward_pre_hook(self._enter(b, site.kind), with_kwargs=True))
                h.append(site.module.register_forward_hook(self._leave))

    def _video_rows(self, n: int) -> slice | None:
        """The video-token rows of an ``n``-row sequence: all (None), the first or the last `tokens`
        (joint ``[video, text]`` or ``[text, video]`` sequences); None also when ``n`` fits neither."""
        if n == self.tokens or not self.family.joint_text or n < self.tokens:
            return None
        return slice(0, self.tokens) if self.family.video_first else slice(n - self.tokens, n)

    def _enter(self, block: int, kind: str):
        def hook(_m, _a, _k):
            self.context = (block, kind)

        return hook

    def _leave(self, _m, _a, _o):
        self.context = None

    # -- core ------------------------------------------------------------------------------------
    def _theta(self, op: str) -> Pair:
        key = (self.step, op)
        if key not in self._theta_cache:
            self._theta_cache[key] = theta_for(self.theta, self.step, op)
        return self._theta_cache[key]

    def _operand(self, op: str, block: int, x_q: np.ndarray, scale: float, groups, n_out: int) -> QuantReuse:
        """Reuse (in reuse passes, for enabled ops) and bookkeeping for one streamed operand."""
        reuse = self.mode == "reuse" and op in self.ops
        qr = self._effective(op, block, x_q, scale, groups) if reuse else quantize_reuse(
            x_q, scale, self.grid, groups, None, self.b_msb)
        if qr.decisions is not None:
            widths = np.array([k1 - k0 for k0, k1, _ in qr.groups], dtype=np.float64)
            d = qr.decisions.reshape(-1, len(widths))
            counts = np.array([float(((d == c) * widths).sum()) for c in (COMPUTE, PARTIAL, REUSE)])
            self.stats._add(self.stats.elements, (op, self.step), counts)
            self.stats._add(self.stats.macs, (op, self.step), counts * n_out)
        if self.record_operands:
            self.operands.append({"mode": self.mode, "step": self.step, "block": block, "op": op, "x_q": x_q,
                                  "scale": float(scale), "x_eff": qr.x_eff, "decisions": qr.decisions,
                                  "groups": qr.groups, "theta": self._theta(op) if reuse else None})
        return qr

    def _effective(self, op: str, block: int, x_q: np.ndarray, scale: float, groups) -> QuantReuse:
        """The reuse pass's operand of an enabled op: Kaleido's golden decisions (subclasses: other policies)."""
        return quantize_reuse(x_q, scale, self.grid, groups, self._theta(op), self.b_msb)

    def _call(self, op: str, block: int, **energies) -> None:
        if self.mode != "reuse":
            return
        rec = next((c for c in reversed(self.stats.calls)
                    if c["step"] == self.step and c["block"] == block and c["op"] == op), None)
        if rec is None:
            rec = {"step": self.step, "block": block, "op": op, "local_signal": math.nan,
                   "local_noise": math.nan, "signal": math.nan, "noise": math.nan}
            self.stats.calls.append(rec)
        for k, v in energies.items():
            rec[k] = v if math.isnan(rec[k]) else rec[k] + v

    def _record_output(self, op: str, block: int, part: int, y: torch.Tensor) -> None:
        """Keep exact-pass outputs; compare reuse-pass outputs with them (same step, block, op, part)."""
        key = (block, op, part)
        if self.mode == "exact":
            self._ref[key] = y.detach().to(torch.float32).clone()
        elif self.mode == "reuse" and self._ref_step == self.step and key in self._ref:
            ref = self._ref[key]
            if ref.shape != y.shape:
                raise ReuseError(f"{op} block {block}: output shape {tuple(y.shape)} differs from the exact "
                                 f"pass's {tuple(ref.shape)}")
            sig, noise = _energy(ref), _energy(y.to(torch.float32) - ref)
            self.stats._add(self.stats.vs_exact, (op, self.step), [sig, noise])
            self._call(op, block, signal=sig, noise=noise)

    def _local(self, op: str, block: int, y_exact: torch.Tensor, delta: torch.Tensor) -> None:
        if self.mode != "reuse" or op not in self.ops:
            return
        sig, noise = _energy(y_exact), _energy(delta)
        self.stats._add(self.stats.local, (op, self.step), [sig, noise])
        self._call(op, block, local_signal=sig, local_noise=noise)

    def _linear_pre(self, block: int, site):
        op, lins, cols = site.op, site.linears, site.cols

        def hook(_module, args, kwargs):
            if self.mode == "float":
                return None
            x = args[0] if args else kwargs["hidden_states"]
            rows = self._video_rows(x.shape[1]) if x.ndim == 3 else None
            if x.ndim != 3 or x.shape[0] != 1 or (rows is None and x.shape[1] != self.tokens):
                raise ReuseError(f"{op} block {block}: input {tuple(x.shape)}, expected [1, {self.tokens}, K]")
            xv = x if rows is None else x[:, rows]
            if cols is not None:
                xv = xv[..., cols[0]:cols[1]]
            x_q, scale = quantize_int8(xv)
            qr = self._operand(op, block, x_q, scale, block_groups(x_q.shape[-1]), site.n)
            xv_used = dequantize(qr.x_eff, scale).to(x.dtype)
            w = torch.cat([lin.weight for lin in lins], dim=0)
            if cols is not None:
                w = w[:, cols[0]:cols[1]]
            if self.mode == "reuse" and op in self.ops:
                x_exact = dequantize(x_q, scale).to(x.dtype)
                self._local(op, block, x_exact @ w.t(), (xv_used - x_exact) @ w.t())
            if self.record_operands:
                self.operands[-1]["x_used"] = xv_used
            if cols is not None:  # the fused layer's output sums several ops: this op's part
                self._record_output(op, block, 0, xv_used @ w.t())
            if rows is None and cols is None:
                x_used = xv_used
            else:
                x_used = x.clone()
                ch = slice(None) if cols is None else slice(cols[0], cols[1])
                x_used[:, slice(None) if rows is None else rows, ch] = xv_used
            if args:
                return (x_used, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x_used}

        return hook

    def _linear_out(self, block: int, op: str, part: int):
        def hook(module, _args, output):
            if self.mode == "float":
                return None
            y = output if module.bias is None else output - module.bias
            self._record_output(op, block, part, y)
            return None

        return hook

    def _attention(self, query, key, value, layout: str = "bshd", attn_mask=None, plain: bool = False
                   ) -> torch.Tensor | None:
        """Explicit fake-quantised attention, or None to run the original function (``plain``,
        `algo.models.families.base.AttentionFn`, is not needed here).

        ``layout`` ``"bshd"`` (``[1, S, heads, d_h]``) or ``"bhsd"``; the output has the same layout.
        Joint attention (S = M + L: text tokens in the sequence): the M video-token query rows run
        the accelerator's GEMMs (quantised, with reuse); the L text-token rows are computed in float
        from the float Q, K and V (they are no GEMM of the trace). An all-True boolean mask is no mask.
        """
        if self.mode == "float" or self.context is None:
            return None
        block, kind = self.context
        prefix = "" if kind == "self" else "cross_"
        op_qk, op_pv = prefix + "qk", prefix + "pv"
        q_quant, p_quant = op_qk in self.quant_ops, op_pv in self.quant_ops
        if not (q_quant or p_quant):
            return None
        if attn_mask is not None and not (attn_mask.dtype == torch.bool and bool(attn_mask.all())):
            raise ReuseError("attention masks are not supported by the reuse hooks")
        if layout == "bhsd":
            query, key, value = (t.transpose(1, 2) for t in (query, key, value))
        q_all, kh, vh = _per_head(query), _per_head(key), _per_head(value)
        rows = self._video_rows(q_all.shape[1])
        qh = q_all if rows is None else q_all[:, rows]
        heads, m, d_h = qh.shape
        if m != self.tokens:
            raise ReuseError(f"{op_qk} block {block}: {m} query tokens, expected {self.tokens}")
        inv = 1.0 / math.sqrt(d_h)
        if q_quant:
            q_q, q_s = quantize_int8(qh)
            k_q, k_s = quantize_int8(kh)
            groups = self.qk_groups if kind == "self" else block_groups(d_h)
            qr = self._operand(op_qk, block, q_q, q_s, groups, kh.shape[1])
            q_used, k_used = dequantize(qr.x_eff, q_s), dequantize(k_q, k_s)
            q_int = qr.x_eff  # the integers the qk GEMM multiplies (reused in a reuse pass)
            if self.record_operands:
                self.operands[-1]["x_used"] = q_used
            if self.mode == "reuse" and op_qk in self.ops:
                q_exact = dequantize(q_q, q_s)
                self._local(op_qk, block, q_exact @ k_used.transpose(1, 2) * inv,
                            (q_used - q_exact) @ k_used.transpose(1, 2) * inv)
        else:
            q_used, k_used = qh, kh
        s = torch.matmul(q_used, k_used.transpose(1, 2)) * inv  # [heads, M, L] float32
        if q_quant:
            self._record_output(op_qk, block, 0, s)
        if p_quant:
            if not q_quant:  # qk in float: P still comes from the int8 scores the accelerator's qk makes
                q_int, q_s = quantize_int8(qh)
                k_q, k_s = quantize_int8(kh)
            if q_int.min(initial=0) < -128 or q_int.max(initial=0) > 127:
                raise ReuseError(f"{op_qk} block {block}: effective Q leaves the int8 range")
            # P by the one rule (algo.reuse.softmax): capture, the trace and the golden checks use it too
            p_np = softmax_numerators_int8(q_int.astype(np.int8), np.ascontiguousarray(k_q.transpose(0, 2, 1)),
                                           q_s, k_s)
            p = torch.from_numpy(p_np)
            v_q, v_s = quantize_int8(vh)
            v_used = dequantize(v_q, v_s)
            qr = self._operand(op_pv, block, p_np, 1.0 / 255.0, block_groups(p_np.shape[-1]), d_h)
            rowsum = p.to(torch.float32).sum(dim=-1, keepdim=True)  # exact P's row sum, >= 255
            p_used = torch.from_numpy(qr.x_eff.astype(np.float32))
            if self.record_operands:
                self.operands[-1]["x_used"] = p_used
            out = torch.matmul(p_used, v_used) / rowsum
            if self.mode == "reuse" and op_pv in self.ops:
                p_exact = p.to(torch.float32)
                self._local(op_pv, block, torch.matmul(p_exact, v_used) / rowsum,
                            torch.matmul(p_used - p_exact, v_used) / rowsum)
            self._record_output(op_pv, block, 0, out)
        else:
            out = torch.matmul(torch.softmax(s, dim=-1), vh)
        if rows is not None:  # text-token query rows: float attention over every key
            n = q_all.shape[1]
            text = slice(self.tokens, n) if rows.start == 0 else slice(0, n - self.tokens)
            out_t = torch.matmul(torch.softmax(torch.matmul(q_all[:, text], kh.transpose(1, 2)) * inv, dim=-1), vh)
            out = torch.cat([out, out_t] if rows.start == 0 else [out_t, out], dim=1)
        out = out.transpose(0, 1).unsqueeze(0).to(query.dtype)  # [1, S, heads, d_h]
        return out.transpose(1, 2) if layout == "bhsd" else out


# -- baseline policies -----------------------------------------------------------------------------

class PolicyHooks(ReuseHooks):
    """`algo.reuse.torch_hooks.ReuseHooks` whose reuse pass applies a baseline policy instead of Kaleido's.

    ``ops`` default to the policy's ops (`POLICIES`); ``theta`` supplies theta1 where a policy's
    ``theta`` parameter is None. Inter-step policies keep each op's effective operand of the
    previous *reuse-pass* step (the policy's own previous values, as the hardware would hold them).
    Stats (`ReuseStats`) record the work codes as COMPUTE/PARTIAL/REUSE = full/half/skip.
    """

    def __init__(self, model, grid, policy: str, policy_params: dict | None = None, **kwargs):
        self.policy = policy
        try:
            self.params = bp.check_policy(policy, policy_params)
        except bp.PolicyError as err:
            raise ReuseError(str(err)) from None
        kwargs.setdefault("ops", bp.POLICIES[policy]["ops"])
        super().__init__(model, grid, **kwargs)
        self._prev: dict = {}   # (op, block) -> (step, x_eff int16 [B, M, K], scale)
        self._ffn_skip: dict = {}  # (step, block) -> bool [M] (EXION: ffn1's decision, used by ffn2)

    def _theta1(self, op: str) -> float:
        t = self.params.get("theta")
        return float(self._theta(op)[0] if t is None else t)

    def _previous(self, op: str, block: int, scale: float, signed: bool) -> np.ndarray | None:
        prev = self._prev.get((op, block))
        if prev is None or prev[0] >= self.step:
            return None
        return bp.rescale(prev[1], prev[2], scale, signed)

    def _effective(self, op: str, block: int, x_q: np.ndarray, scale: float, groups) -> QuantReuse:
        groups = [tuple(g) for g in groups]
        signed = x_q.dtype != np.uint8
        decs, effs = [], []
        prev = self._previous(op, block, scale, signed) if self.policy != "adaptiv" else None
        for b in range(x_q.shape[0]):
            x = x_q[b]
            if self.policy == "adaptiv":
                merged, eff = bp.token_merge(x, self.grid, self._theta1(op))
                dec = bp.rows_to_codes(merged, len(groups))
            elif self.policy == "exion" and op == "pv":
                dec, eff = bp.prune_scores(x, groups, int(self.params["p_min"]))
            elif self.policy == "exion":  # ffn1 decides per token, ffn2 follows ffn1 of the same block/step
                key = (self.step, block)
                if op == "ffn1":
                    skip = (bp.interstep_rows(x, prev[b], self._theta1(op)) if prev is not None
                            else np.zeros(x.shape[0], dtype=bool))
                    self._ffn_skip[key] = skip
                else:
                    skip = self._ffn_skip.get(key, np.zeros(x.shape[0], dtype=bool))
                    if prev is None:
                        skip = np.zeros(x.shape[0], dtype=bool)
                eff = np.where(skip[:, None], prev[b], x).astype(np.int16) if prev is not None else x.astype(np.int16)
                dec = bp.rows_to_codes(skip, len(groups))
            else:  # cambricon_d: exact by construction (x_prev + delta = x)
                dec = (bp.delta_codes(x, prev[b], groups) if prev is not None
                       else np.full((x.shape[0], len(groups)), bp.FULL, dtype=np.int8))
                eff = (prev[b].astype(np.int32) + (x.astype(np.int32) - prev[b])).astype(np.int16) \
                    if prev is not None else x.astype(np.int16)
            decs.append(dec)
            effs.append(eff)
        qr = QuantReuse(x_q, float(scale), np.stack(effs), np.stack(decs), groups)
        self._prev[(op, block)] = (self.step, qr.x_eff, float(scale))
        return qr
