"""The progress export's CSV: every cell quoted, so no locale's separator splits one; no cell a formula."""

from __future__ import annotations

import csv
import io

from app.learning.csv_export import cell, csv_text


def test_a_cell_holding_any_common_separator_is_one_quoted_cell_in_every_locale():
    text = csv_text(["name", "n"], [["x;=1+1", 2], ["a,b", "c\td"], ["plain", None]])
    assert text.splitlines() == ['"name","n"', '"x;=1+1","2"', '"a,b","c\td"', '"plain",""']
    for separator in (",", ";", "\t"):  # how a spreadsheet of each locale splits the file
        rows = list(csv.reader(io.StringIO(text), delimiter=separator))
        assert all(not value.lstrip().startswith(("=", "+", "-", "@")) for row in rows for value in row), rows
    assert list(csv.reader(io.StringIO(text)))[1] == ["x;=1+1", "2"]


def test_formula_leading_cells_are_text():
    for formula in ("=HYPERLINK(\"http://x\")", "+1", "-1+1", "@SUM(A1)", " =1", "\t=1", "\r=1", "|cmd", "＝1"):
        assert cell(formula) == "'" + formula
    assert cell("Ann") == "Ann" and cell("a=b") == "a=b" and cell(3) == "3"
