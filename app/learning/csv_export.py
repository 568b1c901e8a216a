"""CSV a spreadsheet opens as data: every cell quoted, none read as a formula, in any locale."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

# what makes a spreadsheet read a cell as a formula (or DDE), ASCII and fullwidth forms alike
FORMULA_LEAD = frozenset("=+-@|\uff1d\uff0b\uff0d\uff20")
# what a spreadsheet may skip before it looks at a cell's first character
SKIPPED = " \t\r\n\u00a0\u3000"


def cell(value: object) -> str:
    """Return value as text a spreadsheet shows as text: `=HYPERLINK(...)` or ` +1` gets a leading `'`."""
    text = "" if value is None else str(value)
    return "'" + text if text.lstrip(SKIPPED)[:1] in FORMULA_LEAD else text


def csv_text(columns: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """Return a header and rows as CSV with every cell quoted.

    Quoting every cell, not only those holding a comma, keeps `x;=1+1` one cell where the locale's separator is
    `;` (German, French, ...) or a tab: the spreadsheet splits nothing, so no part of a cell starts a formula.
    """
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(columns)
    writer.writerows([cell(value) for value in row] for row in rows)
    return out.getvalue()
