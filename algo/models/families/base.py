"""What a model family tells capture, derivation and quality runs (`Family`), and the pieces families share.

A family module (one file in this package) defines a `Family` subclass instance named ``FAMILY``:

- ``models``: its registry rows (`ModelRow`: name, diffusers class, source of the ``full`` config,
  ``full`` and ``tiny`` constructor arguments);
- the block structure: `Family.blocks` (trace order, each with a kind), `Family.sites` (where each
  GEMM of docs/spec.md §1 is hooked in a block: `Linear` and `Attention` sites, in hook order),
  `Family.layers_config` (build only the first n blocks);
- the token layout of joint attention (`video_first`, `joint_text`) and whether there is
  cross-attention (`has_cross`);
- `Family.attention_patch`: the function its attention processor calls, wrapped for a capture or a
  quality run;
- `Family.rope_split`: the RoPE t/h/w split read from the model's own rotary code;
- `Family.schedule` (`algo.models.schedules`) and `Family.inputs` (text tokens and extras of one
  forward, `Inputs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from algo.lazy import lazy_module
from algo.models.schedules import Schedule

torch = lazy_module("torch")  # imported on first use (algo.lazy: model names without torch)

__all__ = ["Attention", "AttentionFn", "Family", "Inputs", "Linear", "ModelRow", "seeded_text"]

#: ``fn(query, key, value, layout, attn_mask)`` called in place of the attention function: returns
#: the attention output (same layout and shape as the original's) or None to run the original.
#: ``layout`` ``"bshd"``: ``[1, S, heads, d_h]``; ``"bhsd"``: ``[1, heads, S, d_h]``.
AttentionFn = Callable[..., "torch.Tensor | None"]


@dataclass(frozen=True)
class ModelRow:
    """One registry entry of a family (`algo.models.registry.MODELS` is built from these)."""

    name: str
    diffusers_class: str
    repo: str
    full: dict
    tiny: dict


@dataclass(frozen=True)
class Linear:
    """A GEMM whose streamed operand is the input of ``hooked``: ``X @ concat(linears' weights)^T``
    (with ``cols``: input channels ``cols[0]:cols[1]`` of one fused layer, and the matching weight
    columns)."""

    op: str
    hooked: torch.nn.Module
    linears: tuple
    cols: tuple[int, int] | None = None

    @property
    def k(self) -> int:
        return self.cols[1] - self.cols[0] if self.cols else int(self.linears[0].in_features)

    @property
    def n(self) -> int:
        return sum(int(lin.out_features) for lin in self.linears)


@dataclass(frozen=True)
class Attention:
    """An attention module: while it runs, the wrapped attention function belongs to
    ``(block, kind)``, kind ``"self"`` (ops qk, pv) or ``"cross"`` (cross_qk, cross_pv)."""

    kind: str
    module: torch.nn.Module


@dataclass
class Inputs:
    """The text and extra inputs of every forward of one run.

    Attributes:
        text: ``[1, L, width]`` text embeddings in the run dtype.
        extra: further keyword arguments of the model's ``forward``.
    """

    text: torch.Tensor
    extra: dict = field(default_factory=dict)


def seeded_text(seed: int, tokens: int, width: int, dtype: torch.dtype) -> torch.Tensor:
    """``tokens`` seeded N(0, 1) text tokens of ``width`` (numpy stream ``[seed, 1]``), ``[1, L, width]``."""
    text = np.random.default_rng([int(seed), 1]).standard_normal((1, tokens, width))
    return torch.from_numpy(text.astype(np.float32)).to(dtype)


class Family:
    """A model family. Subclasses set the class attributes and override the methods marked so."""

    name: str = ""
    #: Listing order of the family's models in the registry (then by name).
    order: int = 100
    models: tuple[ModelRow, ...] = ()
    #: Joint attention's keys hold the text tokens too (``M + L`` keys).
    joint_text: bool = False
    #: In a joint ``[video, text]`` sequence the video tokens come first (False: ``[text, video]``).
    video_first: bool = True
    #: The blocks have a cross-attention (ops cross_q, cross_qk, cross_pv, cross_o).
    has_cross: bool = False
    #: State-dict prefix of the block list whose indices a safetensors file must cover, or None.
    block_prefix: str | None = None
    #: The diffusers VAE class that decodes the family's latents for frame metrics, or None.
    vae_class: str | None = None
    #: The DDiT workload generator can run the family (`algo.workloads.ddit`: a patch triple that
    #: scales by 2 and 4, and a flow-matching Euler trajectory to take Δ³z of).
    ddit_trajectory: bool = False

    # -- structure (override) ----------------------------------------------------------------------
    def blocks(self, model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
        """The transformer blocks in trace order, each as ``(kind, module)``."""
        raise NotImplementedError

    def sites(self, kind: str, blk: torch.nn.Module) -> list[Linear | Attention]:
        """The GEMM sites of one block in hook order (`Linear`, `Attention`)."""
        raise NotImplementedError

    def self_attention(self, kind: str, blk: torch.nn.Module) -> torch.nn.Module:
        """The block's self (or joint) attention module."""
        return next(s.module for s in self.sites(kind, blk) if isinstance(s, Attention) and s.kind == "self")

    def layers_config(self, cfg: dict, n: int) -> dict:
        """Constructor arguments building only the first ``n`` trace blocks (construction order)."""
        return dict(cfg, num_layers=n)

    def num_blocks(self, cfg: dict) -> int:
        return int(cfg["num_layers"])

    def text_width(self, cfg: dict) -> int:
        return int(cfg["text_embed_dim"])


    # -- attention (override) ----------------------------------------------------------------------
    def attention_patch(self, fn: AttentionFn) -> contextlib.AbstractContextManager:
        """Context in which the family's attention function calls ``fn`` first (module-global)."""
        raise NotImplementedError

    def rope_split(self, model: torch.nn.Module) -> tuple[int, int, int]:
        """The RoPE t/h/w channel counts of one head, read from the model (unchecked)."""
        raise NotImplementedError

    # -- inputs (override) -------------------------------------------------------------------------
    def schedule(self, n_steps: int, shift: float | None = None) -> Schedule:
        """The family's N-step schedule; ``shift`` None: the family's own."""
        raise NotImplementedError

    def inputs(self, cfg: dict, net: torch.nn.Module, grid: tuple[int, int, int], seed: int,
               dtype: torch.dtype, tokens: int) -> Inputs:
        """Seeded text (`seeded_text`) and the extras of ``forward`` for a token grid."""
        return Inputs(seeded_text(seed, tokens, self.text_width(cfg), dtype))

    def forward_kwargs(self, inputs: Inputs, x_t: torch.Tensor, timestep: float) -> dict:
        """Keyword arguments of ``forward`` for latents ``[1, C, F, H, W]`` at ``timestep``."""
        return dict(hidden_states=x_t, timestep=torch.tensor([timestep], dtype=torch.float32),
                    encoder_hidden_states=inputs.text, **inputs.extra)

    def output(self, out: torch.Tensor) -> torch.Tensor:
        """The model output in the latents' layout ``[1, C, F, H, W]``."""
        return out


@contextlib.contextmanager
def patched_attribute(module, name: str, fn: AttentionFn, layout: str) -> Iterator[None]:
    """Replace ``module.<name>`` (an attention function ``f(query, key, value, *args, **kwargs)``)
    by a wrapper calling ``fn`` first; restored on exit."""
    original = getattr(module, name)

    def wrapper(query, key, value, *args, **kwargs):
        out = fn(query, key, value, layout, kwargs.get("attn_mask"))
        return original(query, key, value, *args, **kwargs) if out is None else out

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)
