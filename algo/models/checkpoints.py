"""Building a registered model with its weights: seeded (`algo.models.registry.WEIGHTS_INIT`), from a
diffusers folder (``config.json`` + safetensors, one file or shards) or from one ``.safetensors``
file (`build_model`), every checkpoint checked against the size's config and the full model's keys
and shapes; `Checkpoint` reads a checkpoint's tensors lazily (for block streaming). ``.bin`` pickles
are never loaded (they can run code)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from algo.models.registry import (
    CaptureError,
    ModelSpec,
    _layers_config,
    family_of,
    get_spec,
    meta_model,
    num_blocks,
    seeded_weights_description,
)

#: Config keys a checkpoint must agree on with the registered size (architecture, not runtime).
_ARCH_KEYS = ("num_attention_heads", "attention_head_dim", "num_layers", "ffn_dim", "in_channels",
              "out_channels", "text_dim", "freq_dim", "patch_size", "qk_norm", "cross_attn_norm",
              "num_single_layers", "num_refiner_layers", "mlp_ratio", "patch_size_t", "text_embed_dim",
              "pooled_projection_dim", "rope_axes_dim", "time_embed_dim", "use_rotary_positional_embeddings")


#: File names of a diffusers model folder's safetensors weights (diffusers ``SAFETENSORS_WEIGHTS_NAME``
#: and ``SAFE_WEIGHTS_INDEX_NAME``, 0.42.1): one file, or shards listed by the index's ``weight_map``.
SAFETENSORS_FILE = "diffusion_pytorch_model.safetensors"


SAFETENSORS_INDEX = "diffusion_pytorch_model.safetensors.index.json"


def _to_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """Cast to `dtype`, keeping the class's ``_keep_in_fp32_modules`` (Wan: rope, time_embedder,
    scale_shift_table, norm1/2/3) in float32, as diffusers' ``from_pretrained(torch_dtype=...)`` does."""
    if dtype == torch.float32:
        return model
    keep = set(getattr(type(model), "_keep_in_fp32_modules", None) or ())
    for tensors in (model.named_parameters(), model.named_buffers()):
        for name, t in tensors:
            if t.is_floating_point() and not keep & set(name.split(".")):
                t.data = t.data.to(dtype)  # per tensor: Module.to() would warn about the fp32 modules
    return model


def _check_config(found: dict, spec: ModelSpec, size: str, where: str) -> None:
    want = spec.sizes[size]
    bad = [f"{k} {found.get(k)!r} != {want[k]!r}" for k in _ARCH_KEYS
           if k in want and _norm(found.get(k)) != _norm(want[k])]
    if bad:
        raise CaptureError(f"checkpoint {where} does not match {spec.name} ({size}): " + "; ".join(bad))


def _norm(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _folder_root(spec: ModelSpec, size: str, path: Path) -> Path:
    """The folder holding the transformer's ``config.json`` and weights (`path` or ``path/transformer``),
    after checking that config against ``(spec, size)``.

    Raises:
        CaptureError: no or unreadable ``config.json``, another class, or an architecture mismatch.
    """
    return path / (_folder_config(spec, size, path) or "")


def _safetensors_kind(path: Path, root: Path) -> str:
    """``"index"`` (sharded) or ``"single"``: which safetensors weights the model folder `root` of
    ``--weights path`` holds (`SAFETENSORS_INDEX`, `SAFETENSORS_FILE`).

    Raises:
        CaptureError: neither (e.g. ``.bin`` pickles only, which are never loaded: they can run code).
    """
    if (root / SAFETENSORS_INDEX).is_file():
        return "index"
    if (root / SAFETENSORS_FILE).is_file():
        return "single"
    raise CaptureError(f"--weights {path}: needs safetensors weights: no {SAFETENSORS_FILE} or {SAFETENSORS_INDEX} "
                       f"in {root} (.bin pickles are not loaded: they can run code)")


def _folder_config(spec: ModelSpec, size: str, path: Path) -> str | None:
    """Check a diffusers folder's config; returns the subfolder (None or ``"transformer"``)."""
    import json

    sub = None
    if not (path / "config.json").is_file() and (path / "transformer" / "config.json").is_file():
        sub = "transformer"
    cfg_file = path / (sub or "") / "config.json"
    if not cfg_file.is_file():
        raise CaptureError(f"--weights {path}: no config.json (nor transformer/config.json): not a diffusers "
                           "model folder")
    try:
        found = json.loads(cfg_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CaptureError(f"--weights {path}: unreadable config.json ({err})") from None
    if found.get("_class_name") not in (None, spec.diffusers_class):
        raise CaptureError(f"--weights {path}: holds a {found.get('_class_name')}, expected {spec.diffusers_class}")
    _check_config(found, spec, size, str(path))
    return sub


def _load_folder(cls, spec: ModelSpec, size: str, path: Path) -> tuple[torch.nn.Module, str]:
    """A diffusers-format folder: ``config.json`` + safetensors weights (one file or an index of shards), or a
    pipeline folder with ``transformer/``.

    Raises:
        CaptureError: no safetensors weights (``.bin`` pickles are refused), a config that is not the
            model's, or weights diffusers cannot load.
    """
    sub = _folder_config(spec, size, path)
    _safetensors_kind(path, path / (sub or ""))
    from diffusers.utils import logging as dlog

    level = dlog.get_verbosity()
    dlog.set_verbosity_error()  # diffusers' own fetch/serialisation chatter; errors still raise
    try:
        model = cls.from_pretrained(str(path), subfolder=sub, local_files_only=True, use_safetensors=True)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "low_cpu_mem_usage" in msg:
            msg += "; diffusers needs the `accelerate` package to load this class (pip install accelerate)"
        raise CaptureError(f"--weights {path}: cannot load the diffusers checkpoint ({msg})") from None
    finally:
        dlog.set_verbosity(level)
    # A sharded folder leaves tensors as views into the memory-mapped shards at any 8-byte offset;
    # MKL's float32 GEMM rounds differently for differently aligned operands (measured: Q of a tiny
    # Wan differed in the last bit between the single-file and the sharded folder of one model).
    # Misaligned tensors are copied into fresh, 64-byte aligned memory (PyTorch's CPU allocator), as
    # every other loader's tensors are.
    for tensors in (model.parameters(), model.buffers()):
        for t in tensors:
            if t.data_ptr() % 64:
                t.data = t.data.clone()
    return model, f"checkpoint (diffusers folder): {shown_path(path)}"


def _check_keys(path, spec, size: str, shapes: Mapping[str, tuple]) -> None:
    """Strict check of a checkpoint's ``{key: shape}`` against the full model's (built on the meta
    device: no memory).

    Raises:
        CaptureError: missing, unexpected or wrong-shape keys (up to three of each named).
    """
    own = {k: tuple(v.shape) for k, v in meta_model(spec.name, size).state_dict().items()}
    missing, unexpected = sorted(set(own) - set(shapes)), sorted(set(shapes) - set(own))
    wrong = sorted(k for k in set(own) & set(shapes) if own[k] != tuple(shapes[k]))
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if keys:
            extra = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
            detail = [f"{k} {list(shapes[k])} vs {list(own[k])}" for k in keys[:3]] \
                if label == "wrong shape" else keys[:3]
            parts.append(f"{label} keys {', '.join(detail)}{extra}")
    if parts:
        raise CaptureError(f"--weights {path}: state dict does not match {spec.name} ({size}): " + "; ".join(parts))


def _check_file_config(path: Path, spec: ModelSpec, size: str) -> None:
    """A safetensors file may carry its diffusers config as JSON in the header metadata (``"config"``,
    as `algo.train` writes it): check its class and architecture against ``(spec, size)``.

    Raises:
        CaptureError: unreadable config JSON, another class, or an architecture mismatch (named).
    """
    import json

    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
    if "config" not in meta:
        return
    try:
        found = json.loads(meta["config"])
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise CaptureError(f"--weights {path}: unreadable config in the safetensors metadata ({err})") from None
    if found.get("_class_name") not in (None, spec.diffusers_class):
        raise CaptureError(f"--weights {path}: holds a {found.get('_class_name')}, expected {spec.diffusers_class}")
    _check_config(found, spec, size, str(path))


#: The repository's root (this file is algo/models/checkpoints.py): checkpoints shipped inside it are named
#: relative to it, so traces, results and reports do not depend on the folder the checkout is in.
REPO_ROOT = Path(__file__).resolve().parents[2]


def shown_path(path: str | Path) -> str:
    """How a trace's ``weights`` description names a checkpoint: relative to `REPO_ROOT` (POSIX
    separators) when it lies inside the repository (the shipped model), else absolute."""
    p = Path(path).resolve()
    try:
        return p.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(p)


#: Prefixes of the trace ``weights`` descriptions of checkpoints (`build_model`, `build_streamed`).
_CHECKPOINT_DESCS = ("checkpoint (safetensors file): ", "checkpoint (diffusers folder): ")


def checkpoint_of(weights: str) -> Path | None:
    """The checkpoint path a trace's ``weights`` description names (None for seeded weights).

    Raises:
        CaptureError: the description names a checkpoint that no longer exists.
    """
    for prefix in _CHECKPOINT_DESCS:
        if str(weights).startswith(prefix):
            path = Path(str(weights)[len(prefix):].split("; ")[0])
            if not path.is_absolute():  # a checkpoint shipped in the repository (`shown_path`)
                path = REPO_ROOT / path
            if not path.exists():
                raise CaptureError(f"the trace was captured from checkpoint {path}, which is not found")
            return path
    return None


def _load_safetensors(model: torch.nn.Module, spec: ModelSpec, size: str, path: Path,
                      num_layers: int) -> str:
    """Load a diffusers-keyed state dict from one safetensors file into `model` (strict)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CaptureError(f"--weights {path}: not a readable safetensors file ({err})") from None
    _check_file_config(path, spec, size)
    full_layers = int(spec.sizes[size]["num_layers"])
    prefix = family_of(spec).block_prefix
    if prefix is not None:
        present = {int(k[len(prefix):].split(".")[0]) for k in sd if k.startswith(prefix)}
        if present and present != set(range(full_layers)):
            raise CaptureError(f"--weights {path}: holds blocks {min(present)}..{max(present)} "
                               f"({len(present)} blocks), {spec.name} ({size}) has {full_layers}")
    # Strict check against the full model's keys and shapes (meta device: no memory), then load
    # the tensors of the blocks that were built.
    _check_keys(path, spec, size, {k: tuple(v.shape) for k, v in sd.items()})
    built = set(model.state_dict())
    model.load_state_dict({k: v for k, v in sd.items() if k in built}, strict=True)
    return f"checkpoint (safetensors file): {shown_path(path)}"


def build_model(name: str, size: str, seed: int = 0, *, weights: str | Path | None = None,
                dtype: torch.dtype | None = None, num_layers: int | None = None,
                ) -> tuple[torch.nn.Module, str]:
    """Construct the model, in eval mode, gradients off, with seeded or checkpoint weights.

    Args:
        name: registry name, e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        seed: ``torch.manual_seed`` value used right before construction (seeded weights).
        weights: None (seeded, `WEIGHTS_INIT`); a local diffusers-format folder (``config.json``
            and weights, or a pipeline folder with ``transformer/``), loaded with
            ``from_pretrained(path, local_files_only=True)`` after its config is checked against the
            size's; or one ``.safetensors`` file holding a diffusers-keyed state dict, loaded
            strictly into the model built from the size's config.
        dtype: run dtype (None: the registry's, float32); `_keep_in_fp32_modules` stay float32.
        num_layers: build only the first n trace blocks (None: all; Hunyuan counts dual then
            single-stream blocks). Seeded blocks are identical to the full model's first n
            (construction order: embeddings, rope, blocks 0, 1, ...); a safetensors checkpoint
            must still hold every block. Not with a folder.

    Returns:
        ``(model, weights)``: the diffusers module and the description of its weights for the
        trace's ``weights`` field (seeded: `WEIGHTS_INIT`; checkpoint: its format and absolute path).

    Raises:
        CaptureError: unknown name or size; a missing path, unreadable file or a checkpoint whose
            config or tensors do not match ``(name, size)``.
    """
    import diffusers

    spec = get_spec(name, size)
    cls = getattr(diffusers, spec.diffusers_class)
    full_layers = num_blocks(name, size)
    n = full_layers if num_layers is None else int(num_layers)
    if not 1 <= n <= full_layers:
        raise CaptureError(f"num_layers must be in 1..{full_layers}, got {num_layers}")
    cfg = _layers_config(spec, size, n)
    path = None if weights is None else Path(weights).expanduser().resolve()
    if path is not None and not path.exists():
        raise CaptureError(f"--weights: checkpoint not found: {path}")
    if path is not None and path.is_dir():
        if n != full_layers:
            raise CaptureError("a diffusers folder checkpoint loads every block (num_layers must be None)")
        model, desc = _load_folder(cls, spec, size, path)
    else:
        if path is not None and path.suffix != ".safetensors":
            raise CaptureError(f"--weights {path}: expected a diffusers folder or a .safetensors file")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = cls(**cfg)
        desc = seeded_weights_description(seed, model)
        if path is not None:
            desc = _load_safetensors(model, spec, size, path, n)
        elif n != full_layers:
            desc += f"; blocks 0..{n - 1} of {full_layers} built"
    model = _to_dtype(model, dtype or spec.dtype.get(size, torch.float32))
    model.eval()
    model.requires_grad_(False)
    return model, desc


class Checkpoint:
    """Lazy reader of a diffusers-keyed safetensors checkpoint: a folder (single file or shards
    with an index) or one ``.safetensors`` file. Opening reads only the headers (keys, shapes);
    `tensors` reads the named tensors with ``safetensors.safe_open`` (memory-mapped, only those
    tensors' bytes are read).

    Raises:
        CaptureError: no safetensors weights, unreadable index or file, or keys / shapes that do
            not match the full model of ``(spec, size)`` (missing, unexpected, wrong shape: named).
    """

    def __init__(self, path: Path, spec: ModelSpec, size: str):
        import json

        from safetensors import SafetensorError, safe_open

        self.path = path
        if path.is_dir():
            root = _folder_root(spec, size, path)
            if _safetensors_kind(path, root) == "index":
                try:
                    wmap = json.loads((root / SAFETENSORS_INDEX).read_text())["weight_map"]
                    self.file_of = {str(k): root / str(v) for k, v in wmap.items()}
                except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                    raise CaptureError(f"--weights {path}: unreadable {SAFETENSORS_INDEX} ({err})") from None
                files = sorted(set(self.file_of.values()))
            else:
                self.file_of, files = None, [root / SAFETENSORS_FILE]
            self.desc = f"checkpoint (diffusers folder): {shown_path(path)}"
        else:
            if path.suffix != ".safetensors":
                raise CaptureError(f"--weights {path}: expected a diffusers folder or a .safetensors file")
            files, self.file_of = [path], None
            self.desc = f"checkpoint (safetensors file): {shown_path(path)}"
        shapes: dict[str, tuple] = {}
        for f in files:
            try:
                with safe_open(str(f), framework="pt") as fh:
                    for k in fh.keys():
                        shapes[k] = tuple(fh.get_slice(k).get_shape())
            except (SafetensorError, OSError, ValueError) as err:
                raise CaptureError(f"--weights {path}: not a readable safetensors file {f.name} ({err})") from None
        if self.file_of is None:
            self.file_of = {k: files[0] for k in shapes}
        elif set(shapes) != set(self.file_of):
            odd = sorted(set(shapes) ^ set(self.file_of))[:3]
            raise CaptureError(f"--weights {path}: {SAFETENSORS_INDEX} and the shard files disagree on keys, "
                               f"e.g. {', '.join(odd)}")
        _check_keys(path, spec, size, shapes)
        self.keys = sorted(shapes)
        self.reads = 0  # tensors read so far (tests: only the blocks that ran are read)

    def tensors(self, keys) -> dict[str, torch.Tensor]:
        """The named tensors, float32 (the dtype the model is constructed in), read lazily.

        Each is a fresh copy from PyTorch's allocator (64-byte aligned): ``get_tensor`` may return
        a tensor at any offset, and MKL's float32 GEMM rounds differently for differently aligned
        operands, which made streamed and plain captures of one checkpoint differ in the last bit."""
        from safetensors import safe_open

        by_file: dict[Path, list[str]] = {}
        for k in keys:
            by_file.setdefault(self.file_of[k], []).append(k)
        out = {}
        for f, ks in sorted(by_file.items()):
            with safe_open(str(f), framework="pt") as fh:
                for k in ks:
                    out[k] = fh.get_tensor(k).to(torch.float32, copy=True)
                    self.reads += 1
        return out
