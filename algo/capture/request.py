"""A capture request: every option of `algo.capture.run.capture` as one frozen dataclass
(`CaptureRequest`), its validation (`CaptureRequest.resolve` -> `ResolvedCapture`) and the parsers
of its text forms (op lists, resolutions, threshold lists)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from algo import latents as lat
from algo.models import DTYPES, CaptureError, ModelSpec, family_of, get_spec, num_blocks
from algo.models.families.base import Family
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSpec, check_pair, resolve_theta
from algo.trace import OP_TYPES

__all__ = [
    "CROSS_OPS", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "RESOLUTIONS", "SELF_OPS", "TEXT_TOKENS",
    "CaptureRequest", "ProgressFn", "ResolvedCapture", "parse_ops", "parse_resolution", "patch_of", "resolution_grid",
]

DEFAULT_MODEL = "wan2.1-t2v-1.3b"


DEFAULT_SIZE = "tiny"


#: Default denoising steps captured (indices into the 50-step schedule, shift 5): pure noise
#: (sigma 1.0), middle (0.54) and two late steps (0.19, 0.024). With seeded weights, neighbouring
#: tokens only become similar once the noise level is low (docs/capture.md).
DEFAULT_STEPS = (0, 40, 47, 49)


#: Ops recorded per block, in execution order.
SELF_OPS = ("qkv", "qk", "pv", "o_proj", "ffn1", "ffn2")


CROSS_OPS = ("cross_q", "cross_qk", "cross_pv", "cross_o")


#: Number of seeded text-embedding tokens (real Wan pads UMT5 output to 512; project stand-in).
TEXT_TOKENS = 8

ProgressFn = Callable[[int, int, str], None]


def _check_thetas(theta: ThetaSpec, steps: Iterable[int], ops: Iterable[str]) -> None:
    """Resolve the threshold spec for every captured (step, op) up front; raises `CaptureError`."""
    if isinstance(theta, Mapping):
        unknown = set(theta) - set(OP_TYPES) - {"default"}
        if unknown:
            raise CaptureError(f"theta given for unknown op types {sorted(unknown)}; op types: {OP_TYPES}")
    for s in steps:
        for op in ops:
            try:
                resolve_theta(theta, s, op)
            except ValueError as err:
                raise CaptureError(str(err)) from None


#: Named video sizes ``(frames, height_px, width_px)`` (docs/spec.md §1: Wan 480p 832x480 and 720p
#: 1280x720, 81 frames).
RESOLUTIONS = {"480p": (81, 480, 832), "720p": (81, 720, 1280)}


#: Wan VAE compression (docs/spec.md §1): 4x in time (causal: 1 + 4n frames -> 1 + n latent frames),
#: 8x8 in space.
VAE_TIME, VAE_SPACE = 4, 8


def parse_resolution(text: str) -> tuple[int, int, int]:
    """``"480p"``, ``"720p"`` or ``"WxHxF"`` (pixels, pixels, video frames) -> ``(frames, height, width)``.

    Raises:
        CaptureError: unknown name or malformed ``WxHxF``.
    """
    t = str(text).strip().lower()
    if t in RESOLUTIONS:
        return RESOLUTIONS[t]
    parts = t.split("x")
    try:
        w, h, f = (int(v) for v in parts)
    except ValueError:
        raise CaptureError(f"--resolution must be 480p, 720p or WxHxF (e.g. 832x480x81), got {text!r}") from None
    if min(w, h, f) <= 0:
        raise CaptureError(f"--resolution sizes must be positive, got {text!r}")
    return (f, h, w)


def resolution_grid(resolution: str | tuple[int, int, int], patch: Sequence[int] = (1, 2, 2)) -> tuple[int, int, int]:
    """Token grid ``(F, H, W)`` of a video: latent ``((frames-1)/4 + 1, height/8, width/8)`` divided by the patch.

    480p (81 x 480 x 832) -> latent 21 x 60 x 104 -> tokens 21 x 30 x 52 = 32,760; 720p -> 21 x 45 x 80
    = 75,600 (docs/spec.md §1).

    Raises:
        CaptureError: frames not 1 + 4n, or a side not a multiple of 8 x the patch.
    """
    frames, height, width = parse_resolution(resolution) if isinstance(resolution, str) else resolution
    p_t, p_h, p_w = (int(v) for v in patch)
    if (frames - 1) % VAE_TIME:
        raise CaptureError(f"frames must be 1 + {VAE_TIME}n (Wan's causal VAE), got {frames}")
    lat_f = (frames - 1) // VAE_TIME + 1
    if height % (VAE_SPACE * p_h) or width % (VAE_SPACE * p_w) or lat_f % p_t:
        raise CaptureError(f"video {width}x{height}x{frames}: width and height must be multiples of "
                           f"{VAE_SPACE * p_w} and {VAE_SPACE * p_h} (VAE 8x8 times the {p_h}x{p_w} patch)")
    return (lat_f // p_t, height // (VAE_SPACE * p_h), width // (VAE_SPACE * p_w))


def parse_ops(ops: str | Sequence[str] | None, include_cross: bool = False) -> tuple[str, ...]:
    """Op types to record, in execution order (`OP_TYPES` order).

    None: `SELF_OPS` (plus `CROSS_OPS` when `include_cross`); a string: comma-separated names,
    ``self``, ``cross`` or ``all``.

    Raises:
        CaptureError: an unknown op type or an empty selection.
    """
    if ops is None:
        names = set(SELF_OPS) | (set(CROSS_OPS) if include_cross else set())
    else:
        items = [v.strip() for v in ops.split(",")] if isinstance(ops, str) else [str(v) for v in ops]
        names = set()
        for v in (i for i in items if i):
            names |= {"self": set(SELF_OPS), "cross": set(CROSS_OPS), "all": set(OP_TYPES)}.get(v, {v})
        unknown = sorted(names - set(OP_TYPES))
        if unknown:
            raise CaptureError(f"unknown op types {unknown}; op types: {', '.join(OP_TYPES)}")
        if include_cross:
            names |= set(CROSS_OPS)
    if not names:
        raise CaptureError("no op types selected")
    return tuple(o for o in OP_TYPES if o in names)


def _check_family_ops(spec, names) -> None:
    if not family_of(spec).has_cross and set(names) & set(CROSS_OPS):
        raise CaptureError(f"{spec.name} has no cross-attention (text and video tokens attend jointly); "
                           f"op types: {', '.join(SELF_OPS)}")


def _parse_thetas(thetas) -> list[tuple[float, float]] | None:
    if thetas is None:
        return None
    if isinstance(thetas, str):
        thetas = [p.split(",") for p in thetas.split(";") if p.strip()]
    out = []
    for i, t in enumerate(thetas):
        try:
            out.append(check_pair(t, f" {i} of thetas"))
        except ValueError as err:
            raise CaptureError(str(err)) from None
    if not out:
        raise CaptureError("decision traces need at least one theta pair (e.g. '2,6;4,12;8,24')")
    return out


def patch_of(cfg: Mapping) -> tuple[int, int, int]:
    """The patch ``(p_t, p_h, p_w)`` of a model config (Wan: ``patch_size`` triple; Hunyuan:
    ``patch_size_t`` x ``patch_size``^2; CogVideoX 1.0: 1 x ``patch_size``^2, ``patch_size_t`` None)."""
    p = cfg["patch_size"]
    if isinstance(p, (list, tuple)):
        return tuple(int(v) for v in p)
    return (int(cfg.get("patch_size_t") or 1), int(p), int(p))


@dataclass(frozen=True)
class CaptureRequest:
    """What to capture (`algo.capture.run.capture_request`; `algo.capture.run.capture` takes the same keywords).

    Attributes:
        model: registry name (`algo.models.MODELS`), e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        steps: denoising step indices to capture, each in ``0 .. num_inference_steps-1``
            (sorted, duplicates dropped).
        num_inference_steps: length N of the flow-matching schedule (`algo.latents.flow_sigmas`).
        grid: token grid ``(F, H, W)`` after patching (latent = grid * patch size); None: the
            size's default, ``(4, 8, 8)`` = 256 tokens. Not together with `resolution`.
        seed: seeds the weights (torch, when `weights` is None), text embeddings and noise (numpy).
        theta: thresholds in int8 units per channel (docs/spec.md §2): a pair for every op, a
            mapping op type -> pair (``"default"`` for the rest), a callable ``(step, op) -> pair`` or
            a `algo.reuse.thresholds.ThetaSchedule` (step-sensitive thresholds); resolved per recorded op.
            Exact traces only; decision traces use `thetas`.
        b_msb: reused high bits for PARTIAL, 1..7 (stored in the trace).
        blocks: block indices to record (None: all). Blocks up to the last recorded one run; later
            blocks are neither built (seeded or safetensors weights) nor run.
        include_cross: also record cross_q, cross_qk, cross_pv, cross_o (same as adding ``cross``
            to `ops`).
        ops: op types to record (`parse_ops`: names, ``self``, ``cross``, ``all``); None: `SELF_OPS`.
        resolution: ``"480p"``, ``"720p"`` or ``"WxHxF"`` pixels and video frames (`resolution_grid`).
        weights: None (seeded), a diffusers folder or a ``.safetensors`` file (`algo.models.build_model`).
        dtype: ``"fp32"`` or ``"bf16"`` (None: the registry's, float32).
        thetas: None for an exact trace (int8 operands); else a decision trace holding packed
            decisions for each pair (``"2,6;4,12;8,24"`` or a list of pairs), no operands.
        image, pan_px, shift: latent content and schedule (`algo.latents`).
        stream_blocks: any model, seeded or with `weights`: keep the blocks on the meta device and
            fill each one just before it runs, freeing it after (`algo.models.build_streamed`:
            one block in memory at a time, e.g. Wan2.1-14B, HunyuanVideo; seeded blocks are
            rebuilt from their recorded RNG state, checkpoint blocks read lazily with
            ``safe_open``; the trace equals the unstreamed capture bit for bit).
        attn_states: store the attention output and log-sum-exp per head on every self-attention
            ``pv`` op (`algo.trace`: exact traces version 3; decision traces version 4; taken from
            the model's own attention call, `algo.capture.quantise.flash_states`, D72).
        out: write the trace here as it is captured (`algo.trace.TraceWriter`: op arrays stream
            into a temporary file, renamed into place at the end; nothing is left on error). The
            returned trace then holds the decision ops (decision traces) or only op shapes (exact).
    """

    model: str = DEFAULT_MODEL
    size: str = DEFAULT_SIZE
    steps: Sequence[int] = DEFAULT_STEPS
    num_inference_steps: int = 50
    grid: tuple[int, int, int] | None = None
    seed: int = 0
    theta: ThetaSpec = DEFAULT_THETA
    b_msb: int = 4
    blocks: Sequence[int] | None = None
    include_cross: bool = False
    ops: str | Sequence[str] | None = None
    resolution: str | None = None
    weights: str | Path | None = None
    dtype: str | None = None
    thetas: str | Sequence[Sequence[float]] | None = None
    image: str = "astronaut"
    pan_px: int = lat.DEFAULT_PAN_PX
    shift: float = lat.DEFAULT_SHIFT
    out: str | Path | None = None
    attn_states: bool = True
    stream_blocks: bool = False

    def resolve(self) -> ResolvedCapture:
        """Check every option against the model and resolve the defaults.

        Raises:
            CaptureError: unknown model or size, bad steps, grid, resolution, blocks, ops, theta(s),
                b_msb, image, dtype, or a checkpoint path that does not exist.
        """
        model, size, steps, num_inference_steps = self.model, self.size, self.steps, self.num_inference_steps
        grid, resolution, blocks, b_msb, image, dtype = (self.grid, self.resolution, self.blocks, self.b_msb,
                                                         self.image, self.dtype)
        ops, include_cross, thetas, theta, weights = self.ops, self.include_cross, self.thetas, self.theta, self.weights
        spec = get_spec(model, size)
        cfg = spec.sizes[size]
        n_layers = num_blocks(spec.name, size)
        if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
            raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
        step_list = sorted({int(s) for s in steps})
        if not step_list or step_list[0] < 0 or step_list[-1] >= num_inference_steps:
            raise CaptureError(f"steps must be non-empty indices in 0..{num_inference_steps - 1}, got {list(steps)}")
        if resolution is not None:
            if grid is not None:
                raise CaptureError("give grid or resolution, not both")
            grid = resolution_grid(resolution, patch_of(cfg))
        grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
        max_len = int(cfg.get("rope_max_seq_len", 1024))
        if len(grid) != 3 or min(grid) <= 0 or max(grid) > max_len:
            raise CaptureError(f"grid must be 3 positive token counts (F, H, W), each <= {max_len}; got {grid}")
        block_list = list(range(n_layers)) if blocks is None else sorted({int(b) for b in blocks})
        if not block_list or block_list[0] < 0 or block_list[-1] >= n_layers:
            raise CaptureError(f"blocks must be indices in 0..{n_layers - 1}, got {blocks}")
        if not 1 <= int(b_msb) <= 7:
            raise CaptureError(f"b_msb must be in 1..7, got {b_msb}")
        if image not in lat.IMAGES:
            raise CaptureError(f"unknown image {image!r}; choose one of {', '.join(lat.IMAGES)}")
        if dtype is not None and dtype not in DTYPES:
            raise CaptureError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        op_names = parse_ops(ops, include_cross)
        _check_family_ops(spec, op_names)
        fam = family_of(spec)
        theta_list = _parse_thetas(thetas)
        _check_thetas(theta, step_list, op_names)
        if weights is not None and not Path(weights).expanduser().exists():
            raise CaptureError(f"--weights: checkpoint not found: {Path(weights).expanduser().resolve()}")
        return ResolvedCapture(self, spec, fam, cfg, step_list, grid, block_list, op_names, theta_list)


@dataclass(frozen=True)
class ResolvedCapture:
    """A checked `CaptureRequest`: the registry entry and family, sorted step and block lists, the
    token grid, the op types in `OP_TYPES` order and the parsed decision-trace thresholds (None:
    an exact trace)."""

    request: CaptureRequest
    spec: ModelSpec
    family: Family
    cfg: dict
    steps: list[int]
    grid: tuple[int, int, int]
    blocks: list[int]
    ops: tuple[str, ...]
    thetas: list[tuple[float, float]] | None = field(default=None)
