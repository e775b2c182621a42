"""Writing traces: `TraceWriter` streams op arrays into a temporary zip next to the target and renames
it into place on commit (atomic: a failed or interrupted write leaves nothing behind); `save_trace`
writes a whole `Trace`. Format: `algo.trace.format`.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from algo.trace.format import (
    BASE_WRITE_VERSION,
    DERIVED_P_VERSION,
    STATES_ON_DECISIONS_VERSION,
    TRACE_FORMAT,
    TRACE_KINDS,
    OpRecord,
    Trace,
    TraceError,
)
from algo.trace.validate import check_op


class TraceWriter:
    """Write a trace op by op into a temporary zip next to `path`; rename into place on `commit`.

    Use as a context manager: leaving the block normally commits, an exception aborts (the
    temporary file is removed, `path` is untouched). Each `add` validates the op and writes its
    arrays at once, so only the current op lives in memory. Member timestamps are fixed, so equal
    traces are byte-identical files.

    Args:
        path: destination ``.npz``.
        grid: token grid ``(F, H, W)``.
        kind: ``"exact"``, ``"decisions"`` or ``"shapes"``; every added op must be of this kind
            (``"shape"`` ops in a ``"shapes"`` trace).
        **meta: the other `Trace` fields (``b_msb``, ``model``, ``size``, ``weights``, ``seed``,
            ``group_size_rule``, ``steps``, ``notes``); ``steps`` and ``notes`` may also be set as
            attributes before `commit`.

    Raises:
        TraceError: an inconsistent op (the trace is aborted by the context manager).
        algo.fileio.OutputPathError: ``path`` is an existing folder or a parent is a file.
    """

    def __init__(self, path: str | Path, grid: tuple[int, int, int], kind: str = "exact", **meta):
        if kind not in TRACE_KINDS:
            raise TraceError(f"trace kind must be one of {TRACE_KINDS}, got {kind!r}")
        self.path = Path(path)
        self.grid = tuple(int(v) for v in grid)
        self.kind = kind
        self.b_msb = int(meta.pop("b_msb", 4))
        if not 1 <= self.b_msb <= 7:
            raise TraceError(f"b_msb must be in 1..7, got {self.b_msb}")
        self.model = meta.pop("model", "")
        self.size = meta.pop("size", "")
        self.weights = meta.pop("weights", "")
        self.seed = int(meta.pop("seed", 0))
        self.group_size_rule = meta.pop("group_size_rule", "G = 8*ceil(K/64)")
        self.steps = list(meta.pop("steps", []))
        self.notes = meta.pop("notes", "")
        if meta:
            raise TypeError(f"unknown trace fields {sorted(meta)}")
        self.op_meta: list[dict] = []
        self._qk_at: dict[tuple[int, int, str], tuple[int, np.ndarray, np.ndarray, float, float]] = {}
        self.bytes_written = 0
        self.version = BASE_WRITE_VERSION  # raised by `add` (`STATES_ON_DECISIONS_VERSION`); see TRACE_VERSION
        self._done = False
        from algo.fileio import check_output_file, new_file_mode

        check_output_file(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.fchmod(fd, new_file_mode())  # mkstemp makes 0600; give the file ordinary permissions
        self._fh = os.fdopen(fd, "wb")
        self._zf = zipfile.ZipFile(self._fh, "w", compression=zipfile.ZIP_STORED)

    def _write(self, name: str, arr: np.ndarray) -> None:
        from numpy.lib import format as npformat

        info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
        with self._zf.open(info, "w", force_zip64=True) as member:
            npformat.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
        self.bytes_written = self._fh.tell()

    def add(self, op: OpRecord) -> None:
        """Validate `op` and append its arrays to the file."""
        i = len(self.op_meta)
        check_op(op, self.grid, f"op {i} ({op.name}, block {op.block}): ", shapes_ok=self.kind == "shapes")
        if ("shapes" if op.kind == "shape" else op.kind) != self.kind:
            raise TraceError(f"op {i} ({op.name}) is a {op.kind} op in a {self.kind} trace")
        meta = op.meta()
        if self.kind == "exact":
            if op.name in ("qk", "cross_qk"):
                self._qk_at[(op.step, op.block, op.name)] = (i, op.X, op.W, op.x_scale, op.w_scale)
            if op.scores is None:
                self._write(f"op{i:05d}_X", op.X)
            else:  # P derived: reference the qk op holding the same Q and K, else store them here
                q, k_t, qs, ks = op.scores
                src = self._qk_at.get((op.step, op.block, "qk" if op.name == "pv" else "cross_qk"))
                if (src is not None and src[3] == qs and src[4] == ks and src[1].shape == q.shape
                        and src[2].shape == k_t.shape and np.array_equal(src[1], q) and np.array_equal(src[2], k_t)):
                    meta["p_from"]["qk"] = src[0]
                else:
                    self._write(f"op{i:05d}_Q", q)
                    self._write(f"op{i:05d}_Kt", k_t)
                self.version = max(self.version, DERIVED_P_VERSION)
            self._write(f"op{i:05d}_W", op.W)
            if op.attn_out is not None:
                self._write(f"op{i:05d}_O", op.attn_out)
                self._write(f"op{i:05d}_L", op.lse)
        elif self.kind == "decisions":
            self._write(f"op{i:05d}_D", op.decisions)
            if op.attn_out is not None:
                self._write(f"op{i:05d}_O", op.attn_out)
                self._write(f"op{i:05d}_L", op.lse)
                self.version = STATES_ON_DECISIONS_VERSION
        self.op_meta.append(meta)

    def commit(self) -> None:
        """Write the metadata and rename the file into place."""
        meta = {
            "format": TRACE_FORMAT, "version": self.version, "kind": self.kind,
            "model": self.model, "size": self.size, "weights": self.weights, "seed": self.seed,
            "grid": list(self.grid), "b_msb": self.b_msb, "group_size_rule": self.group_size_rule,
            "steps": self.steps, "notes": self.notes, "ops": self.op_meta,
        }
        self._write("meta", np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))
        self._zf.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self._tmp, self.path)
        self._done = True

    def abort(self) -> None:
        """Drop the temporary file; `path` is left as it was."""
        if self._done:
            return
        self._done = True
        try:
            self._zf.close()
        except (OSError, ValueError, zipfile.BadZipFile):
            pass
        self._fh.close()
        Path(self._tmp).unlink(missing_ok=True)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._done:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write `trace` to `path` atomically (nothing is left behind on failure), format version 3 (4 when a
    decision op holds attention states).

    Raises:
        TraceError: the trace is inconsistent (checked before anything is written) or mixes kinds.
    """
    kind = trace.kind
    if kind not in TRACE_KINDS:
        raise TraceError(f"a trace must hold only exact or only decision ops, got {kind}")
    for i, op in enumerate(trace.ops):
        check_op(op, trace.grid, f"op {i}: ", shapes_ok=kind == "shapes")
    with TraceWriter(path, trace.grid, kind, b_msb=trace.b_msb, model=trace.model, size=trace.size,
                     weights=trace.weights, seed=trace.seed, group_size_rule=trace.group_size_rule,
                     steps=trace.steps, notes=trace.notes) as wr:
        for op in trace.ops:
            wr.add(op)
