"""Recording during the forward pass: the hook state of one capture (`Recorder`: which step, block and
attention is running, the op records it emits) and its hooks at the family's GEMM sites (`register`)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from algo.capture.plan import _blocks_of
from algo.capture.quantise import (
    _decide_packed,
    _scale_of,
    attention_states,
    flash_states,
    pv_decisions,
    quantize_int8,
)
from algo.models import CaptureError, model_family
from algo.reuse.softmax import softmax_numerators_int8
from algo.reuse.thresholds import resolve_theta
from algo.trace import OpRecord


def _per_head(t: torch.Tensor) -> torch.Tensor:
    """``[1, S, heads, d_h]`` (the processor's layout) -> ``[heads, S, d_h]`` float32."""
    if t.ndim != 4 or t.shape[0] != 1:
        raise CaptureError(f"expected attention operands [1, S, heads, d_h] (batch 1), got {tuple(t.shape)}")
    return t[0].transpose(0, 1).to(torch.float32)


def _weight_t(*linears: torch.nn.Linear) -> torch.Tensor:
    """``concat(weights)^T``: the ``[in, out]`` stationary operand of one or more nn.Linear."""
    return torch.cat([lin.weight.detach() for lin in linears], dim=0).t()


class _StopForward(Exception):
    """Raised by a block hook after the last recorded block: later blocks need not run."""


class Recorder:
    """Hooks state for one capture: which (step, block, attention) is running, and the records."""

    def __init__(self, qk_groups, theta, blocks, ops, tokens, progress, n_total, grid, b_msb,
                 thetas=None, sink=None, keep=True, plan=None, video_first=True, attn_states=True):
        self.qk_groups = qk_groups
        self.theta = theta
        self.blocks = set(blocks)
        self.last_block = max(blocks)
        self.ops_wanted = set(ops)
        self.tokens = tokens
        self.progress = progress
        self.n_total = n_total
        self.grid = grid
        self.b_msb = b_msb
        self.thetas = thetas  # None: exact trace; else decision trace for these pairs
        self.sink = sink
        self.keep = keep
        self.plan = plan or {}
        self.video_first = video_first
        self.attn_states = attn_states
        self.n_done = 0
        self.step = 0
        self.step_label = ""
        self.context: tuple[int, str] | None = None  # (block, "self" | "cross") inside attn1/attn2
        self.ops: list[OpRecord] = []
        self.timing = {"decide_s": 0.0, "pv_s": 0.0, "write_s": 0.0, "blocks_s": 0.0}
        self._block_t0 = 0.0
        self._w_cache: dict[tuple[int, str], tuple[np.ndarray | None, float]] = {}

    # -- recording -------------------------------------------------------------------------------
    def _weight(self, block: int, name: str, linears, cols=None) -> tuple[np.ndarray | None, float]:
        key = (block, name)
        if key not in self._w_cache:
            w = _weight_t(*linears)
            if cols is not None:
                w = w[cols[0]:cols[1]]
            self._w_cache[key] = (None, _scale_of(w)) if self.thetas is not None else quantize_int8(w)
        return self._w_cache[key]

    def _emit(self, op: OpRecord) -> None:
        want = self.plan.get((op.step, op.block, op.name))
        got = (op.batch, op.M, op.K, op.N)
        if want is not None and want != got:
            raise CaptureError(f"{op.name} of block {op.block}: captured (batch, M, K, N) = {got}, "
                               f"the model's config gives {want}")
        if self.sink is not None:
            t0 = time.perf_counter()
            self.sink(op)
            self.timing["write_s"] += time.perf_counter() - t0
        if self.keep:
            self.ops.append(op)
        else:  # exact op already on disk: keep only its shape
            self.ops.append(dataclasses.replace(op, X=None, W=None, dims=got, scores=None))

    def video(self, t: torch.Tensor, axis: int = 1) -> torch.Tensor:
        """The video-token rows of a sequence: all (Wan), the first M (Hunyuan: ``[video, text]``)
        or the last M (CogVideoX: ``[text, video]``)."""
        n = t.shape[axis]
        if n == self.tokens:
            return t
        return t.narrow(axis, 0 if self.video_first else n - self.tokens, self.tokens)

    def _add(self, name, block, x_q, x_scale, w_q, w_scale, groups, x_signed=True, w_shape=None, states=None,
             scores=None):
        if x_q is not None and x_q.ndim == 2:
            x_q = x_q[None]
        if w_q is not None and w_q.ndim == 2:
            w_q = w_q[None]
        rows = (x_q if x_q is not None else scores[0]).shape[1]
        if rows != self.tokens:
            raise CaptureError(f"{name} of block {block}: {rows} rows, expected {self.tokens} tokens")
        theta = resolve_theta(self.theta, self.step, name)
        if self.thetas is None:
            op = OpRecord(name=name, block=block, step=self.step,
                          X=None if x_q is None else np.ascontiguousarray(x_q),
                          W=np.ascontiguousarray(w_q), groups=list(groups), theta=theta, x_signed=x_signed,
                          x_scale=float(x_scale), w_scale=float(w_scale), scores=scores)
            if states is not None:
                op.attn_out = np.ascontiguousarray(states[0])
                op.lse = np.ascontiguousarray(states[1])
        else:
            t0 = time.perf_counter()
            packed = _decide_packed(x_q, self.grid, list(groups), self.thetas, self.b_msb)
            self.timing["decide_s"] += time.perf_counter() - t0
            op = self._decision_op(name, block, (x_q.shape[0], x_q.shape[1], x_q.shape[2], w_shape[-1]),
                                   packed, groups, x_signed, x_scale, w_scale)
        self._emit(op)

    def _decision_op(self, name, block, dims, packed, groups, x_signed, x_scale, w_scale) -> OpRecord:
        return OpRecord(name=name, block=block, step=self.step, X=None, W=None, groups=list(groups),
                        theta=tuple(self.thetas[0]), x_signed=x_signed, x_scale=float(x_scale),
                        w_scale=float(w_scale), dims=tuple(int(v) for v in dims), decisions=packed,
                        thetas=tuple(tuple(t) for t in self.thetas))

    def linear_input(self, name: str, block: int, linears, cols: tuple[int, int] | None = None):
        """A forward pre-hook recording the input of ``linears[0]``'s call with W = concat(weights)^T
        (video-token rows only; with `cols`, input channels ``cols[0]:cols[1]`` and the matching
        rows of W: one of the two GEMMs a fused linear layer adds up)."""

        def hook(_module, args, kwargs):
            if block not in self.blocks or name not in self.ops_wanted:
                return
            x = self.video(args[0] if args else kwargs["hidden_states"], axis=1)
            if cols is not None:
                x = x[..., cols[0]:cols[1]]
            x_q, x_s = quantize_int8(x)
            w_q, w_s = self._weight(block, name, linears, cols)
            n_out = sum(lin.out_features for lin in linears)
            self._add(name, block, x_q, x_s, w_q, w_s, _blocks_of(x_q.shape[-1]), w_shape=(n_out,))

        return hook

    def attention(self, query, key, value, layout: str = "bshd", attn_mask=None, plain: bool = False):
        """Called by the wrapped attention function with ``[1, S, heads, d_h]`` (``layout="bshd"``:
        Wan, Hunyuan ``dispatch_attention_fn``) or ``[1, heads, S, d_h]`` (``"bhsd"``: CogVideoX's
        ``F.scaled_dot_product_attention``) operands. Query rows are cut to the video tokens
        (`video_rows`); keys and values stay whole (joint attention: text keys too).

        Returns the attention output when it computed it for the model (the attention states of a
        ``plain`` call come from the model's own flash-attention call, `flash_states`, D72), else
        None (the original function runs)."""
        if self.context is None or self.context[0] not in self.blocks:
            return None
        block, kind = self.context
        prefix = "" if kind == "self" else "cross_"
        want_qk, want_pv = prefix + "qk" in self.ops_wanted, prefix + "pv" in self.ops_wanted
        if not (want_qk or want_pv):
            return None
        states = want_pv and kind == "self" and self.attn_states
        flash = flash_states(query, key, value, layout) if states and plain and attn_mask is None else None
        model_out = None if flash is None else flash[0]
        if layout == "bhsd":
            query, key, value = (t.transpose(1, 2) for t in (query, key, value))
        qh, kh, vh = _per_head(query), _per_head(key), _per_head(value)
        qh = self.video(qh, axis=1)
        groups = self.qk_groups if kind == "self" else _blocks_of(qh.shape[-1])
        if want_qk or (want_pv and self.thetas is None):
            q_q, q_s = quantize_int8(qh)
            if self.thetas is None:
                k_q, k_s = quantize_int8(kh.transpose(1, 2))
            else:
                k_q, k_s = None, _scale_of(kh)
        if want_qk:
            self._add(prefix + "qk", block, q_q, q_s, k_q, k_s, groups, w_shape=(kh.shape[1],))
        if not want_pv:
            return model_out
        t0 = time.perf_counter()
        pv_groups = _blocks_of(kh.shape[1])
        if not states:
            out = lse = None
        elif flash is not None:  # the model's own attention: video query rows, every key
            out, lse = (self.video(t, axis=1).numpy() for t in flash[1:])
        else:
            out, lse = attention_states(qh, kh, vh)
        if self.thetas is None:
            v_q, v_s = quantize_int8(vh)
            # P is derived from the int8 Q and K (`algo.reuse.softmax`): materialised only when the
            # trace stays in memory; a trace streamed to a file stores Q and K, never P
            scores = (q_q, k_q, q_s, k_s)
            p = None if self.sink is not None else softmax_numerators_int8(*scores)
            self._add(prefix + "pv", block, p, 1.0 / 255.0, v_q, v_s, pv_groups, x_signed=False,
                      states=(out, lse) if states else None, scores=scores)
        else:
            packed = pv_decisions(qh, kh, self.grid, pv_groups, self.thetas, self.b_msb, timing=self.timing)
            dims = (qh.shape[0], qh.shape[1], kh.shape[1], vh.shape[2])
            op = self._decision_op(prefix + "pv", block, dims, packed, pv_groups, False, 1.0 / 255.0, _scale_of(vh))
            if states:
                op.attn_out, op.lse = out, lse
            self._emit(op)
        self.timing["pv_s"] += time.perf_counter() - t0
        return model_out

    # -- context and progress hooks --------------------------------------------------------------
    def enter(self, block: int, kind: str):
        def hook(_module, _args, _kwargs):
            self.context = (block, kind)

        return hook

    def leave(self, _module, _args, _output):
        self.context = None

    def block_start(self, _module, _args, _kwargs):
        self._block_t0 = time.perf_counter()

    def block_done(self, block: int):
        def hook(_module, _args, _output):
            if block in self.blocks:
                self.timing["blocks_s"] += time.perf_counter() - self._block_t0
            self.n_done += 1
            if self.progress is not None:
                self.progress(self.n_done, self.n_total, f"{self.step_label} block {block}")
            if block == self.last_block:
                raise _StopForward

        return hook


def register(model, rec: Recorder) -> list:
    """Hooks on every transformer block (`algo.models.blocks_of`) at the family's GEMM sites
    (`algo.models.families.base.Family.sites`) for the ops of docs/spec.md §1."""
    from algo.models.families.base import Attention

    fam = model_family(model)
    handles = []

    def pre(module, hook):
        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    for b, (kind, blk) in enumerate(fam.blocks(model)):
        for site in fam.sites(kind, blk):
            if isinstance(site, Attention):
                pre(site.module, rec.enter(b, site.kind))
                handles.append(site.module.register_forward_hook(rec.leave))
            else:
                pre(site.hooked, rec.linear_input(site.op, b, site.linears, cols=site.cols))
        handles.append(blk.register_forward_hook(rec.block_done(b)))
        pre(blk, rec.block_start)
    return handles
