"""The sign-off pack as files: the PDF (the HTML template ``budgets/signoff_pdf.html`` rendered
by WeasyPrint, the charts inline SVG), the XLSX and the CSV."""

from __future__ import annotations

import csv
import io
from datetime import date
from typing import Any

from django.template.loader import render_to_string

from planner.budgets.models import BudgetRequest
from planner.budgets.signoff.context import signoff_pack_context
from planner.budgets.signoff.tables import (
    COLUMN_KINDS,
    COMPARISON_HEADER,
    KINDS,
    NUMBER,
    TEXT,
    WARNING,
    Row,
    cell_text,
    cell_value,
    comparison_rows,
    sections,
    spreadsheet_safe,
    summary_rows,
)


class SignoffUnavailable(Exception):
    """The PDF renderer cannot run here (WeasyPrint's system libraries are missing)."""


def signoff_pdf(request: BudgetRequest) -> bytes:
    """The sign-off pack as PDF (A4), rendered from ``budgets/signoff_pdf.html``."""
    try:
        from weasyprint import HTML
    except OSError as error:  # Pango/HarfBuzz missing on this machine
        raise SignoffUnavailable(
            "PDF export needs the Pango library (Debian: apt-get install libpango-1.0-0 "
            f"libpangoft2-1.0-0): {error}"
        ) from error
    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(request))
    return bytes(HTML(string=html).write_pdf())


SUMMARY_HEADER = ("Item", "Value")


WIDEST_COLUMN = 66  # characters (a SHA-256 fits); longer text wraps


def _xlsx_table(sheet: Any, header: tuple[str, ...], rows: list[list[Any]], *,
                rounded: bool = True) -> None:  # fmt: skip
    """``rows`` under a bold, frozen ``header``: each cell rounded and formatted by the kind of
    its column (full precision with ``rounded=False``), the columns as wide as their text."""
    kinds = [COLUMN_KINDS.get(name, TEXT) for name in header]
    sheet.append(list(header))
    for row in rows:
        sheet.append([spreadsheet_safe(cell_value(v, k, rounded=rounded))
                      for v, k in zip(row, kinds, strict=False)])  # fmt: skip
        for cell, kind in zip(sheet[sheet.max_row], kinds, strict=False):
            _xlsx_format(cell, kind)
    _xlsx_finish(sheet)


def _xlsx_summary(sheet: Any, rows: list[Row]) -> None:
    from openpyxl.styles import Font

    sheet.append(list(SUMMARY_HEADER))
    for label, value, kind in rows:
        sheet.append([label, spreadsheet_safe(cell_value(value, kind))])
        _xlsx_format(sheet.cell(sheet.max_row, 2), kind)
        if kind == WARNING:
            for cell in sheet[sheet.max_row]:
                cell.font = Font(bold=True, color="B42318")
    _xlsx_finish(sheet)


def _xlsx_format(cell: Any, kind: str) -> None:
    if kind in KINDS and isinstance(cell.value, date | NUMBER) and not isinstance(cell.value, bool):
        cell.number_format = KINDS[kind].excel


def _xlsx_finish(sheet: Any) -> None:
    """Bold frozen header row; each column as wide as its widest text (wrapped past
    :data:`WIDEST_COLUMN` characters)."""
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter

    for cell in sheet[1]:
        cell.font = Font(bold=True)
    sheet.freeze_panes = "A2"
    for index, column in enumerate(sheet.iter_cols(), start=1):
        width = max(len(_xlsx_text(cell)) for cell in column)
        for cell in column:
            if len(_xlsx_text(cell)) > WIDEST_COLUMN:
                cell.alignment = Alignment(wrap_text=True, vertical="top")
        sheet.column_dimensions[get_column_letter(index)].width = min(width, WIDEST_COLUMN) + 2


def _xlsx_text(cell: Any) -> str:
    """About what a cell shows: numbers and dates as their format writes them."""
    value = cell.value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "FALSE"
    kind = next((name for name, kind in KINDS.items() if kind.excel == cell.number_format), "")
    return cell_text(value, kind) if kind else str(value)


def signoff_xlsx(request: BudgetRequest) -> bytes:
    """The sign-off pack as a workbook: Summary (with every warning and the price), then
    Comparison, Training method (fine-tuning only), Whole run, Step margins and Timeline
    rounded for reading, and Data: the comparison's figures at full precision."""
    from openpyxl import Workbook

    context = signoff_pack_context(request)
    book = Workbook()
    summary = book.active
    assert summary is not None
    summary.title = "Summary"
    _xlsx_summary(summary, summary_rows(context))
    for title, header, rows in sections(context):
        _xlsx_table(book.create_sheet(title), header, rows)
    _xlsx_table(book.create_sheet("Data"), COMPARISON_HEADER, comparison_rows(context),
                rounded=False)  # fmt: skip
    output = io.BytesIO()
    book.save(output)
    return output.getvalue()


def signoff_csv(request: BudgetRequest) -> str:
    """The sign-off pack as CSV: the summary, then each table of the XLSX's sheets in turn
    (their headers, their rounded values)."""
    context = signoff_pack_context(request)
    output = io.StringIO()
    writer = csv.writer(output)
    writer.writerow(SUMMARY_HEADER)
    for label, value, kind in summary_rows(context):
        writer.writerow([label, spreadsheet_safe(cell_value(value, kind))])
    for _title, header, rows in sections(context):
        kinds = [COLUMN_KINDS.get(name, TEXT) for name in header]
        writer.writerow([])
        writer.writerow(header)
        for row in rows:
            writer.writerow([spreadsheet_safe(cell_value(v, k))
                             for v, k in zip(row, kinds, strict=False)])  # fmt: skip
    return output.getvalue()
