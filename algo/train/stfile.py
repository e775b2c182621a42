"""Byte-deterministic safetensors files.

The ``safetensors`` writer (0.x) keeps the header's ``__metadata__`` in a hash map, so two runs
write the same tensors with the metadata keys in different orders (measured: two fits of the patch
PCA differed at byte 29). `safetensors_bytes` writes the same format itself (safetensors
specification: 8-byte little-endian header length, a JSON header ``{name: {"dtype", "shape",
"data_offsets"}, "__metadata__": {str: str}}`` padded with spaces to a multiple of 8 bytes, then the
little-endian tensor bytes in offset order) with sorted keys, so equal inputs give equal bytes.
Readers (``safetensors.safe_open``, ``load_file``) read it as any other safetensors file.
"""

from __future__ import annotations

import json
import struct

import numpy as np

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.float16): "F16",
           np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8"}


def safetensors_bytes(tensors: dict, metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors file of `tensors` (name -> numpy array or CPU torch tensor), names in sorted order.

    Raises:
        ValueError: an unsupported dtype or a metadata value that is not a string.
    """
    header: dict = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(sorted(metadata.items()))
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        a = np.ascontiguousarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t)
        if a.dtype not in _DTYPES:
            raise ValueError(f"tensor {name}: unsupported dtype {a.dtype}")
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)
