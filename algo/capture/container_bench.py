"""Container choice for trace arrays, measured: stored ``.npz`` (the format), deflated ``.npz``, and
HDF5 chunked with gzip (h5py, when installed), on real captured int8 operands.

``python -m algo.capture.container_bench [--grid F,H,W]`` captures one tiny-model block at that grid
(default 8,16,16 = 2,048 tokens), writes its arrays in each container and prints one line per
container: file size, write time, and the time to read 64 random 64 x 64 tiles of the largest
operand (``ffn2``'s X), each tile read on its own (open, read, close) as a consumer asking for one
tile would. Stored ``.npz`` members are read through a memory map of the member's bytes (the
member is uncompressed, so a tile is a strided slice); a deflated member must be inflated whole.
docs/decisions.md D47 records the numbers and the choice.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
import zipfile

import numpy as np


def _member_memmap(path: str, name: str) -> np.ndarray:
    """A read-only memory map of an uncompressed ``.npy`` member of a zip (no copy, no inflate)."""
    from numpy.lib import format as npformat

    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError("member is compressed")
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        n_name, n_extra = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
        start = info.header_offset + 30 + n_name + n_extra
        fh.seek(start)
        version = npformat.read_magic(fh)
        read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        offset = fh.tell()
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="8,16,16")
    args = ap.parse_args(argv)
    from algo.capture import capture

    grid = tuple(int(v) for v in args.grid.split(","))
    tr = capture(steps=(49,), blocks=(0,), grid=grid, ops="qkv,qk,pv,o_proj,ffn1,ffn2")
    arrays = {}
    for i, op in enumerate(tr.ops):
        if op.scores is None:
            arrays[f"op{i:05d}_X"] = op.X
        arrays[f"op{i:05d}_W"] = op.W
        if op.attn_out is not None:
            arrays[f"op{i:05d}_O"], arrays[f"op{i:05d}_L"] = op.attn_out, op.lse
    big = f"op{[o.name for o in tr.ops].index('ffn2'):05d}_X"
    x = arrays[big][0]
    rng = np.random.default_rng(0)
    tiles = [(int(rng.integers(0, x.shape[0] - 64)), int(rng.integers(0, x.shape[1] - 64))) for _ in range(64)]
    raw = sum(a.nbytes for a in arrays.values())
    print(f"grid {grid}: {len(arrays)} arrays, {raw / 1e6:.2f} MB raw; tiles of {big} {list(x.shape)}")
    with tempfile.TemporaryDirectory() as d:
        for label, comp in (("npz stored", zipfile.ZIP_STORED), ("npz deflate", zipfile.ZIP_DEFLATED)):
            path = os.path.join(d, label.replace(" ", "_") + ".npz")
            t0 = time.perf_counter()
            with zipfile.ZipFile(path, "w", compression=comp) as zf:
                for k, a in arrays.items():
                    buf = io.BytesIO()
                    np.save(buf, a)
                    zf.writestr(k + ".npy", buf.getvalue())
            t_w = time.perf_counter() - t0
            t0 = time.perf_counter()
            for r, c in tiles:
                if comp == zipfile.ZIP_STORED:
                    t = np.array(_member_memmap(path, big + ".npy")[0, r:r + 64, c:c + 64])
                else:
                    with np.load(path) as z:
                        t = z[big][0, r:r + 64, c:c + 64]
                assert np.array_equal(t, x[r:r + 64, c:c + 64])
            t_r = (time.perf_counter() - t0) / len(tiles)
            print(f"{label:12s} {os.path.getsize(path) / 1e6:8.2f} MB  write {t_w:6.3f} s  tile read {t_r * 1e3:8.3f} ms")
        try:
            import h5py
        except ImportError:
            print("hdf5 gzip    (h5py not installed)")
            return
        path = os.path.join(d, "t.h5")
        t0 = time.perf_counter()
        with h5py.File(path, "w") as f:
            for k, a in arrays.items():
                chunks = tuple(min(s, c) for s, c in zip(a.shape, (1, 64, 64), strict=False)) if a.ndim == 3 else True
                f.create_dataset(k, data=a, chunks=chunks, compression="gzip", compression_opts=4)
        t_w = time.perf_counter() - t0
        t0 = time.perf_counter()
        for r, c in tiles:
            with h5py.File(path, "r") as f:
                t = f[big][0, r:r + 64, c:c + 64]
            assert np.array_equal(t, x[r:r + 64, c:c + 64])
        t_r = (time.perf_counter() - t0) / len(tiles)
        print(f"{'hdf5 gzip':12s} {os.path.getsize(path) / 1e6:8.2f} MB  write {t_w:6.3f} s  tile read {t_r * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
