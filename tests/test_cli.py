"""The `kaleido` command line end to end: errors exit 2 with one line and no output; the thin path works."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from algo.reuse.golden import block_groups
from algo.trace import Group, OpRecord, Trace, save_trace


def kaleido(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def small_trace(path: Path, seed: int = 0) -> Path:
    """A 2-op trace: grid 2x2x4 (16 tokens), qkv-like op K=16 N=12 and a per-head qk-like op."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-60, 60, size=(1, 8, 16))
    X = np.concatenate([base, base + rng.integers(-2, 3, size=(1, 8, 16))], axis=1).astype(np.int8)  # noqa: N806
    W = rng.integers(-128, 128, size=(1, 16, 12)).astype(np.int8)  # noqa: N806
    q = rng.integers(-128, 128, size=(2, 16, 8)).astype(np.int8)
    k = rng.integers(-128, 128, size=(2, 8, 16)).astype(np.int8)
    ops = [
        OpRecord("qkv", 0, 0, X, W, [Group(*g, "block") for g in block_groups(16)], (2.0, 6.0)),
        OpRecord("qk", 0, 0, q, k, [Group(0, 4, "w", "t"), Group(4, 8, "f", "h")], (2.0, 6.0)),
    ]
    save_trace(Trace(grid=(2, 2, 4), ops=ops, model="synthetic", size="test", weights="random"), path)
    return path


def assert_one_line_error(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_help_lists_subcommands():
    res = kaleido("--help")
    assert res.returncode == 0
    for sub in ("capture", "simulate", "report", "inspect", "rtl"):
        assert sub in res.stdout


def test_missing_trace(tmp_path):
    out = tmp_path / "out.json"
    res = kaleido("simulate", str(tmp_path / "nope.npz"), "--config", "tiny-8x8", "--json", str(out))
    assert_one_line_error(res, "not found")
    assert not out.exists()


#: Libraries a bad-input error must not wait for (each takes seconds to import on 2 cores).
HEAVY_MODULES = ("torch", "diffusers", "numba", "matplotlib", "amaranth")


def _run_recording_heavy(cwd, *args):
    """Run ``kaleido ARGS`` in a fresh interpreter; its last stdout line is ``<exit code> <sorted list of the
    HEAVY_MODULES it imported>``."""
    code = ("import sys\nfrom sim.cli import main\nsys.argv = ['kaleido', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    rc = e.code\n"
            f"print(rc, sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("args", [("simulate", "missing.npz"), ("baselines", "missing.npz"),
                                  ("inspect", "missing.npz"), ("report", "missing.json")])
def test_error_path_imports_no_heavy_library(tmp_path, args):
    """A missing input answers before torch, diffusers, numba, matplotlib or amaranth are imported
    (``kaleido simulate missing.npz`` took 4.7 s when it imported torch to catch the error)."""
    res = _run_recording_heavy(tmp_path, *args)
    assert res.stdout.split("\n")[-2] == "2 []", (res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and "not found" in res.stderr, res.stderr


@pytest.mark.parametrize("args", [("synth", "--out", "s.npz"), ("capture", "--out", "s.npz"), ("quality",),
                                  ("quality-sweep", "--out", "s")])
def test_unknown_model_answers_before_torch(tmp_path, args):
    """``kaleido synth --model nosuch`` (and capture, quality, quality-sweep) names the bad model before torch
    loads (synth took 7 s at load 6 on 2 cores, 20 s in an earlier note, when the registry imported torch
    first): the family plugins list the names without torch (algo.lazy, algo.models.families.unknown_model)."""
    res = _run_recording_heavy(tmp_path, *args, "--model", "nosuch")
    assert res.stdout.split("\n")[-2] == "2 []", (res.stdout, res.stderr)
    assert res.stderr.startswith("error: unknown model 'nosuch'") and "wan2.1-t2v-1.3b" in res.stderr, res.stderr
    assert not list(tmp_path.iterdir())


def test_corrupt_and_truncated_trace(tmp_path):
    good = small_trace(tmp_path / "good.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip file at all")
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for bad in (junk, trunc):
        out = tmp_path / f"{bad.stem}.json"
        res = kaleido("simulate", str(bad), "--config", "tiny-8x8", "--json", str(out))
        assert_one_line_error(res, str(bad))
        assert not out.exists()
        assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob(f".{out.name}*"))


def test_wrong_version_trace(tmp_path):
    good = small_trace(tmp_path / "good.npz")
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    meta["version"] = 999
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "v999.npz"
    np.savez(bad, **arrays)
    res = kaleido("simulate", str(bad), "--config", "tiny-8x8")
    assert_one_line_error(res, "version 999")


def test_nan_scale_rejected(tmp_path):
    good = small_trace(tmp_path / "good.npz")
    with zipfile.ZipFile(good) as z:
        meta = json.loads(bytes(np.load(z.open("meta.npy"))).decode())
    meta["ops"][0]["x_scale"] = float("nan")
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "nan.npz"
    np.savez(bad, **arrays)
    assert_one_line_error(kaleido("inspect", str(bad)), "x_scale")


def test_unknown_model_leaves_no_file(tmp_path):
    out = tmp_path / "t.npz"
    res = kaleido("capture", "--model", "sora-9000", "--out", str(out))
    assert_one_line_error(res, "sora-9000", "wan2.1-t2v-1.3b")
    assert not out.exists()


def test_unknown_preset(tmp_path):
    res = kaleido("simulate", str(small_trace(tmp_path / "t.npz")), "--config", "huge-1x1")
    assert_one_line_error(res, "huge-1x1")


def test_bad_results_for_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"hello\": 1}")
    res = kaleido("report", str(bad), "--out", str(tmp_path / "rep"))
    assert_one_line_error(res, "not a Kaleido results file")
    assert not (tmp_path / "rep" / "summary.md").exists()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    d = tmp_path_factory.mktemp("sim")
    trace = small_trace(d / "t.npz")
    res = kaleido("simulate", str(trace), "--config", "tiny-8x8", "--json", str(d / "out.json"))
    assert res.returncode == 0, res.stderr
    return d, json.loads((d / "out.json").read_text())


def test_simulate_json_fields_and_dense_cycles(simulated):
    _, r = simulated
    for key in ("cycles", "dense_cycles", "pe_utilization", "reuse_fraction", "per_op"):
        assert key in r
    assert set(r["reuse_fraction"]) == {"compute", "partial", "reuse"}
    qkv, qk = r["per_op"]
    # Dense on tiny-8x8 (R = C = 8, d = 2), by hand from the timing contract (sim/timing/cycle_model.py):
    # qkv: M=16, K=16, N=12 -> ceil(16/8)*ceil(12/8) = 4 tiles of 16 slots, K*d >= R so no drain stall:
    #   last issue L = 4*16 - 1 = 63, cycles = L + R + C + 2 = 63 + 18 = 81.
    assert qkv["dense_cycles"] == 81
    # qk: 2 heads x (M=16, K=8, N=16) -> per head 2*2 = 4 tiles of 8 slots, 8 tiles in all,
    #   K*d = 16 >= 8: L = 8*8 - 1 = 63, cycles = 81.
    assert qk["dense_cycles"] == 81
    for op in r["per_op"]:
        for key in ("cycles", "dense_cycles", "pe_utilization", "reuse_fraction"):
            assert key in op
        assert 0 < op["pe_utilization"] <= 1
    assert r["cycles"] == sum(op["cycles"] for op in r["per_op"])


def test_report_writes_table_and_figure(simulated, tmp_path):
    d, _ = simulated
    res = kaleido("report", str(d / "out.json"), "--out", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "| qkv |" in md and "speedup" in md
    png = (tmp_path / "rep" / "cycles_per_op.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "rep" / "per_op.csv").read_text().startswith("results,name,block")
    assert (tmp_path / "rep" / "energy_utilization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "without the dispatcher" in md
    assert "## Baselines" not in md  # a `simulate` result has no baselines: no empty section


def test_simulate_is_deterministic(simulated, tmp_path):
    d, _ = simulated
    res = kaleido("simulate", str(d / "t.npz"), "--config", "tiny-8x8", "--json", str(tmp_path / "again.json"))
    assert res.returncode == 0
    assert (tmp_path / "again.json").read_bytes() == (d / "out.json").read_bytes()


# ---- fresh-user trial: output paths, misleading results, messages --------------------------------


def test_output_path_that_is_a_folder_or_file_fails_cleanly(tmp_path):
    from algo.fileio import OutputPathError, atomic_write_bytes
    from algo.trace import TraceWriter

    trace = small_trace(tmp_path / "t.npz")
    folder = tmp_path / "existing"
    folder.mkdir()
    afile = tmp_path / "afile.md"
    afile.write_text("keep me\n")
    for args in (("simulate", "--gemm", "8,8,8", "--json", str(folder)),
                 ("simulate", str(trace), "--config", "tiny-8x8", "--json", str(folder)),
                 ("simulate", str(trace), "--config", "tiny-8x8", "--json", str(afile / "x.json"))):
        assert_one_line_error(kaleido(*args), str(folder) if "x.json" not in args[-1] else str(afile))
    res = kaleido("report", str(tmp_path / "r.json"), "--out", str(afile))  # checked before the inputs
    assert_one_line_error(res, str(afile), "existing file")
    assert afile.read_text() == "keep me\n" and list(folder.iterdir()) == []
    with pytest.raises(OutputPathError, match="existing folder"):
        atomic_write_bytes(folder, b"x")
    with pytest.raises(OutputPathError, match="existing folder"):
        TraceWriter(folder, (1, 1, 1))
    assert list(folder.iterdir()) == [] and not list(tmp_path.glob(".existing*"))


def test_capture_shape_only_to_a_folder_and_theta_steps_outside_the_schedule(tmp_path):
    from algo.reuse.thresholds import parse_theta

    with pytest.raises(ValueError, match=r"step\(s\) 99-100 outside the schedule of 50 denoising steps \(0..49\)"):
        parse_theta("4,12; qk@99-100=8,24", num_steps=50)
    with pytest.raises(ValueError, match=r"step\(s\) 50-60 outside"):
        parse_theta("qk@45-60=8,24", num_steps=50)
    assert parse_theta("qk@45-49=8,24", num_steps=50).rules[0].last == 49  # inside: accepted
    res = kaleido("capture", "--shape-only", "--theta", "4,12; qk@99-100=8,24", "--out", str(tmp_path / "s.npz"))
    assert_one_line_error(res, "99-100", "50 denoising steps")
    res = kaleido("capture", "--shape-only", "--out", str(tmp_path))
    assert_one_line_error(res, "existing folder")


def test_renamed_file_is_not_a_trace_without_pickle_talk(tmp_path):
    from algo.trace import TraceError, load_trace

    fake = tmp_path / "notes.npz"
    fake.write_bytes(b"# some markdown, renamed\n" * 10)
    with pytest.raises(TraceError, match=r"not a Kaleido trace \(not a valid \.npz archive") as err:
        load_trace(fake)
    assert "pickle" not in str(err.value)


def test_shape_trace_reports_what_it_is_before_size_limits(tmp_path):
    from algo.trace import TraceWriter

    path = tmp_path / "shape.npz"
    grid = (1, 64, 128)  # 8,192 tokens > tiny-8x8's max_tokens (4,096): the shape must be named first
    with TraceWriter(path, grid, kind="shapes", model="synthetic", size="full", weights="none") as w:
        w.add(OpRecord("qkv", 0, 0, None, None, [Group(*g, "block") for g in block_groups(64)], (4.0, 12.0),
                       dims=(1, 8192, 64, 192)))
    res = kaleido("simulate", str(path), "--config", "tiny-8x8")
    assert_one_line_error(res, "is a shape trace", "kaleido capture", "--gemm")
    assert "max_tokens" not in res.stderr


def test_simulate_summary_lines_and_theta_index_on_exact_trace(tmp_path):
    trace = small_trace(tmp_path / "t.npz")
    res = kaleido("simulate", str(trace), "--config", "tiny-8x8", "--theta-index", "3")
    assert_one_line_error(res, "--theta-index applies to decision traces only", "exact trace")
    out = tmp_path / "r.json"
    # default 128x128 preset: grid 2x2x4 has H*W = 8 positions per frame < 128 rows (docs/decisions.md D5)
    res = kaleido("simulate", str(trace), "--tech", "45nm", "--checksum", "--no-dispatcher", "--json", str(out))
    assert res.returncode == 0, res.stderr
    data = json.loads(out.read_text())
    text = res.stdout
    assert "energy (45nm table)" in text and f"{data['energy_pj'] / 1e6:,.2f} uJ" in text
    assert f"outputs sha256 {data['outputs_sha256'][:16]}" in text
    assert "dispatcher off (raster order):" in text and "clusters" not in text
    slower = data["cycles"] > data["dense_cycles"]
    assert ("note: Kaleido is slower than dense" in text) == slower
    assert ("note: Kaleido spends more energy" in text) == (data["energy_pj"] > data["dense_energy_pj"])
    assert "…" not in text  # piped: no cell or line cut at 80 columns
    # piped: plain lines are never wrapped, however long (the stall line is over 160 columns)
    (stalls,) = [ln for ln in text.splitlines() if "stalls: drain" in ln]
    st = data["stall_cycles"]
    assert stalls.startswith("with DRAM") and stalls.endswith(f"similarity {st['similarity']:,}"), stalls


def test_help_flags_show_no_value_and_piped_tables_are_not_cut(tmp_path):
    res = kaleido("simulate", "--help")
    for flag in ("--no-dispatcher", "--checksum", "--help "):
        line = next(ln for ln in res.stdout.splitlines() if flag in ln)
        assert "<bool>" not in line, line
    for cmd in (("workload",), ("workload", "ditango")):
        line = next(ln for ln in kaleido(*cmd, "--help").stdout.splitlines() if "--help " in ln)
        assert "<bool>" not in line, (cmd, line)
    res = kaleido("inspect", str(small_trace(tmp_path / "t.npz")))
    assert res.returncode == 0 and "…" not in res.stdout, res.stdout
    assert "size test" in res.stdout


def test_rtl_out_that_is_a_file_is_a_clean_error(tmp_path):
    f = tmp_path / "t.npz"
    f.write_bytes(b"x")
    for out in (f, f / "sub"):
        res = kaleido("rtl", "tiny-8x8", "--out", str(out))
        assert_one_line_error(res, str(f), "is a file, not a folder")
    assert f.read_bytes() == b"x"


def test_version_and_report_of_rtl_results(tmp_path):
    from importlib.metadata import version

    res = kaleido("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"kaleido {version('kaleido')}"
    rtl = tmp_path / "rtl.json"
    from sim.results import RESULTS_FORMAT, RESULTS_VERSION

    rtl.write_text(json.dumps({"format": RESULTS_FORMAT, "version": RESULTS_VERSION, "engine": "rtl", "cycles": 5}))
    assert_one_line_error(kaleido("report", str(rtl), "--out", str(tmp_path / "r")), "--engine rtl")
    assert not (tmp_path / "r").exists()


def test_piped_console_never_wraps_plain_lines(monkeypatch):
    """A result line far wider than `PIPE_WIDTH` stays one line when stdout is not a terminal."""
    import io

    from sim.cli.common import PIPE_WIDTH, stdout_console

    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    line = "stalls: " + ", ".join(f"unit{i} {i * 1000:,}" for i in range(60))
    assert len(line) > 2 * PIPE_WIDTH
    stdout_console().print(line)
    assert buf.getvalue() == line + "\n"


def test_presets_name_organisation_and_attention():
    res = kaleido("presets")
    assert res.returncode == 0, res.stderr
    rows = {ln.split("│")[1].strip(): ln for ln in res.stdout.splitlines() if ln.count("│") > 2}
    assert "delta" in rows["kaleido-16nm-128x128-balanced"] and "fused" in rows["kaleido-16nm-128x128-balanced"]
    assert "lockstep" in rows["kaleido-16nm-128x128"] and "unfused" in rows["kaleido-16nm-128x128"]


def _command_paths(group, prefix=()):
    """Every command path of the click tree under ``group`` (sub-apps like ``workload`` and their commands)."""
    import click

    for name, cmd in sorted(group.commands.items()):
        yield (*prefix, name)
        if isinstance(cmd, click.Group):
            yield from _command_paths(cmd, (*prefix, name))


def test_every_help_fits_80_columns_without_cutting_a_word():
    """At 80 columns rich cuts a cell that has no space to wrap at with "…": a path or a comma list in an option's
    help, or an option name squeezed by a wide column. No command's ``--help`` may cut anything."""
    import typer
    from typer.testing import CliRunner

    from sim.cli import app

    runner = CliRunner()
    root = typer.main.get_command(app)
    paths = list(_command_paths(root))
    assert len(paths) >= 15 and ("capture",) in paths
    for path in [(), *paths]:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "xterm"}, terminal_width=80)
        assert res.exit_code == 0, (path, res.output)
        assert "Usage" in res.output and "…" not in res.output, (path, [ln for ln in res.output.splitlines()
                                                                           if "…" in ln])
