"""`hw.lint`: per-file Verilator lint with port-only stubs still checks every instance's ports."""

from __future__ import annotations

from hw.config import load_config
from hw.lint import lint_folder, main, modules_of, stub
from hw.rtl import emit


def test_per_file_lint_clean_and_catches_width_mismatch(tmp_path):
    folder = tmp_path / "tiny"
    emit(load_config("tiny-8x8"), folder, only=("kaleido_pe", "kaleido_column"))
    runs = lint_folder(folder)
    assert [(label, ok) for label, ok, _, _ in runs] == [
        ("kaleido_column.v (stubs: kaleido_pe)", True), ("kaleido_pe.v", True)]
    # full: each file with children also over the whole folder; tops restricts that to the files named
    labels = [label for label, *_ in lint_folder(folder, full=True, jobs=2)]
    assert "kaleido_column.v whole hierarchy" in labels
    assert [label for label, *_ in lint_folder(folder, full=True, tops=("kaleido_pe",))] == [
        "kaleido_column.v (stubs: kaleido_pe)", "kaleido_pe.v"]
    pe = folder / "kaleido_pe.v"
    text = pe.read_text()
    s = stub(modules_of(text)["kaleido_pe"])
    assert "always" not in s and "assign" not in s and s.count("input") == text.count("\n  input ")
    # Rename one PE port: the column (linted against the PE's stub) must fail on the missing pin.
    pe.write_text(text.replace("i_x_b", "i_x_q"))
    column = [r for r in lint_folder(folder) if r[0].startswith("kaleido_column")][0]
    assert not column[1] and "i_x_b" in column[3] and "PINNOTFOUND" in column[3]
    assert main([str(folder)]) == 1
    assert main([str(tmp_path / "missing")]) == 2
