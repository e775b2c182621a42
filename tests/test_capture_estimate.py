"""Capture estimates (`algo.capture.estimate`): file size and peak memory from the shape plan, checked
against a real capture; a capture that does not fit stops before any work with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from algo.capture.estimate import CaptureEstimate, human

MEASURE = r"""
import json, os, resource, sys
from pathlib import Path
from algo.capture import capture, capture_to_file

def hwm():  # peak resident set since the last reset, bytes
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

# warm-up in this process: every import and every compiled kernel the capture uses is loaded (and
# compiled, on a cold numba cache) before anything is measured; compiling is transient memory that a
# user's runs, which load cached kernels, never see
capture_to_file(os.path.join(sys.argv[1], "warm.npz"), steps=(49,), blocks=(0,))
out = {}
for name, grid in (("tiny", None), ("small", (5, 6, 7))):
    est = capture(steps=(49,), blocks=(0,), grid=grid, dry_run=True)
    # reset the peak to the resident set now (Linux >= 4.0: "5" to clear_refs resets VmHWM)
    Path("/proc/self/clear_refs").write_text("5")
    path = os.path.join(sys.argv[1], name + ".npz")
    capture_to_file(path, steps=(49,), blocks=(0,), grid=grid)
    out[name] = dict(est_file=est.file_bytes, file=os.path.getsize(path), est_peak=est.peak_bytes,
                     peak=hwm())
print(json.dumps(out))
"""


def _run(args, env=None, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_estimate_within_ten_percent(tmp_path):
    res = _run(["-c", MEASURE, str(tmp_path)])
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for name, g in got.items():
        assert abs(g["est_file"] - g["file"]) <= 0.10 * g["file"], (name, g)
        # the peak resident set of each capture, measured from a reset taken after the estimate in a
        # process whose imports and kernels are loaded (no compiling inside the measurement)
        assert abs(g["est_peak"] - g["peak"]) <= 0.10 * g["peak"], (name, g)


def test_forced_small_limit_exits_2_with_nothing_written(tmp_path):
    out = tmp_path / "t.npz"
    res = _run(["-m", "sim.cli", "capture", "--out", str(out), "--steps", "49", "--blocks", "0"],
               env={"KALEIDO_DISK_LIMIT": "1000", "KALEIDO_MEM_LIMIT": "1000000"})
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: capture would not fit"), res.stderr
    assert "> free disk 1 kB" in lines[0] and "> available 1 MB" in lines[0]
    for opt in ("--decisions-only", "--ops", "--blocks"):
        assert opt in lines[0]
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file


def test_dry_run_prints_estimate_and_writes_nothing(tmp_path):
    out = tmp_path / "t.npz"
    res = _run(["-m", "sim.cli", "capture", "--out", str(out), "--size", "full", "--resolution", "480p",
                "--blocks", "0", "--steps", "1", "--dry-run"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("estimate: file ") and "peak memory" in res.stdout
    assert list(tmp_path.iterdir()) == []
    # 480p, one block, self ops, exact: X and W of qkv, qk, o_proj, ffn1, ffn2 + V + attention
    # states, counted by hand from Wan2.1-1.3B's config (d 1536, 12 heads of 128, d_ffn 8960):
    m, d, ff = 32760, 1536, 8960
    arrays = (m * d + d * 3 * d) + 2 * m * d + m * d + (m * d + d * d) + (m * d + d * ff) + (m * ff + ff * d) \
        + m * d * 4 + 12 * m * 4
    assert f"file {human(arrays)}," in res.stdout  # zip and metadata overhead: a few kB


def test_summary_names_the_parts():
    est = CaptureEstimate(file_bytes=2_500_000, peak_bytes=3_000_000_000,
                          parts=dict(baseline=600_000_000, kernels=0, weights=300_000_000, weights_int8=0,
                                     block=2_100_000_000, arrays=0))
    assert est.summary() == ("file 2.5 MB, peak memory 3 GB (process now 600 MB, weights 300 MB, "
                             "one recorded block 2.1 GB)")
