"""`kaleido report` (sim.report): every number in the tables equals the results file it came from,
and every figure is a readable image of the expected pixel size.

Two results files of the same (synthetic) model at two grids: the hand-built trace of
tests/test_baselines.py (grid 3x2x4) with all baselines, and tests/test_cli.py's small trace
(grid 2x2x4), so the scaling figure is drawn too. Quality values are written into the JSON by hand
(the report must copy them, not compute them).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import matplotlib.image as mpimg
import pytest
from PIL import Image

from algo.quality import to_jsonable
from algo.trace import load_trace
from hw.config import load_config
from sim.baselines import attach_baselines, run_baselines
from sim.cost.area import area_breakdown
from sim.cost.tech import load_tech
from sim.engines.model import simulate_trace
from sim.report import write_report
from sim.report.tables import heatmap_matrix
from tests.test_baselines import hand_trace
from tests.test_cli import small_trace

QUALITY = {"kaleido": 40.25, "adaptiv": 50.5, "exion": 45.0, "cambricon_d": math.inf, "dense": math.inf,
           "a100": math.inf}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    cfg = load_config("tiny-8x8")
    paths = []
    for name, tr in (("hand", hand_trace()), ("small", load_trace(small_trace(tmp / "small.npz")))):
        res = simulate_trace(tr, cfg, trace_path=f"{name}.npz")
        attach_baselines(res, run_baselines(tr, cfg, res))
        res["quality"] = {"latent_psnr_db": QUALITY["kaleido"], "latent_ssim": 0.99}
        for b, e in res["baselines"].items():
            if "skipped" not in e:
                e["quality"] = {"latent_psnr_db": QUALITY[b], "latent_ssim": 1.0}
        p = tmp / f"{name}.json"
        p.write_text(json.dumps(to_jsonable(res)))
        paths.append(p)
    out = tmp / "out"
    written = write_report(paths, out)
    return {p.stem: json.loads(p.read_text()) for p in paths}, out, written


def _csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _f(v: str) -> float:
    return float(v)  # "inf" parses too


def test_baselines_csv_equals_json(report):
    data, out, _ = report
    rows = _csv(out / "baselines.csv")
    seen = 0
    for r in rows:
        d = data[r["results"]]
        if r["baseline"] == "kaleido":
            assert int(r["cycles"]) == d["cycles"]
            assert _f(r["energy_pj"]) == pytest.approx(d["energy_pj"], rel=1e-6)
            assert _f(r["latent_psnr_db"]) == QUALITY["kaleido"]
            continue
        e = d["baselines"][r["baseline"]]
        if "skipped" in e:
            assert r["notes"] == "skipped: " + e["skipped"] and r["cycles"] == ""
            continue
        seen += 1
        for key in ("cycles", "time_us", "energy_pj", "kaleido_speedup", "kaleido_energy_saving"):
            assert _f(r[key]) == pytest.approx(e[key], rel=1e-5, abs=1e-5), (r["baseline"], key)
        assert _f(r["latent_psnr_db"]) == QUALITY[r["baseline"]]
    # hand trace: 5 baselines; small trace (no second step, but exact): 5 as well
    assert seen == 10


def test_summary_markdown_equals_json(report):
    data, out, _ = report
    md = (out / "summary.md").read_text()
    assert [ln for ln in md.splitlines() if ln.startswith("# ")] == ["# Kaleido simulation report"]  # one title
    section = md.split("\n## Baselines\n", 1)[1]
    for label, d in data.items():
        part = section.split(f"## {label}:", 1)[1].split("\n## ", 1)[0]
        for name, e in d["baselines"].items():
            line = next(ln for ln in part.splitlines() if ln.startswith(f"| {name} |"))
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert int(cells[1].replace(",", "")) == round(e["cycles"])
            # the table rounds to 6 decimals (sim.report.tables), then prints 3: half a unit of the 3rd + 1e-6
            assert float(cells[4].rstrip("x")) == pytest.approx(e["kaleido_speedup"], abs=5e-4 + 1e-6)
            assert float(cells[5].rstrip("x")) == pytest.approx(e["kaleido_energy_saving"], abs=5e-4 + 1e-6)
            assert float(cells[3].replace(",", "")) == pytest.approx(e["energy_pj"] / 1e6, abs=5e-4)
            # an infinite PSNR (an exact design, QUALITY) reads "exact" with its footnote, never "inf"
            assert cells[7] == ("exact¹" if math.isinf(QUALITY[name]) else f"{QUALITY[name]:.2f}"), line
        assert ("¹ exact: the design computes without approximation" in part) == any(
            math.isinf(QUALITY[n]) for n in d["baselines"])


def test_summary_headline_names_organisation_and_end_to_end(report):
    data, out, _ = report
    md = (out / "summary.md").read_text()
    for label, d in data.items():
        part = md.split(f"## {label}\n", 1)[1].split("\n## ", 1)[0]
        # the organisation of the config (tiny-8x8: lockstep) beside the array size in the caption
        assert f"(8x8 {d['config']['organisation']}, " in part
        rows = {c[0]: c[1:] for c in ([x.strip() for x in ln.strip("|").split("|")] for ln in part.splitlines()
                                      if ln.startswith("| "))}
        assert rows["speedup, array"][1] == f"{d['dense_cycles'] / d['cycles']:.2f}x"
        end = rows["speedup end to end"][1]
        assert end == f"{d['dense_total_cycles'] / d['total_cycles']:.2f}x"
        cyc = rows["cycles end to end (array, vector and similarity units, DRAM)"]
        assert [int(c.replace(",", "")) for c in cyc] == [d["dense_total_cycles"], d["total_cycles"]]


def test_per_op_and_breakdown_csv_equal_json(report):
    data, out, _ = report
    for r in _csv(out / "per_op.csv"):
        op = next(o for o in data[r["results"]]["per_op"]
                  if o["name"] == r["name"] and o["block"] == int(r["block"]) and o["step"] == int(r["step"]))
        assert int(r["cycles"]) == op["cycles"] and int(r["dense_cycles"]) == op["dense_cycles"]
    sums: dict = {}
    for r in _csv(out / "energy_breakdown.csv"):
        sums[(r["results"], r["design"])] = sums.get((r["results"], r["design"]), 0.0) + float(r["energy_pj"])
    for (label, design), total in sums.items():
        d = data[label]
        want = d["energy_pj"] if design == "kaleido" else d["baselines"][design]["energy_pj"]
        assert total == pytest.approx(want, rel=1e-6)
    for r in _csv(out / "baselines_per_op.csv"):
        e = data[r["results"]]["baselines"][r["baseline"]]
        op = next(o for o in e["per_op"] if o["name"] == r["name"] and o["step"] == int(r["step"]))
        assert float(r["cycles"]) == pytest.approx(op["cycles"], abs=1e-3)


def test_area_csv_equals_area_model(report):
    _, out, _ = report
    a = area_breakdown(load_config("tiny-8x8"), load_tech("16nm"))
    rows = {r["component"]: float(r["mm2"]) for r in _csv(out / "area.csv")}
    assert rows["total"] == pytest.approx(a["total_mm2"], abs=1e-6)
    assert rows["dense_total"] == pytest.approx(a["dense_total_mm2"], abs=1e-6)
    for k, v in a["breakdown"].items():
        assert rows[k] == pytest.approx(v, abs=1e-6)


def test_heatmap_is_mac_weighted_saving(report):
    data, _, _ = report
    d = data["hand"]
    blocks, steps, m = heatmap_matrix(d)
    assert blocks == [0] and steps == [0, 1]
    ops = [o for o in d["per_op"] if o["step"] == 0]  # ffn1 and pv, weighted by their MACs
    want = sum((o["reuse_fraction"]["reuse"] + o["reuse_fraction"]["partial"] / 2) * o["M"] * o["K"] * o["N"]
               * o["batch"] for o in ops) / sum(o["M"] * o["K"] * o["N"] * o["batch"] for o in ops)
    assert m[0][0] == pytest.approx(want)


# Expected PNG sizes: figure inches x 150 dpi, two results panels where a figure has one per results file.
EXPECTED_PX = {"baselines": (11 * 150, 2 * 4.6 * 150), "energy_breakdown": (12 * 150, 2 * 4.8 * 150),
               "area_breakdown": (10 * 150, 4.8 * 150), "reuse_heatmap": (9 * 150, 2 * 4.2 * 150),
               "quality_speedup": (9 * 150, 6 * 150), "scaling": (11 * 150, 4.8 * 150)}


def test_figures_are_readable_images_of_expected_size(report):
    _, out, written = report
    names = {p.name for p in written}
    for stem, (w, h) in EXPECTED_PX.items():
        assert f"{stem}.png" in names and f"{stem}.pdf" in names, stem
        with Image.open(out / f"{stem}.png") as im:
            im.verify()
        with Image.open(out / f"{stem}.png") as im:
            assert im.size == (round(w), round(h)), stem
        arr = mpimg.imread(out / f"{stem}.png")
        assert arr.shape[:2] == (round(h), round(w)) and arr.std() > 0.01, stem  # not blank
        assert (out / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
    for stem in ("cycles_per_op", "energy_utilization"):
        with Image.open(out / f"{stem}.png") as im:
            im.verify()


# ---- fresh-user trial: output folder, stale files, --gemm results, figure details ----------------


def test_report_out_folder_checks_and_stale_files(report, tmp_path):
    from algo.fileio import OutputPathError

    data, _, _ = report
    plain = {k: v for k, v in data["small"].items() if k not in ("baselines", "quality")}  # a simulate result
    src = tmp_path / "plain.json"
    src.write_text(json.dumps(plain))
    afile = tmp_path / "README.md"
    afile.write_text("keep\n")
    with pytest.raises(OutputPathError, match="existing file"):
        write_report([src], afile)
    assert afile.read_text() == "keep\n"
    out = tmp_path / "out"
    out.mkdir()
    for name in ("baselines.png", "quality_speedup.pdf", "baselines.csv"):  # an earlier run with baselines
        (out / name).write_bytes(b"old")
    (out / "my_notes.txt").write_text("mine\n")
    removed: list[Path] = []
    written = write_report([src], out, removed=removed)
    assert sorted(p.name for p in removed) == ["baselines.csv", "baselines.png", "quality_speedup.pdf"]
    assert not any((out / n).exists() for n in ("baselines.png", "quality_speedup.pdf", "baselines.csv"))
    assert (out / "my_notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == sorted([p.name for p in written] + ["my_notes.txt"])


def test_gemm_result_is_named_and_energy_wording(tmp_path):
    from sim.report import ReportError
    from sim.report.tables import energy_vs_dense
    from sim.timing.dataflow import gemm_result

    g = tmp_path / "gemm.json"
    g.write_text(json.dumps(gemm_result(8, 8, 8, load_config("tiny-8x8"))))
    with pytest.raises(ReportError, match=r"simulate --gemm` result .* reads trace results"):
        write_report([g], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert energy_vs_dense({"energy_pj": 152.0, "dense_energy_pj": 100.0}) == "energy vs dense: 1.52x (more)"
    assert energy_vs_dense({"energy_pj": 66.0, "dense_energy_pj": 100.0}) == "energy vs dense: 0.66x (saving 34.0%)"


def test_quality_figure_pareto_line_needs_two_points_and_a100_bar_not_drawn(report):
    from sim.report.figures import _energy_breakdown_figure, _quality_figure
    from sim.report.tables import quality_points

    data, _, _ = report
    items = [("hand", data["hand"])]
    pts = quality_points(data["hand"])
    fig = _quality_figure(items)
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    # a100 is the fastest design and at infinite PSNR (QUALITY): it alone is the Pareto front
    fastest = max(pts, key=lambda p: p["speedup_vs_dense"])
    assert fastest["design"] == "a100" and math.isinf(fastest["psnr_db"])
    assert not any(lb.startswith("Pareto front") for lb in labels)
    assert len(fig.axes[0].collections) == len(pts)  # every design drawn (hollow, own marker)
    fig = _energy_breakdown_figure(items)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "a100" not in ticks and "kaleido" in ticks
    assert any("not drawn: a100" in t.get_text() for t in fig.axes[0].texts)


def test_speedup_clusters_split_at_wide_gaps():
    from sim.report.figures import speedup_clusters

    # hand-made: designs at 0.98-1.13x and the A100 roofline at 512x (ratio 453 > 4): two ranges
    assert speedup_clusters([1.0, 1.13, 0.98, 512.0]) == [(0.98, 1.13), (512.0, 512.0)]
    assert speedup_clusters([1.0, 3.9, 15.0]) == [(1.0, 15.0)]  # every neighbour within 4x: one
    assert speedup_clusters([1.0, 4.5]) == [(1.0, 1.0), (4.5, 4.5)]


def test_quality_figure_breaks_its_axis_when_the_a100_is_far_off(report):
    """With the A100 hundreds of times faster than the designs near 1x, the figure draws two panels
    (a broken x axis), each spanning only its own designs, so those near 1x stay apart."""
    from sim.report.figures import _quality_figure
    from sim.report.tables import quality_points

    data, _, _ = report
    d = json.loads(json.dumps(data["hand"]))
    d["baselines"]["a100"]["time_us"] = d["dense_cycles"] / d["config"]["clock_mhz"] / 500.0  # 500x dense
    xs = sorted(p["speedup_vs_dense"] for p in quality_points(d))
    assert xs[-1] == pytest.approx(500.0) and xs[-2] < 2.0
    fig = _quality_figure([("hand", d)])
    assert len(fig.axes) == 2
    lo, hi = fig.axes[0].get_xlim()
    assert lo <= xs[0] and xs[-2] <= hi < 500.0 and hi / lo < 10  # the left panel: the designs near 1x
    lo2, hi2 = fig.axes[1].get_xlim()
    assert lo2 < 500.0 < hi2 and lo2 > xs[-2]


def test_speedup_vs_reuse_figure_and_why_section(report, tmp_path):
    """Two results of one config, model and grid at two reuse levels draw speedup_vs_reuse; one level draws none.
    The second point is the small result with its reuse share and speedups replaced by hand (report plumbing)."""
    from sim.report.tables import reuse_points

    data, out, written = report
    assert "speedup_vs_reuse.png" not in {p.name for p in written}  # two grids: no group has two reuse levels
    assert "## Why, per op" in (out / "summary.md").read_text()
    small = data["small"]
    other = json.loads(json.dumps(small))
    other["reuse_fraction"] = {"compute": 0.1, "partial": 0.1, "reuse": 0.8}
    other["speedup"], other["total_speedup"] = 3.0, 2.5
    pts = reuse_points([("a", small), ("b", other)])
    useful = sum(o["useful_macs"] for o in small["per_op"])
    dense = sum(o["dense_macs"] for o in small["per_op"])
    assert [p["label"] for p in pts] == (["a", "b"] if small["reuse_fraction"]["reuse"] < 0.8 else ["b", "a"])
    assert pts[-1]["ideal"] == pytest.approx(dense / useful) and pts[-1]["end_to_end"] == 2.5
    assert reuse_points([("a", small), ("c", json.loads(json.dumps(small)))]) == []
    paths = []
    for name, d in (("a", small), ("b", other)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(d))
        paths.append(p)
    names = {p.name for p in write_report(paths, tmp_path / "out")}
    assert {"speedup_vs_reuse.png", "speedup_vs_reuse.pdf"} <= names
    with Image.open(tmp_path / "out" / "speedup_vs_reuse.png") as im:
        assert im.size == (1200, 750)  # 8 x 5 in at 150 dpi
    md = (tmp_path / "out" / "summary.md").read_text()
    assert md.count("| qkv |") >= 2 and "Kaleido − dense energy" in md


def test_organisations_figure_from_results(tmp_path):
    """Synthetic fields at two reuse levels, each simulated under both organisations of the balanced preset:
    `result_rows` gives one row per result (region read back from the trace, the measured REUSE share, the
    MAC ideal) and `kaleido report` draws ``organisations.png``; one organisation alone draws none."""
    from algo.workloads.synth import SynthField, synth_trace
    from hw.config import with_organisation
    from sim.report.organisations import result_rows

    base = load_config("kaleido-16nm-128x128-balanced")
    paths, items = [], []
    for r in (0.3, 0.8):
        tr = synth_trace(tmp_path / f"s{r}.npz", "wan2.1-t2v-1.3b", "64x64x5", SynthField(r, 0.04, (2, 2), 0.9),
                         blocks=[0], seed=1)
        tr = load_trace(tmp_path / f"s{r}.npz")
        for org in ("lockstep", "compact"):
            res = to_jsonable(simulate_trace(tr, with_organisation(base, org), trace_path=f"s{r}.npz"))
            p = tmp_path / f"{org}-{r}.json"
            p.write_text(json.dumps(res))
            paths.append(p)
            items.append((p.stem, res))
    rows = result_rows(items)
    assert len(rows) == 4 and {r["region"] for r in rows} == {"2x2"}
    for (_, d), row in zip(sorted(items, key=lambda it: (it[1]["organisation"], it[1]["reuse_fraction"]["reuse"])),
                           rows, strict=True):
        assert row["organisation"] == d["organisation"] and row["reuse"] == d["reuse_fraction"]["reuse"]
        assert row["ideal"] == pytest.approx(sum(o["dense_macs"] for o in d["per_op"])
                                             / sum(o["useful_macs"] for o in d["per_op"]))
        assert row["energy_vs_dense"] == pytest.approx(d["energy_pj"] / d["dense_energy_pj"])
    assert result_rows([it for it in items if it[1]["organisation"] == "compact"]) == []
    names = {p.name for p in write_report(paths, tmp_path / "out")}
    assert {"organisations.png", "organisations.pdf", "speedup_vs_reuse.png"} <= names
