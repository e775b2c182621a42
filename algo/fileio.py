"""Atomic output files: write to a temporary file in the target folder, then rename over the target.

A crash, a full disk or an exception never leaves a half-written output behind (the temporary file
is removed); readers see either the old file or the complete new one. Used by every writer in
`algo` and `sim` (`hw.rtl` keeps its own copy: `hw` does not depend on `algo`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` atomically (mode 0644); creates the parent folder. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, obj) -> Path:
    """`atomic_write_bytes` of ``obj`` as indented JSON with a trailing newline."""
    return atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())
