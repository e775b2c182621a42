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


class OutputPathError(ValueError):
    """An output path that cannot be written: a folder where a file is due, or a file where a folder is due."""


def _check_parents(path: Path) -> None:
    for parent in path.parents:  # the nearest existing ancestor must be a folder
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise OutputPathError(f"cannot write {path}: {parent} is a file, not a folder")
            return


def check_output_file(path: str | Path) -> Path:
    """Check that ``path`` can be written as a file (not an existing folder, no file among its parents).

    Call it before long work so a bad ``--out``/``--json`` fails at once. Returns the path.

    Raises:
        OutputPathError: ``path`` is an existing folder or one of its parents is a file.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{path} is an existing folder; give a file path, not a folder")
    _check_parents(path)
    return path


def check_output_dir(path: str | Path) -> Path:
    """Check that ``path`` can be used as an output folder (absent or a folder). Returns the path.

    Raises:
        OutputPathError: ``path`` exists and is not a folder, or one of its parents is a file.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{path} is an existing file; the output needs a folder (give a new or existing "
                              "folder name)")
    _check_parents(path)
    return path


def new_file_mode() -> int:
    """The mode an ordinary new file gets here: ``0o666`` less the process umask (``tempfile.mkstemp``
    makes 0600 files; the atomic writers give their outputs this mode instead)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` atomically (mode `new_file_mode`); creates the parent folder. Returns the path.

    Raises:
        OutputPathError: ``path`` is an existing folder or a parent is a file (`check_output_file`).
    """
    path = check_output_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, obj) -> Path:
    """`atomic_write_bytes` of ``obj`` as indented JSON with a trailing newline."""
    return atomic_write_bytes(path, (json.dumps(obj, indent=2) + "\n").encode())
