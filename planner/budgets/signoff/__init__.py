"""The sign-off pack of a budget request: PDF, XLSX and CSV from one set of figures.

Everything comes from the request's frozen snapshot (a draft has none yet, so it gets a live
preview built by the same function that freezes one): what finance signs is exactly what was
submitted, whatever happened to prices or the estimator since. The PDF is the HTML template
``budgets/signoff_pdf.html`` rendered by WeasyPrint, with the charts as inline SVG.

A pack finance can file: every warning of the request (those arisen since submission marked)
and the override reason come first, then the price and where it comes from (its book, date
and data-quality flag), the figures, and a block to sign. The XLSX and CSV share their
headers and rounded values (:data:`~planner.budgets.signoff.tables.KINDS` says how each
kind of figure is rounded and formatted); the XLSX's Data sheet keeps the comparison's
figures at full precision.

:mod:`.context` reads what the pack shows from the snapshot, :mod:`.tables` lays it out in
rows and cells, :mod:`.renderers` writes the files.
"""

from planner.budgets.signoff.context import (
    signoff_context,
    signoff_document,
    signoff_pack_context,
)
from planner.budgets.signoff.renderers import (
    SignoffUnavailable,
    signoff_csv,
    signoff_pdf,
    signoff_xlsx,
)

__all__ = [
    "SignoffUnavailable",
    "signoff_context",
    "signoff_csv",
    "signoff_document",
    "signoff_pack_context",
    "signoff_pdf",
    "signoff_xlsx",
]
