"""Reading traces: `TraceReader` opens a file, validates its metadata at once and each op's arrays on
demand (`algo.trace.validate`); `load_trace` reads a whole trace. Every problem with the file is a
`TraceError` with a one-line reason. Format: `algo.trace.format`.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from algo.trace.format import (
    DERIVED_P_VERSION,
    READABLE_VERSIONS,
    STATES_ON_DECISIONS_VERSION,
    TRACE_FORMAT,
    TRACE_KINDS,
    Group,
    OpRecord,
    Trace,
    TraceError,
)
from algo.trace.validate import check_op

#: What reading a damaged zip member can raise besides `TraceError`: zipfile's own errors, an unknown
#: or mis-flagged compression method (NotImplementedError, zlib.error), an "encrypted" flag
#: (RuntimeError), truncated structures (struct.error, EOFError), numpy's header and size checks
#: (ValueError, MemoryError for an absurd shape), and the OS.
FILE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, NotImplementedError,
               RuntimeError, zlib.error, struct.error, MemoryError, OverflowError)


def _as_pair(t) -> tuple[float, float]:
    if len(t) != 2:
        raise TypeError(f"theta pair {t!r}")
    return (float(t[0]), float(t[1]))


def _states(npz, files, om: dict, i: int, where: str, read: bool = True) -> dict:
    """``attn_out``/``lse`` keyword arguments of op i when its record says ``attn_states`` (else {};
    also {} when not ``read``, once the members are known to exist)."""
    if not om.get("attn_states"):
        return {}
    ko, kl = f"op{i:05d}_O", f"op{i:05d}_L"
    if ko not in files or kl not in files:
        raise TraceError(f"{where}attention state arrays missing from the file")
    if not read:
        return {}
    return dict(attn_out=_member(npz, ko, where), lse=_member(npz, kl, where))


def _member(npz, key: str, where: str) -> np.ndarray:
    """Array ``key`` of the archive: a member that is not a ``.npy`` array (np.load hands back its raw
    bytes) is refused."""
    arr = npz[key]
    if not isinstance(arr, np.ndarray):
        raise TraceError(f"{where}member {key} is not a NumPy array")
    return arr


def load_trace(path: str | Path, derive_p: bool = True, states: bool = True) -> Trace:
    """Read and validate a trace (format version 1 to 5; exact, decisions or shapes).

    ``derive_p``, ``states``: as `TraceReader` (True: every exact pv op's P regenerated whole into X;
    the attention states read).

    Raises:
        TraceError: missing file, not a trace, wrong format, version or kind, missing arrays,
            bad shapes or dtypes, wrong packed length, invalid decision codes, non-finite values,
            inconsistent metadata, a truncated or corrupted (CRC) file.
    """
    with TraceReader(path, derive_p=derive_p, states=states) as rd:
        return rd.trace(rd.load_ops(range(rd.n_ops)))


class TraceReader:
    """A trace file opened for reading op by op: the metadata at once, each op's arrays on demand.

    `load_trace` reads every op through it; a simulator that splits a large trace (a whole video's
    decisions, gigabytes) by (step, block) loads only the ops it needs (`load_ops`), so no process
    holds more than those ops' arrays. Use as a context manager (closes the file).

    Attributes:
        path: the file. kind: ``"exact"``, ``"decisions"`` or ``"shapes"``. version: format version.
        grid: ``(F, H, W)``. n_ops: number of ops. op_meta: the ops' records (list of dicts, as stored).
        derive_p: (argument) exact pv ops whose P is derived (version 5) get X = the whole regenerated
            P (True; small grids) or X None with `OpRecord.scores` set, for `OpRecord.p_rows` chunks
            (False; full sizes: P at 480p is 12.9 GB per block).
        states: (argument) read the attention states of ops that hold them (True), or leave
            ``attn_out``/``lse`` None after checking that their members exist (False: the cycle model
            never reads them; 201 MB per 480p Wan2.1-1.3B block, 468 MB at 720p, D72).

    Raises:
        TraceError: (on opening) missing file, not a trace, wrong format, version or kind, bad grid,
            corrupt metadata; (`load_ops`) as `load_trace` for the ops read.
    """

    def __init__(self, path: str | Path, derive_p: bool = True, states: bool = True):
        self.derive_p = bool(derive_p)
        self.states = bool(states)
        self.path = path = Path(path)
        if not path.is_file():
            raise TraceError(f"trace not found: {path}")
        try:
            is_zip = zipfile.is_zipfile(path)
        except OSError as err:
            raise TraceError(f"{path}: cannot read the trace file ({err})") from None
        if not is_zip:  # np.load would try a pickle and talk about allow_pickle
            raise TraceError(f"{path}: not a Kaleido trace (not a valid .npz archive: another kind of file, "
                             "or a corrupt or truncated trace)")
        # Opened here, not by np.load: np.load leaves its own file open when the zip directory is bad.
        try:
            self._fh = open(path, "rb")  # noqa: SIM115 - closed by `close`
        except OSError as err:
            raise TraceError(f"{path}: cannot read the trace file ({err})") from None
        self._npz = None
        try:
            try:
                self._npz = np.load(self._fh, allow_pickle=False)
            except FILE_ERRORS as err:
                raise TraceError(f"{path}: corrupt or truncated trace file ({err})") from None
            self._read_meta()
        except BaseException:
            self.close()
            raise

    def _guard(self, fn):
        try:
            return fn()
        except TraceError:
            raise
        except (KeyError, TypeError, IndexError, AttributeError, OverflowError) as err:
            raise TraceError(f"{self.path}: corrupt trace metadata (missing or bad field {err})") from None
        except FILE_ERRORS as err:
            raise TraceError(f"{self.path}: corrupt or truncated trace file ({type(err).__name__}: {err})") from None

    def _read_meta(self) -> None:
        path, npz = self.path, self._npz

        def read():
            self.files = set(npz.files)
            if "meta" not in self.files:
                raise TraceError(f"{path}: not a Kaleido trace (no 'meta' entry)")
            try:
                meta = json.loads(bytes(npz["meta"]).decode())
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise TraceError(f"{path}: corrupt trace metadata ({err})") from None
            if not isinstance(meta, dict) or meta.get("format") != TRACE_FORMAT:
                fmt = meta.get("format") if isinstance(meta, dict) else None
                raise TraceError(f"{path}: not a Kaleido trace (format {fmt!r})")
            version = meta.get("version")
            if type(version) is not int or version not in READABLE_VERSIONS:
                raise TraceError(
                    f"{path}: trace format version {version} is not supported "
                    f"(this build reads versions {', '.join(map(str, READABLE_VERSIONS))}); re-capture the trace"
                )
            kind = meta.get("kind", "exact") if version >= 2 else "exact"
            if kind == "shapes" and version < 3:
                raise TraceError(f"{path}: shape traces exist from format version 3 on, file says {version}")
            if kind not in TRACE_KINDS:
                raise TraceError(f"{path}: unknown trace kind {kind!r} (expected one of {TRACE_KINDS})")
            grid = tuple(int(v) for v in meta["grid"])
            if len(grid) != 3 or min(grid) <= 0:
                raise TraceError(f"{path}: bad token grid {meta['grid']}")
            b_msb = int(meta["b_msb"])
            if not 1 <= b_msb <= 7:
                raise TraceError(f"{path}: b_msb must be in 1..7, got {b_msb}")
            self.meta, self.version, self.kind, self.grid, self.b_msb = meta, int(version), kind, grid, b_msb
            self.op_meta = list(meta["ops"])
            if not all(isinstance(om, dict) for om in self.op_meta):
                raise TraceError(f"{path}: corrupt trace metadata (an op record is not an object)")
            self.n_ops = len(self.op_meta)
            self._fields = dict(model=meta["model"], size=meta["size"], weights=meta["weights"],
                                seed=int(meta["seed"]), group_size_rule=meta["group_size_rule"],
                                steps=list(meta["steps"]), notes=meta.get("notes", ""))

        self._guard(read)

    def _common(self, i: int) -> tuple[dict, tuple[int, int, int, int]]:
        om = self.op_meta[i]
        common = dict(
            name=om["name"], block=int(om["block"]), step=int(om["step"]),
            groups=[Group(int(g[0]), int(g[1]), str(g[2]), str(g[3])) for g in om["groups"]],
            theta=_as_pair(om["theta"]), x_signed=bool(om["x_signed"]),
            x_scale=float(om["x_scale"]), w_scale=float(om["w_scale"]),
        )
        return common, (int(om["batch"]), int(om["M"]), int(om["K"]), int(om["N"]))

    def _load_op(self, i: int) -> OpRecord:
        npz, files, om, kind, path = self._npz, self.files, self.op_meta[i], self.kind, self.path
        where = f"{path}: op {i} ({om.get('name')}, block {om.get('block')}): "
        common, dims = self._common(i)
        if kind == "exact" and "p_from" in om:
            op = OpRecord(X=None, W=self._array(f"op{i:05d}_W", where), scores=self._scores(i, where),
                          **common, **_states(npz, files, om, i, where, self.states))
            if self.derive_p:
                check_op(op, self.grid, where)
                op.X = op.p_rows()
        elif kind == "exact":
            kx, kw = f"op{i:05d}_X", f"op{i:05d}_W"
            if kx not in files or kw not in files:
                raise TraceError(f"{where}operand arrays missing from the file")
            op = OpRecord(X=_member(npz, kx, where), W=_member(npz, kw, where), **common, **_states(npz, files, om, i, where, self.states))
        elif kind == "shapes":
            op = OpRecord(X=None, W=None, dims=dims, **common)
        else:
            kd = f"op{i:05d}_D"
            if kd not in files:
                raise TraceError(f"{where}decision array missing from the file")
            src = om.get("derived_from")
            if om.get("attn_states") and self.version < STATES_ON_DECISIONS_VERSION:
                raise TraceError(f"{where}attention states on a decision op need format version "
                                 f"{STATES_ON_DECISIONS_VERSION}, file says {self.version}")
            op = OpRecord(X=None, W=None, dims=dims, decisions=_member(npz, kd, where), **_states(npz, files, om, i, where, self.states),
                          thetas=tuple(_as_pair(t) for t in om["thetas"]),
                          derived_from=None if src is None else (int(src[0]), int(src[1])), **common)
        check_op(op, self.grid, where, shapes_ok=kind == "shapes")
        if (op.batch, op.M, op.K, op.N) != dims:
            raise TraceError(f"{where}array shapes disagree with the recorded (batch, M, K, N)")
        return op

    def _array(self, key: str, where: str) -> np.ndarray:
        if key not in self.files:
            raise TraceError(f"{where}array {key} missing from the file")
        return _member(self._npz, key, where)

    def _scores(self, i: int, where: str) -> tuple[np.ndarray, np.ndarray, float, float]:
        """``(Q, Kt, q_scale, k_scale)`` of a pv op with derived P: its own ``_Q``/``_Kt`` arrays or
        those of the qk op its ``p_from`` names (same step and block, recorded earlier)."""
        if self.version < DERIVED_P_VERSION:
            raise TraceError(f"{where}derived P needs format version {DERIVED_P_VERSION}, file says {self.version}")
        om, src = self.op_meta[i], self.op_meta[i]["p_from"]
        qs, ks = float(src["q_scale"]), float(src["k_scale"])
        if "qk" not in src:
            return self._array(f"op{i:05d}_Q", where), self._array(f"op{i:05d}_Kt", where), qs, ks
        j = int(src["qk"])
        if not 0 <= j < i:
            raise TraceError(f"{where}p_from names op {j}, not an earlier op")
        qm = self.op_meta[j]
        if (qm["name"] != ("qk" if om["name"] == "pv" else "cross_qk") or int(qm["step"]) != int(om["step"])
                or int(qm["block"]) != int(om["block"]) or float(qm["x_scale"]) != qs or float(qm["w_scale"]) != ks):
            raise TraceError(f"{where}p_from names op {j} ({qm['name']}, block {qm['block']}), not the qk op "
                             "of the same step and block with the same scales")
        return self._array(f"op{j:05d}_X", where), self._array(f"op{j:05d}_W", where), qs, ks

    def load_ops(self, indices) -> list[OpRecord]:
        """The ops at ``indices`` (0-based, file order), arrays read and validated as `load_trace` does."""
        return self._guard(lambda: [self._load_op(int(i)) for i in indices])

    def shape_ops(self) -> list[OpRecord]:
        """Every op without its arrays: shapes, groups, theta, thetas (decision ops) and ``derived_from``;
        ``dims`` set, X, W and decisions None (what shape and compatibility checks need)."""
        def build():
            out = []
            for i, om in enumerate(self.op_meta):
                common, dims = self._common(i)
                thetas = tuple(_as_pair(t) for t in om.get("thetas", ()))
                src = om.get("derived_from")
                out.append(OpRecord(X=None, W=None, dims=dims, thetas=thetas,
                                    derived_from=None if src is None else (int(src[0]), int(src[1])), **common))
            return out

        return self._guard(build)

    def trace(self, ops: list[OpRecord]) -> Trace:
        """A `Trace` of this file's metadata holding ``ops``."""
        return Trace(grid=self.grid, ops=ops, b_msb=self.b_msb, version=self.version, **self._fields)

    def close(self) -> None:
        if self._npz is not None:
            self._npz.close()
        self._fh.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
