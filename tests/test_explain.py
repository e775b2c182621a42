"""`kaleido explain` (sim/report/explain.py): the binding rule on hand-made op results, the chain, errors."""

from __future__ import annotations

import json

from sim.report.explain import binding, dense_slots, energy_rows, explain_rows
from tests.test_cli import assert_one_line_error, kaleido


def _op(**kw):
    op = {"name": "qkv", "block": 0, "step": 0, "batch": 1, "M": 256, "K": 64, "N": 256, "cycles": 1000,
          "dense_cycles": 2000, "total_cycles": 1000, "dense_total_cycles": 2000, "speedup": 2.0,
          "total_speedup": 2.0, "stall_cycles": {"drain": 0, "dram": 0, "vector": 0, "similarity": 0},
          "dense_stall_cycles": {"drain": 0, "dram": 0, "vector": 0, "similarity": 0},
          "useful_macs": 2.0e6, "dense_macs": 4.0e6, "slots": 500, "energy_pj": 3.0, "dense_energy_pj": 4.0,
          "energy_breakdown_pj": {"dram": 2.0, "array_macs": 1.0}, "dense_energy_breakdown_pj": {"dram": 1.0,
                                                                                                  "array_macs": 3.0}}
    op.update(kw)
    return op


def test_binding_rule():
    assert binding(_op(), dense=False) == "array"  # ideal 2.0 = array 2.0, no stalls
    assert binding(_op(speedup=1.5), dense=False) == "lockstep"  # ideal 2.0 > 1.1 x 1.5
    st = {"drain": 0, "dram": 40, "vector": 60, "similarity": 0}
    assert binding(_op(total_cycles=1100, stall_cycles=st), dense=False) == "vector"  # 100 >= 5 % of 1100
    st = {"drain": 0, "dram": 30, "vector": 0, "similarity": 0}
    assert binding(_op(total_cycles=1030, stall_cycles=st), dense=False) == "array"  # 30 < 5 % of 1030
    assert binding(_op(dense_stall_cycles={"drain": 200}), dense=True) == "drain"  # 200 >= 5 % of 2000


def test_chain_and_energy_rows():
    cfg = {"array_rows": 128, "array_cols": 128}
    (r,) = explain_rows({"config": cfg, "per_op": [_op()]})
    assert dense_slots(_op(), cfg) == 1 * 2 * 2 * 64
    assert (r["ideal"], r["slots"], r["array"]) == (2.0, 256 / 500, 2.0)
    assert r["energy_ratio"] == 0.75 and r["energy_top"] == [("array_macs", -2.0), ("dram", 1.0)]


def test_cli_explain(tmp_path):
    bad = tmp_path / "x.json"
    assert_one_line_error(kaleido("explain", str(bad)), "not found")
    bad.write_text("{")
    assert_one_line_error(kaleido("explain", str(bad)), "not a results JSON")
    npz = tmp_path / "t.npz"  # a trace given by mistake: binary, named like one
    npz.write_bytes(b"PK\x03\x04\xff\xfe")
    assert_one_line_error(kaleido("explain", str(npz)), "not a results JSON", "kaleido simulate TRACE --json")
    good = tmp_path / "r.json"
    good.write_text(json.dumps({"config": {"array_rows": 128, "array_cols": 128}, "per_op": [_op()],
                                "speedup": 2.0, "total_speedup": 2.0, "energy_saving": 1.33}))
    res = kaleido("explain", str(good))
    assert res.returncode == 0, res.stderr
    assert "ideal 2.00x -> array 2.00x -> end to end 2.00x" in res.stdout
    # energy as the per-op column says it (x dense, 1 / 1.33), the saving named as its inverse
    assert "energy 0.752x dense (energy saving = dense / Kaleido 1.330)" in res.stdout
    # with a whole-result energy breakdown: one table row per component and a total (uJ = 1e6 pJ)
    good.write_text(json.dumps({"config": {"array_rows": 128, "array_cols": 128}, "per_op": [_op()],
                                "speedup": 2.0, "total_speedup": 2.0, "energy_saving": 1.25,
                                "energy_pj": 4e9, "dense_energy_pj": 5e9,
                                "energy_breakdown_pj": {"array_macs": 1e9, "dram": 3e9},
                                "dense_energy_breakdown_pj": {"array_macs": 2e9, "dram": 3e9}}))
    res = kaleido("explain", str(good))
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows[-3:]] == ["array_macs", "dram", "total"]
    assert [c.strip() for c in rows[-1].split("│")[3:7]] == ["4,000", "5,000", "-1,000", "0.800"]
    assert "Kaleido - dense energy (uJ): the array -1,000, the units around it +0" in res.stdout


def test_energy_rows_sorted_by_saving_and_split_at_the_array():
    res = {"energy_breakdown_pj": {"array_macs": 1.0, "dram": 5.0, "sram_diff": 3.0, "vector_unit": 0.0},
           "dense_energy_breakdown_pj": {"array_macs": 4.0, "dram": 5.0, "sram_diff": 0.0, "vector_unit": 0.0}}
    # Kaleido - dense: array_macs -3, dram 0, sram_diff +3; vector_unit spends nothing in either design
    assert energy_rows(res) == [("array_macs", "array", 1.0, 4.0), ("dram", "around", 5.0, 5.0),
                                ("sram_diff", "array", 3.0, 0.0)]


def test_dram_over_grouped_by_op_name():
    """The summary's "DRAM bytes above dense's" line: one entry per op name, several ops as a count and a range."""
    from sim.report.explain import _dram_over_text

    over = [("ffn2", 0, 0, 5.96), ("ffn2", 1, 0, 5.96), ("qkv", 0, 0, 1.5), ("pv", 0, 0, 1.2), ("pv", 0, 1, 1.4)]
    assert _dram_over_text(over, "x") == "ffn2 (2 ops) 5.96x, qkv (block 0, step 0) 1.50x, pv (2 ops) 1.20-1.40x"


def test_loses_on_names_the_link_furthest_below_one():
    """Hand-made ops, each link's ratio by hand (`_op`: ideal 2.0, dense slots 256 on 128 x 128)."""
    from sim.report.explain import loses_on

    cfg = {"array_rows": 128, "array_cols": 128}

    def row(op, org="lockstep"):
        (r,) = explain_rows({"config": cfg, "per_op": [op], "organisation": org})
        assert r["loses_on"] == loses_on(r, op, org)
        return r["loses_on"]

    # slots 128 = ideal 2.0: no tiling loss; array 2.0 = slots; end to end = array: nothing lost
    assert row(_op(slots=128)) == ("-", 1.0)
    # slots 256 (1.0 of dense's) against ideal 2.0: the lockstep link at 0.5, the others at 1 / 1.0 / 2.0 = 2.0
    assert row(_op(slots=256)) == ("lockstep", 0.5)
    # as the balanced demo: both designs stall on DRAM alike (binds dram), but Kaleido's array is 0.6x dense with
    # a drain stall of 300 of its 1,667 cycles (>= 5 %): slots 1.0 -> array 0.6 loses on the drain
    st = {"drain": 300, "dram": 200, "vector": 0, "similarity": 0}
    op = _op(slots=256, useful_macs=4.0e6, cycles=1667, speedup=0.6, total_cycles=1867, dense_total_cycles=1120,
             total_speedup=0.6, stall_cycles=st, dense_stall_cycles={"drain": 0, "dram": 200})
    assert binding(op, dense=False, organisation="delta") == "dram"
    name, ratio = row(op, "delta")
    assert name == "drain" and ratio == 0.6
    # same, without the drain stall: the array's fill and drain around the slots
    assert row({**op, "stall_cycles": {**st, "drain": 0}}, "delta")[0] == "fill"
    # array 2.0 = ideal, end to end 1.5: the stall Kaleido has more of than dense (vector 300 against 0)
    st = {"drain": 0, "dram": 100, "vector": 300, "similarity": 0}
    assert row(_op(slots=128, total_speedup=1.5, stall_cycles=st, dense_stall_cycles={"dram": 100})) == ("vector",
                                                                                                          0.75)


def test_explain_records_fit_80_columns(tmp_path):
    """`--layout records`: a few lines per op, nothing cut at 80 columns; the table stays for wide and piped output."""
    from io import StringIO

    from rich.console import Console

    from sim.cli.reports import TABLE_WIDTH, _explain_records

    st = {"drain": 300, "dram": 200, "vector": 0, "similarity": 0}
    op = _op(slots=256, useful_macs=4.0e6, cycles=1667, speedup=0.6, total_cycles=1867, dense_total_cycles=1120,
             total_speedup=0.6, stall_cycles=st, dense_stall_cycles={"drain": 0, "dram": 200})
    res = {"config": {"array_rows": 128, "array_cols": 128}, "per_op": [op], "organisation": "delta"}
    buf = StringIO()
    _explain_records(Console(file=buf, width=80), res, tmp_path / "r.json")
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 80 and not any("…" in x for x in lines)
    # the same hand-made op as test_loses_on_names_the_link_furthest_below_one: slots 1.0, array 0.6, drain x0.60
    i = lines.index("qkv (block 0, step 0)")
    assert lines[i + 1:i + 3] == ["  ideal 1.00 -> slots 1.00 -> array 0.60 -> end to end 0.60",
                                  "  bound by dram (dense by dram); loses on drain x0.60; energy 0.75x dense"]
    good = tmp_path / "r.json"
    good.write_text(json.dumps({**res, "speedup": 0.6, "total_speedup": 0.6}))
    piped = kaleido("explain", str(good))  # piped: at least 160 columns >= TABLE_WIDTH, so the table
    assert piped.returncode == 0 and TABLE_WIDTH <= 160 and "┃ op" in piped.stdout
    rec = kaleido("explain", str(good), "--layout", "records")
    assert rec.returncode == 0 and "loses on drain x0.60" in rec.stdout and "┃ op" not in rec.stdout
    assert_one_line_error(kaleido("explain", str(good), "--layout", "wide"), "--layout must be")


def test_energy_differences_keep_three_digits_below_100_uj():
    # the per-op column: 1e6 pJ = 1 uJ; a small trace's differences are fractions of a uJ (new user: "+0, -0")
    from sim.cli.reports import uj

    assert [uj(x) for x in (-2.5e6, 1.234e8, 4.2e4, 0.0, -1.5e11)] == ["-2.5", "+123", "+0.042", "+0", "-150,000"]
