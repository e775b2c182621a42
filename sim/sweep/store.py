"""Point results on disk, each under a content hash of its inputs, written atomically.

A point's key is the SHA-256 of a canonical JSON of everything its result depends on: the trace
file's SHA-256, the full accelerator config, theta index, energy table (a TOML path by its content's
digest), dispatcher on/off (a workload point: the workload file's SHA-256, the config or A100, device
count, synthetic decisions and seed, energy table), and the code version (`code_version`: a digest of the simulator's own
source files, so a changed model never reuses stale results). Results live in
``DIR/points/<key>.json``; a file there is a finished point (written by `atomic_write_json`: a killed
writer leaves no half file), so a restarted sweep skips exactly the points that finished.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from algo.fileio import atomic_write_json

#: Packages whose sources make up the code version.
CODE_PACKAGES = ("algo", "hw", "sim")
#: Format of a point file.
POINT_FORMAT = "kaleido-sweep-point"
POINT_VERSION = 1


@functools.cache
def code_version() -> str:
    """SHA-256 (hex) over the relative path and bytes of every ``.py`` and ``.toml`` file of
    `CODE_PACKAGES`, in sorted order."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for pkg in CODE_PACKAGES:
        for p in sorted((root / pkg).rglob("*")):
            if p.suffix in (".py", ".toml") and p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes (memoised per path, size and modification time)."""
    st = Path(path).stat()
    return _file_digest(str(path), st.st_size, st.st_mtime_ns)


def point_inputs(point) -> dict:
    """The canonical inputs of a `sim.sweep.spec.Point` that its key hashes."""
    tech = point.tech
    if tech is not None and Path(tech).suffix == ".toml":
        tech = {"file_sha256": file_digest(tech)}
    if point.kind == "workload":
        return {"kind": "workload", "workload_sha256": file_digest(point.workload),
                "config": None if point.config is None else point.config.model_dump(mode="json"),
                "devices": point.devices, "reuse": point.reuse, "seed": point.seed, "tech": tech,
                "code": code_version()}
    return {"trace_sha256": file_digest(point.trace), "config": point.config.model_dump(mode="json"),
            "theta_index": point.theta_index, "tech": tech, "dispatcher": point.dispatcher,
            "code": code_version()}


def point_key(point) -> str:
    """SHA-256 (hex) of `point_inputs` as sorted, compact JSON."""
    blob = json.dumps(point_inputs(point), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class PointStore:
    """``DIR/points/<key>.json`` files: `get` (None when the point has not finished) and `put`."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir) / "points"

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def get(self, key: str) -> dict | None:
        p = self.path(key)
        if not p.is_file():
            return None
        try:
            obj = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None  # unreadable (not ours): the point runs again
        if obj.get("format") != POINT_FORMAT or obj.get("version") != POINT_VERSION or obj.get("key") != key:
            return None
        return obj

    def put(self, key: str, outcome: dict) -> None:
        atomic_write_json(self.path(key), {"format": POINT_FORMAT, "version": POINT_VERSION, "key": key,
                                           **outcome})
