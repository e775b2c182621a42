"""The results table of a sweep: one row per point, Parquet (pyarrow) and CSV, byte-deterministic.

Columns, in order: ``point`` (0-based index), ``key`` (the point's content hash, `sim.store`), the
sweep's key columns (axes, fixed values, listed-point keys, in file order; empty where a listed point
does not set one), ``status`` (``ok`` or ``failed``), ``error`` (one line, empty when ok) and the
result columns (`sim.sweep.tasks.RESULT_COLUMNS` when the sweep has trace points, then the
`sim.sweep.tasks.WORKLOAD_COLUMNS` not among them when it has workload points; empty for a failed
point and for a point of the other kind). Rows come in point
order from the stored point files, so the table depends only on the sweep and the results, never on
how many workers ran them or in which order they finished. Both files are written atomically.

Parquet column types: int64 for cycle counts, float64 for the other results, and for a key column
the type of its values (bool, int64, float64 when ints and floats mix, else string).
CSV: floats in Python's shortest round-trip form (``repr``), empty cells for missing values.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from algo.fileio import atomic_write_bytes
from sim.sweep.tasks import ALL_RESULT_COLUMNS, INT_COLUMNS, RESULT_COLUMNS, WORKLOAD_COLUMNS

FIXED_COLUMNS = ("point", "key")
STATUS_COLUMNS = ("status", "error")


def table_rows(sweep, keys: list[str], outcomes: list[dict]) -> tuple[list[str], list[dict]]:
    """The header and rows (dicts) of a finished sweep: ``outcomes[i]`` is point i's stored outcome."""
    kinds = {pt.kind for pt in sweep.points}
    result_cols = [c for c in ALL_RESULT_COLUMNS if ("trace" in kinds and c in RESULT_COLUMNS)
                   or ("workload" in kinds and c in WORKLOAD_COLUMNS)]
    cols = [*FIXED_COLUMNS, *sweep.columns, *STATUS_COLUMNS, *result_cols]
    rows = []
    for pt, key, out in zip(sweep.points, keys, outcomes, strict=True):
        row = {"point": pt.index, "key": key} | {c: pt.values.get(c) for c in sweep.columns}
        row["status"] = out["status"]
        row["error"] = out.get("error", "")
        res = out.get("result") or {}
        row |= {c: res.get(c) for c in result_cols}
        rows.append(row)
    return cols, rows


def _arrow_column(name: str, values: list):
    import pyarrow as pa

    if name in INT_COLUMNS or name == "point":
        return pa.array(values, type=pa.int64())
    if name in ALL_RESULT_COLUMNS:
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if name in ("key", *STATUS_COLUMNS):
        return pa.array(values, type=pa.string())
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    return pa.array([None if v is None else _cell(v) for v in values], type=pa.string())


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return ";".join(_cell(x) for x in v)
    return str(v)


def parquet_bytes(cols: list[str], rows: list[dict]) -> bytes:
    """The table as Parquet (pyarrow, no pandas metadata, snappy)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: _arrow_column(c, [r[c] for r in rows]) for c in cols})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def csv_bytes(cols: list[str], rows: list[dict]) -> bytes:
    """The table as CSV (``\\n`` line ends, `_cell` formatting)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r[c]) for c in cols])
    return buf.getvalue().encode()


def write_table(out_dir: str | Path, cols: list[str], rows: list[dict], stem: str = "results") -> list[Path]:
    """Write ``DIR/<stem>.parquet`` and ``DIR/<stem>.csv`` atomically; returns the paths."""
    out_dir = Path(out_dir)
    pq_path, csv_path = out_dir / f"{stem}.parquet", out_dir / f"{stem}.csv"
    atomic_write_bytes(pq_path, parquet_bytes(cols, rows))
    atomic_write_bytes(csv_path, csv_bytes(cols, rows))
    return [pq_path, csv_path]


def read_table(path: str | Path) -> list[dict]:
    """Rows of a sweep table (``.parquet`` or ``.csv``) as dicts (CSV cells as strings)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
