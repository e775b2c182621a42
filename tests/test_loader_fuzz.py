"""Fuzzing the trace and config loaders (hypothesis): whatever a damaged file holds, the loader either
returns a valid object or raises its documented error class (`algo.trace.TraceError`,
`hw.config.ConfigError`) with a one-line message; never another exception (a traceback from the
CLI), never a hang, never a file descriptor left open. The CLI then answers such a file with one
``error:`` line, exit code 2 and no output file.

Damage: random truncations, byte flips and insertions of a valid file; zip members dropped, added,
renamed; arrays replaced by other dtypes and shapes, NaN and infinity in float members; metadata
fields removed, retyped, set to NaN/infinity or to other versions; config TOML with keys removed,
added, retyped, NaN/infinity, non-UTF-8 bytes. The valid files are built here by hand (three ops,
every trace kind, derived P, attention states), so every branch of the reader is reached.

Cases are derandomised (the same every run, as CI needs) and each is bounded by an alarm, so a hang
fails instead of stalling the suite. About 2,500 cases in total.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import tomllib
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from algo.trace import Group, OpRecord, Trace, TraceError, load_trace, pack_decisions, save_trace
from hw.config import AcceleratorConfig, ConfigError, load_config

FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
GRID = (2, 2, 3)  # 12 tokens
M = 12
#: Seconds one load may take before it counts as a hang (a valid load takes milliseconds).
HANG_S = 10


@contextmanager
def no_hang():
    def alarm(*_):
        raise AssertionError(f"a load took more than {HANG_S} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- valid files ----------------------------------------------------------------------------------

def _exact_trace() -> Trace:
    """qkv (int8), qk and pv with derived P (version 5) and attention states on pv."""
    rng = np.random.default_rng(1)
    x = rng.integers(-100, 100, size=(1, M, 8)).astype(np.int8)
    w = rng.integers(-100, 100, size=(1, 8, 6)).astype(np.int8)
    q = rng.integers(-100, 100, size=(2, M, 4)).astype(np.int8)
    k_t = rng.integers(-100, 100, size=(2, 4, M)).astype(np.int8)
    v = rng.integers(-100, 100, size=(2, M, 4)).astype(np.int8)
    blocks = [Group(0, 4, "f"), Group(4, 8, "f")]
    ops = [
        OpRecord("qkv", 0, 0, x, w, blocks, (1.0, 3.0), x_scale=0.1, w_scale=0.02),
        OpRecord("qk", 0, 0, q, k_t, [Group(0, 2, "w", "t"), Group(2, 4, "f", "h")], (1.0, 3.0),
                 x_scale=0.05, w_scale=0.04),
        OpRecord("pv", 0, 0, None, v, [Group(0, 6, "f"), Group(6, M, "f")], (1.0, 3.0), x_signed=False,
                 scores=(q, k_t, 0.05, 0.04),
                 attn_out=rng.standard_normal((2, M, 4)).astype(np.float32),
                 lse=rng.standard_normal((2, M)).astype(np.float32)),
    ]
    return Trace(grid=GRID, ops=ops, model="fuzz", size="test", weights="random",
                 steps=[{"index": 0, "sigma": 0.5, "timestep": 500.0}])


def _decision_trace() -> Trace:
    """qkv and pv decision ops, two theta pairs, attention states on pv (version 4)."""
    rng = np.random.default_rng(2)
    thetas = ((1.0, 3.0), (2.0, 6.0))
    ops = []
    for name, batch, K, N in (("qkv", 1, 8, 6), ("pv", 2, M, 4)):  # noqa: N806
        groups = [Group(0, K // 2, "f"), Group(K // 2, K, "f")]
        d = rng.choice(3, size=(len(thetas), batch, *GRID, len(groups))).astype(np.int8)
        d[:, :, 0] = 0  # the first frame has no temporal neighbour: COMPUTE
        packed = np.stack([np.stack([pack_decisions(d[t, b]) for b in range(batch)]) for t in range(len(thetas))])
        states = {} if name != "pv" else dict(attn_out=rng.standard_normal((batch, M, N)).astype(np.float32),
                                              lse=rng.standard_normal((batch, M)).astype(np.float32))
        ops.append(OpRecord(name, 0, 0, None, None, groups, thetas[0], x_signed=name != "pv",
                            dims=(batch, M, K, N), decisions=packed, thetas=thetas, **states))
    return Trace(grid=GRID, ops=ops, model="fuzz", size="test", weights="random")


def _shape_trace() -> Trace:
    ops = [OpRecord("ffn1", 0, 0, None, None, [Group(0, 8, "f")], (1.0, 3.0), dims=(1, M, 8, 16))]
    return Trace(grid=GRID, ops=ops, model="fuzz", size="test", weights="random")


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> dict[str, bytes]:
    """The bytes of one valid file of each trace kind (each loads as written)."""
    d = tmp_path_factory.mktemp("valid")
    out = {}
    for kind, tr in (("exact", _exact_trace()), ("decisions", _decision_trace()), ("shapes", _shape_trace())):
        save_trace(tr, d / f"{kind}.npz")
        assert len(load_trace(d / f"{kind}.npz").ops) == len(tr.ops)
        out[kind] = (d / f"{kind}.npz").read_bytes()
    assert json.loads(_members(out["exact"])["meta"].tobytes())["version"] == 5
    assert json.loads(_members(out["decisions"])["meta"].tobytes())["version"] == 4
    return out


def _members(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _zip(arrays: dict[str, np.ndarray | bytes]) -> bytes:
    """A ``.npz`` of ``arrays`` in order (bytes values are written as raw member data)."""
    from numpy.lib import format as npformat

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            with zf.open(f"{name}.npy", "w") as member:
                if isinstance(arr, bytes):
                    member.write(arr)
                else:  # object arrays as numpy pickles them (the loader must refuse them)
                    npformat.write_array(member, np.asarray(arr), allow_pickle=arr.dtype == object)
    return buf.getvalue()


# -- the property -----------------------------------------------------------------------------------

def check_trace_bytes(path: Path, data: bytes, must_fail: bool) -> None:
    """Write ``data`` to ``path`` and load it: a valid trace or one `TraceError` line, no fd leaked."""
    path.write_bytes(data)
    before = open_fds()
    with no_hang():
        try:
            tr = load_trace(path)
        except TraceError as err:
            msg = str(err)
            assert msg and "\n" not in msg, repr(msg)
        else:
            assert not must_fail, "a damaged trace loaded"
            assert tr.kind in ("exact", "decisions", "shapes")
            for op in tr.ops:  # what loaded is what validation promises
                for arr in (op.X, op.W, op.attn_out, op.lse):
                    if arr is not None and arr.dtype.kind == "f":
                        assert np.isfinite(arr).all()
                assert math.isfinite(op.x_scale) and op.x_scale > 0
    assert open_fds() == before, "the loader left a file open"


KINDS = st.sampled_from(("exact", "decisions", "shapes"))


@settings(FUZZ, max_examples=300)
@given(kind=KINDS, cut=st.floats(0.0, 1.0, exclude_max=True))
def test_truncated_traces_are_refused(valid, tmp_path, kind, cut):
    data = valid[kind]
    check_trace_bytes(tmp_path / "t.npz", data[: int(cut * len(data))], must_fail=True)


@settings(FUZZ, max_examples=500)
@given(kind=KINDS, flips=st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(1, 255)),
                                  min_size=1, max_size=8))
def test_byte_flips(valid, tmp_path, kind, flips):
    data = bytearray(valid[kind])
    for at, xor in flips:
        data[int(at * len(data))] ^= xor
    check_trace_bytes(tmp_path / "t.npz", bytes(data), must_fail=False)


@settings(FUZZ, max_examples=200)
@given(kind=KINDS, at=st.floats(0.0, 1.0), junk=st.binary(min_size=1, max_size=64), delete=st.booleans())
def test_inserted_or_deleted_bytes(valid, tmp_path, kind, at, junk, delete):
    data = valid[kind]
    i = int(at * len(data))
    data = data[:i] + data[i + len(junk):] if delete else data[:i] + junk + data[i:]
    check_trace_bytes(tmp_path / "t.npz", data, must_fail=False)


@settings(FUZZ, max_examples=200)
@given(kind=KINDS, member=st.integers(0, 20), central=st.booleans(), field=st.sampled_from(["flags", "method"]),
       value=st.integers(0, 0xFFFF))
@example(kind="exact", member=0, central=True, field="method", value=8)  # deflate over stored bytes: zlib.error or a CRC mismatch
def test_zip_header_fields(valid, tmp_path, kind, member, central, field, value):
    """A member's compression method or flag bits changed in its local or central header (unknown
    methods, deflate over stored data, the encryption bit): what zipfile and zlib raise is refused."""
    data = bytearray(valid[kind])
    sig, off = (b"PK\x01\x02", {"flags": 8, "method": 10}) if central else (b"PK\x03\x04", {"flags": 6, "method": 8})
    starts = [i for i in range(len(data) - 4) if data[i:i + 4] == sig]
    at = starts[member % len(starts)] + off[field]
    data[at:at + 2] = value.to_bytes(2, "little")
    check_trace_bytes(tmp_path / "t.npz", bytes(data), must_fail=False)


DTYPES = st.sampled_from(["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool",
                          "complex64", "U3", "S2"])


def _bad_array(draw, arr: np.ndarray) -> tuple[np.ndarray, bool]:
    """A replacement for ``arr`` and whether it is certainly invalid."""
    how = draw(st.sampled_from(["dtype", "shape", "nonfinite", "scalar", "empty", "object"]))
    if how == "dtype":
        dt = np.dtype(draw(DTYPES))
        return arr.astype(dt) if dt.kind not in "US" else arr.astype(str).astype(dt), dt != arr.dtype
    if how == "shape":
        extra = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
        new = np.zeros(tuple(extra) + arr.shape[1:] if draw(st.booleans()) else arr.shape + tuple(extra),
                       dtype=arr.dtype)
        return new, new.shape != arr.shape
    if how == "nonfinite":
        f = arr.astype(np.float32 if arr.dtype.kind != "f" else arr.dtype).copy()
        if f.size:
            f.flat[draw(st.integers(0, f.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return f, True
    if how == "scalar":
        return np.array(draw(st.integers(0, 100))).astype(arr.dtype), True
    if how == "empty":
        return np.zeros((0,), dtype=arr.dtype), arr.size > 0
    return np.asarray([1, "a", None], dtype=object), True  # refused by allow_pickle=False


@settings(FUZZ, max_examples=400)
@given(kind=KINDS, data=st.data())
def test_member_damage(valid, tmp_path, kind, data):
    """Members dropped, added, renamed, or replaced by arrays of other dtypes/shapes or with NaN/inf."""
    members = _members(valid[kind])
    names = sorted(members)
    arrays = [n for n in names if n != "meta"]  # a shape trace has none
    what = data.draw(st.sampled_from(["drop", "add", "rename", "raw"] + (["replace"] if arrays else [])))
    must_fail = False
    if what == "drop":
        victim = data.draw(st.sampled_from(names))
        del members[victim]
        must_fail = True  # every member of these files is needed
    elif what == "add":
        name = data.draw(st.sampled_from(["op00000_X", "op00001_D", "op00002_O", "op00009_W", "extra", "meta2"]))
        members[name] = np.zeros(data.draw(st.integers(0, 5)), dtype=data.draw(DTYPES))
    elif what == "rename":
        victim = data.draw(st.sampled_from(names))
        members[victim + "_"] = members.pop(victim)
        must_fail = True
    elif what == "replace":
        victim = data.draw(st.sampled_from(arrays))
        members[victim], must_fail = _bad_array(data.draw, members[victim])
    else:  # a member that is not a valid .npy at all
        victim = data.draw(st.sampled_from(names))
        members[victim] = data.draw(st.binary(max_size=80))
        must_fail = True
    check_trace_bytes(tmp_path / "t.npz", _zip(members), must_fail=must_fail)


JSON_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                      st.text(max_size=5), st.lists(st.integers(-3, 3), max_size=4),
                      st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def _paths(obj, prefix=()):
    """Every (path, value) inside a JSON object."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _set(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def _del(obj, path):
    for p in path[:-1]:
        obj = obj[p]
    if isinstance(obj, dict):
        del obj[path[-1]]
    else:
        obj.pop(path[-1])


@settings(FUZZ, max_examples=500)
@given(kind=KINDS, data=st.data())
def test_metadata_damage(valid, tmp_path, kind, data):
    """Metadata fields removed, retyped, set to NaN/infinity, other versions and formats, bad JSON."""
    members = _members(valid[kind])
    meta = json.loads(members["meta"].tobytes())
    paths = [p for p, _ in _paths(meta) if p]
    what = data.draw(st.sampled_from(["delete", "retype", "nonfinite", "version", "format", "text"]))
    must_fail = False
    if what == "delete":
        p = data.draw(st.sampled_from(paths))
        _del(meta, p)
    elif what == "retype":
        _set(meta, data.draw(st.sampled_from(paths)), data.draw(JSON_JUNK))
    elif what == "nonfinite":
        floats = [p for p, v in _paths(meta) if p and isinstance(v, float) and p[-1] not in ("sigma", "timestep")]
        _set(meta, data.draw(st.sampled_from(floats)), data.draw(NONFINITE))
        must_fail = True  # theta, thetas and scales must be finite
    elif what == "version":
        meta["version"] = data.draw(st.one_of(st.integers(-3, 9).filter(lambda v: v not in (3, 4, 5)), JSON_JUNK))
        must_fail = meta["version"] not in (1, 2, 3, 4, 5)
    elif what == "format":
        meta["format"] = data.draw(st.text(max_size=16).filter(lambda s: s != "kaleido-trace"))
        must_fail = True
    if what == "text":
        raw = data.draw(st.binary(max_size=60))
        members["meta"] = np.frombuffer(raw, dtype=np.uint8)
        must_fail = True
    else:
        members["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    check_trace_bytes(tmp_path / "t.npz", _zip(members), must_fail=must_fail)


# -- the config loader ------------------------------------------------------------------------------

TINY = tomllib.loads(Path(__file__).resolve().parents[1].joinpath("hw/presets/tiny-8x8.toml").read_text())
TOML_JUNK = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True),
                      st.text(max_size=6), st.lists(st.integers(-3, 300), max_size=3))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string for these characters
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def _toml(d: dict) -> str:
    return "".join(f"{k} = {_toml_value(v)}\n" for k, v in d.items())


def check_config_bytes(path: Path, data: bytes, must_fail: bool) -> None:
    path.write_bytes(data)
    with no_hang():
        try:
            cfg = load_config(path)
        except ConfigError as err:
            msg = str(err)
            assert msg and "\n" not in msg, repr(msg)
        else:
            assert not must_fail, "a damaged config loaded"
            assert isinstance(cfg, AcceleratorConfig)
            assert all(math.isfinite(v) for v in cfg.model_dump().values() if isinstance(v, float))


#: The config's float fields (clock_mhz is an integer in the preset file, a float in the schema).
FLOAT_KEYS = sorted(k for k, f in AcceleratorConfig.model_fields.items() if f.annotation in (float, "float"))
REQUIRED = sorted(k for k, f in AcceleratorConfig.model_fields.items() if f.is_required())


@settings(FUZZ, max_examples=400)
@given(data=st.data())
def test_config_damage(tmp_path, data):
    """Keys removed, added, retyped; NaN/infinity in float keys; TOML text and bytes damaged."""
    d = dict(TINY)
    what = data.draw(st.sampled_from(["delete", "add", "retype", "nonfinite", "bytes", "truncate"]))
    must_fail = False
    if what == "delete":
        key = data.draw(st.sampled_from(sorted(d)))
        del d[key]
        must_fail = key in REQUIRED
    elif what == "add":
        d[data.draw(st.sampled_from(["extra", "rows", "Array_rows", "dram"]))] = data.draw(TOML_JUNK)
        must_fail = True  # unknown keys are refused
    elif what == "retype":
        d[data.draw(st.sampled_from(sorted(d)))] = data.draw(TOML_JUNK)
    elif what == "nonfinite":
        d[data.draw(st.sampled_from(FLOAT_KEYS))] = data.draw(NONFINITE)
        must_fail = True
    text = _toml(d).encode()
    if what == "bytes":
        b = bytearray(text)
        for at, xor in data.draw(st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(1, 255)),
                                          min_size=1, max_size=6)):
            b[int(at * len(b))] ^= xor
        text = bytes(b)
    elif what == "truncate":
        text = text[: int(data.draw(st.floats(0.0, 1.0, exclude_max=True)) * len(text))]
        must_fail = any(f"{k} =".encode() not in text for k in REQUIRED)  # a cut value may still be valid
    check_config_bytes(tmp_path / "c.toml", text, must_fail=must_fail)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_config_non_utf8_and_unreadable(tmp_path):
    latin1 = (_toml({k: v for k, v in TINY.items() if k != "description"}) + 'description = "caf\u00e9"\n').encode("latin-1")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(_write(tmp_path / "latin1.toml", latin1))
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    with pytest.raises(ConfigError):
        load_config(folder)


# -- the CLI on damaged files ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def damaged(valid, tmp_path_factory) -> list[Path]:
    """A few certainly-bad traces: truncated, a NaN state, a future version, a flipped CRC'd byte."""
    d = tmp_path_factory.mktemp("damaged")
    files = []
    data = valid["exact"]
    files.append(d / "cut.npz")
    files[-1].write_bytes(data[: len(data) // 2])
    m = _members(valid["decisions"])
    m["op00001_L"] = m["op00001_L"].copy()
    m["op00001_L"][0, 0] = np.nan
    files.append(d / "nan.npz")
    files[-1].write_bytes(_zip(m))
    m = _members(valid["exact"])
    meta = json.loads(m["meta"].tobytes())
    meta["version"] = 99
    m["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    files.append(d / "future.npz")
    files[-1].write_bytes(_zip(m))
    b = bytearray(data)
    b[len(b) // 3] ^= 0xFF  # inside an array member: a CRC mismatch
    files.append(d / "flip.npz")
    files[-1].write_bytes(bytes(b))
    for f in files:
        with pytest.raises(TraceError):
            load_trace(f)
    return files


def test_cli_answers_damaged_traces_with_one_line(damaged, tmp_path):
    from tests.test_cli import assert_one_line_error, kaleido

    for f in damaged:
        out = tmp_path / f"{f.stem}.json"
        if f.stem == "nan":  # a damaged attention state: the cycle model reads no states (D72), readers that do refuse
            assert_one_line_error(kaleido("inspect", str(f)))
            continue
        assert_one_line_error(kaleido("simulate", str(f), "--config", "tiny-8x8", "--json", str(out)))
        assert not out.exists()
    assert_one_line_error(kaleido("inspect", str(damaged[0])))
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_bytes(_toml(TINY | {"clock_mhz": math.nan}).encode())
    out = tmp_path / "gemm.json"
    assert_one_line_error(kaleido("simulate", "--gemm", "16,16,16", "--config", str(bad_cfg), "--json", str(out)),
                          "clock_mhz")
    assert not out.exists()
