"""The sign-off pack of a budget request: PDF, XLSX and CSV from one set of figures.

Everything comes from the request's frozen snapshot (a draft has none yet, so it gets a live
preview built by the same function that freezes one): what finance signs is exactly what was
submitted, whatever happened to prices or the estimator since. The PDF is the HTML template
``budgets/signoff_pdf.html`` rendered by WeasyPrint, with the charts as inline SVG.

A pack finance can file: every warning of the request (those arisen since submission marked)
and the override reason come first, then the price and where it comes from (its book, date
and data-quality flag), the figures, and a block to sign. The XLSX and CSV share their
headers and rounded values (:data:`KINDS` says how each kind of figure is rounded and
formatted); the XLSX's Data sheet keeps the comparison's figures at full precision.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone

from planner.budgets.charts import CostPoint, Spread, cost_versus_days, stacked_bars, tornado_svg
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.snapshot import snapshot_document
from planner.budgets.warnings import BLOCK, request_warnings
from planner.common.labels import MEMORY_PARTS, STEP_MARGINS, STEP_PARTS
from planner.scenarios.breakdowns import (
    TrainingMethod,
    margin_lines,
    software_stack_shown,
    step_parts,
    training_method,
    whole_run_table,
)
from planner.scenarios.models import PriceSource
from pricing.models import PricingType

#: Characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


class SignoffUnavailable(Exception):
    """The PDF renderer cannot run here (WeasyPrint's system libraries are missing)."""


def spreadsheet_safe(value: Any) -> Any:
    """Prefix a text cell that a spreadsheet would run as a formula with a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _document(request: BudgetRequest) -> dict[str, Any]:
    """The frozen snapshot once submitted; while editable, a live preview built the same way
    (a request sent back for changes may differ from what was submitted before)."""
    if request.is_frozen and request.snapshot:
        return request.snapshot
    return snapshot_document(request, submission=0)


def _spread(values: dict[str, Any] | None) -> Spread:
    values = values or {}
    return Spread(*(float(values.get(key, 0) or 0) for key in ("p10", "p50", "p90")))


def _step_parts(runs: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The margins as two bars when every run reports them apart (labels without shares,
    which differ from run to run), else the one ``overheads`` bar they add up to."""
    breakdowns = [run.get("step_time_breakdown_s") for run in runs]
    if breakdowns and all(margin_lines(breakdown, None) for breakdown in breakdowns):
        return step_parts(breakdowns[0], None)
    return STEP_PARTS


def _run_details(run: Mapping[str, Any], estimate: Mapping[str, Any] | None) -> dict[str, Any]:
    """One run's whole-run lines, step-time margins and training method. ``estimate`` is the
    chosen run's full estimate: snapshots frozen before run summaries carried these figures
    still have it."""
    estimate = estimate or {}
    whole_run = run.get("whole_run") or estimate.get("whole_run")
    margins = run.get("margins_applied") or estimate.get("margins_applied")
    stack = run.get("software_stack") or estimate.get("software_stack")
    return {
        "run": run,
        "software_stack": software_stack_shown({"software_stack": stack}),
        "whole_run": whole_run_table(whole_run),
        "margins": margin_lines(run.get("step_time_breakdown_s"), margins),
        "training_method": training_method(
            run.get("training_method") or estimate.get("training_method")
        ),
    }


def _methods(details: list[dict[str, Any]]) -> list[TrainingMethod | None]:
    """Each run's training method, or nothing when every run is plain full training (or
    predates the figure): pre-training packs look as they did."""
    methods: list[TrainingMethod | None] = [each["training_method"] for each in details]
    return methods if any(method and not method.plain for method in methods) else []


def _side_by_side(details: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The runs' whole-run lines and margins side by side: a row per line that any run has,
    a cell per run (None where that run's snapshot lacks the figure)."""
    tables = [each["whole_run"] for each in details]
    labels: dict[str, str] = {}  # steady state, then the parts, as the runs first list them
    for table in tables:
        for line in table.rows if table else ():
            labels.setdefault(line.key, line.label)
    lines = [{line.key: line for line in table.rows} if table else {} for table in tables]
    margins = [{margin.key: margin for margin in each["margins"]} for each in details]
    return {
        "rows": [
            {"key": key, "label": label, "cells": [each.get(key) for each in lines]}
            for key, label in labels.items()
        ],
        "totals": [table.total if table else None for table in tables] if labels else [],
        "margins": [
            {"key": key, "name": name, "cells": [each.get(key) for each in margins]}
            for key, name in STEP_MARGINS
            if any(key in each for each in margins)
        ],
    }


def _charts(runs: list[dict[str, Any]]) -> dict[str, str]:
    labels = [str(run["scenario"]) for run in runs]
    points = [
        CostPoint(str(run["scenario"]), _spread(run["training_days"]), _spread(run["cost"]))
        for run in runs
    ]
    currency = str(runs[0].get("currency") or "") if runs else ""

    def series(key: str, parts: tuple[tuple[str, str], ...]) -> list[tuple[str, list[float]]]:
        return [
            (label, [float((run.get(key) or {}).get(part, 0.0)) for run in runs])
            for part, label in parts
        ]

    return {
        "cost_vs_days": cost_versus_days(points, currency),
        "step_time": stacked_bars(labels, series("step_time_breakdown_s", _step_parts(runs)), "s"),
        "memory": stacked_bars(labels, series("memory_per_gpu_gib", MEMORY_PARTS), "GiB"),
    }


def _tornado(document: Mapping[str, Any]) -> dict[str, str] | None:
    """The chosen run's sensitivity as SVG (cost and days), None before runs had one."""
    moves = document.get("sensitivity")
    if not moves or not moves.get("inputs"):
        return None
    currency = str((document.get("price") or {}).get("currency") or "")
    return {
        "cost": tornado_svg(moves, metric="cost", currency=currency),
        "days": tornado_svg(moves, metric="days", currency=currency),
        "baseline_cost": moves["baseline"]["cost"],
        "baseline_days": moves["baseline"]["training_days"],
    }


def signoff_context(request: BudgetRequest) -> dict[str, Any]:
    """What the request page, the PDF, the XLSX and the CSV show."""
    document = _document(request)
    chosen = document["chosen"]
    alternatives = list(document["alternatives"])
    details = [
        _run_details(chosen, (document.get("results") or {}).get("estimate")),
        *(_run_details(alternative, None) for alternative in alternatives),
    ]
    timeline = (
        AuditEvent.objects.filter(request=request)
        .select_related("actor")
        .order_by("created_at", "pk")
    )
    return {
        "request": request,
        "project": request.project,
        "snapshot": document,
        "snapshot_sha256": request.snapshot_sha256,
        "is_preview": not (request.is_frozen and request.snapshot),
        "chosen": chosen,
        "alternatives": alternatives,
        "charts": _charts([chosen, *alternatives]),
        "run_details": details,
        "whole_run": _side_by_side(details),
        "training_methods": _methods(details),
        "levers": list(document.get("levers") or []),
        "bill": ((document.get("results") or {}).get("budget") or {}).get("bill"),
        "tornado": _tornado(document),
        "timeline": list(timeline),
        "generated_at": timezone.now(),
    }


def signoff_pack_context(request: BudgetRequest) -> dict[str, Any]:
    """:func:`signoff_context` and what only the pack shows: every warning (those arisen since
    submission marked), the override reason, the price's rows and the sign-off blocks."""
    context = signoff_context(request)
    document = context["snapshot"]
    warnings = _pack_warnings(request, document)
    context.update(
        pack=True,
        pack_warnings=warnings,
        pack_blocking=any(warning.severity == BLOCK for warning in warnings),
        warnings_checked_now="warnings" not in document,
        override_reason=str(document.get("override_reason") or "").strip(),
    )
    context.update(
        price_rows=[(label, cell_text(value, kind), kind)
                    for label, value, kind in price_rows(document)],
        signoff=_signoff_blocks(request, document, preview=context["is_preview"]),
    )  # fmt: skip
    return context


def _signoff_blocks(
    request: BudgetRequest, document: Mapping[str, Any], *, preview: bool
) -> dict[str, Any]:
    """The decisions on the snapshot's submission, and a blank block to sign for each
    approval still needed while the request awaits them."""
    if preview:
        return {"preview": True, "decisions": [], "open": range(0)}
    submission = int(document.get("submission") or 1)
    decisions = list(
        request.decisions.filter(submission=submission)
        .select_related("approver")
        .order_by("created_at", "pk")
    )
    approved = sum(d.decision == BudgetDecision.Decision.APPROVE for d in decisions)
    waiting = request.state == BudgetState.SUBMITTED
    needed = max(request.approvals_required - approved, 0) if waiting else 0
    return {"preview": False, "submission": submission, "decisions": decisions,
            "open": range(needed)}  # fmt: skip


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


# --- Cells: how each kind of figure is rounded and shown ----------------------------------------


@dataclass(frozen=True)
class Kind:
    """How a kind of figure is rounded (``places``), formatted in the XLSX (``excel``) and
    written as text in the PDF (``spec``, Python's format mini-language)."""

    excel: str
    places: int | None
    spec: str


TEXT, WARNING, BOOL, DATE, DATETIME = "text", "warning", "bool", "date", "datetime"
KINDS: dict[str, Kind] = {
    "id": Kind("0", 0, "d"),
    "count": Kind("#,##0", 0, ",d"),
    "money": Kind("#,##0.00", 2, ",.2f"),
    "price": Kind("#,##0.0000", 4, ",.4f"),  # per accelerator-hour: the hundredth of a cent
    "days": Kind("0.0", 1, ",.1f"),
    "gpu_hours": Kind("#,##0", 0, ",d"),
    "share": Kind("0.0%", 3, ".1%"),
    "fine_share": Kind("0.00%", 4, ".2%"),  # a LoRA's trainable share is well under 1 %
    "seconds": Kind("0.000", 3, ",.3f"),
    "gib": Kind("#,##0.0", 1, ",.1f"),
    "quantity": Kind("#,##0.00", 2, ",.2f"),  # GB-months, GB, kWh, tonnes: the bill's units
    DATE: Kind("yyyy-mm-dd", None, "%Y-%m-%d"),
    DATETIME: Kind("yyyy-mm-dd hh:mm:ss", None, "%Y-%m-%d %H:%M:%S"),
}
#: The kind of each table column, by its header (a header means the same in every table).
COLUMN_KINDS = {
    "Run": "id", "GPUs": "count", "Cost P10": "money", "Cost P50": "money",
    "Cost P90": "money", "Days P10": "days", "Days P50": "days", "Days P90": "days",
    "GPU-hours P50": "gpu_hours", "Cost per M tokens": "money", "MFU": "share",
    "Fits in memory": BOOL, "Chosen": BOOL, "Days": "days", "GPU-hours": "gpu_hours",
    "Share of total": "share", "Share of margin-free step time": "share",
    "Seconds per step": "seconds", "LoRA rank": "id", "Trainable parameters": "count",
    "Trainable share": "fine_share", "Host memory per node (GiB)": "gib", "When": DATETIME,
    "Cost": "money", "Cost saved": "money", "Amount": "money", "Unit price": "price",
    "Quantity": "quantity",
    "In total": BOOL,
}  # fmt: skip
NUMBER = int | float | Decimal


def cell_value(value: Any, kind: str, *, rounded: bool = True) -> Any:
    """``value`` as a cell holds it: rounded to its kind's places (a Decimal exactly, half
    up), a time in local time without its zone (a spreadsheet has none) to the second."""
    if isinstance(value, datetime):
        local = timezone.localtime(value) if timezone.is_aware(value) else value
        return local.replace(tzinfo=None, microsecond=0)
    places = KINDS[kind].places if kind in KINDS else None
    if isinstance(value, bool) or not isinstance(value, NUMBER) or places is None or not rounded:
        return value
    if isinstance(value, Decimal):
        exact = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        return int(exact) if places == 0 else exact
    return round(value) if places == 0 else round(float(value), places)


def cell_text(value: Any, kind: str) -> str:
    """``value`` as the PDF writes it: rounded, with thousands separators."""
    shown = cell_value(value, kind)
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "yes" if shown else "no"
    if isinstance(shown, date | NUMBER) and kind in KINDS:
        return format(shown, KINDS[kind].spec)
    return str(shown)


# --- The summary: warnings, request, price, snapshot ---------------------------------------------

Row = tuple[str, Any, str]  # label, value, kind


@dataclass(frozen=True)
class PackWarning:
    """A warning as the pack shows it: kept in the snapshot, or arisen since submission."""

    code: str
    severity: str
    message: str
    since_submission: bool = False

    @property
    def label(self) -> str:
        label = "Blocking warning" if self.severity == BLOCK else "Warning"
        return f"{label} (since submission)" if self.since_submission else label


def _pack_warnings(request: BudgetRequest, document: Mapping[str, Any]) -> list[PackWarning]:
    found = request_warnings(request, document)
    return [
        *(PackWarning(w.code, w.severity, w.message) for w in found.shown),
        *(PackWarning(w.code, w.severity, w.message, True) for w in found.since_submission),
    ]


def _warning_rows(context: Mapping[str, Any]) -> list[Row]:
    warnings: list[PackWarning] = context["pack_warnings"]
    blocking = sum(warning.severity == BLOCK for warning in warnings)
    count = f"{len(warnings)} ({blocking} blocking)" if warnings else "none"
    rows: list[Row] = [("Warnings", count, WARNING if warnings else TEXT)]
    rows += [(w.label, w.message[:1].upper() + w.message[1:], WARNING) for w in warnings]
    if context["warnings_checked_now"]:
        rows.append(("Warnings checked", "at export: the snapshot predates kept warnings", TEXT))
    if context["override_reason"]:
        rows.append(("Override reason", context["override_reason"], WARNING))
    return rows


def _date(text: str | None) -> date | None:
    """The local date of an ISO timestamp (or the date of an ISO date)."""
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    return timezone.localdate(moment) if timezone.is_aware(moment) else moment.date()


def price_rows(document: Mapping[str, Any]) -> list[Row]:
    """What the budget's price is and where it comes from, as the snapshot keeps it."""
    price, record = document.get("price") or {}, document.get("price_record") or {}
    per_hour = price.get("price_per_gpu_hour") or record.get("price_per_accelerator_hour")
    source = price.get("source")
    rows: list[Row] = [
        ("Price per accelerator-hour", Decimal(per_hour) if per_hour else None, "price"),
        ("Price currency", price.get("currency") or record.get("currency"), TEXT),
        ("Price source", PriceSource(source).label if source in PriceSource.values else "", TEXT),
        ("Price", price.get("label"), TEXT),
    ]
    if source == PriceSource.PRICE_ENTRY:
        return [*rows, *_entry_rows(record)]
    if source == PriceSource.VENDOR_QUOTE:
        return [*rows, *_quote_rows(record)]
    return [*rows, ("On-prem profile", record.get("name"), TEXT)]


def _quote_rows(record: Mapping[str, Any]) -> list[Row]:
    return [
        ("Vendor", record.get("vendor"), TEXT),
        ("Quote reference", record.get("reference"), TEXT),
        ("Quote valid from", _date(record.get("valid_from")), DATE),
        ("Quote valid until", _date(record.get("valid_until")), DATE),
    ]


def _entry_rows(record: Mapping[str, Any]) -> list[Row]:
    book, flag = record.get("book") or {}, record.get("data_flag")
    pricing_type = record.get("pricing_type")
    return [
        ("Provider", record.get("provider"), TEXT),
        ("Region", record.get("region"), TEXT),
        ("Pricing type", PricingType(pricing_type).label if pricing_type in PricingType.values
         else pricing_type, TEXT),
        ("Instance type", record.get("instance_type") or "", TEXT),
        ("Price book", book.get("name"), TEXT),
        ("Price book date", _date(book.get("fetched_at")), DATE),
        ("Price book source", book.get("source"), TEXT),
        ("Price data flag",
         "(not in this snapshot: frozen before data flags)" if flag is None
         else flag.strip() or "none", WARNING if flag and flag.strip() else TEXT),
    ]  # fmt: skip


def _summary_rows(context: dict[str, Any]) -> list[Row]:
    request, snapshot = context["request"], context["snapshot"]
    asked = snapshot["request"]  # the figures of the document the hash covers
    frozen = not context["is_preview"]
    return [
        ("Project", snapshot["project"]["name"], TEXT),
        ("Organisation", snapshot["project"]["organisation"], TEXT),
        ("Request", asked["title"], TEXT),
        ("State", request.get_state_display(), TEXT),
        *_warning_rows(context),
        ("Amount", Decimal(asked["amount"]), "money"),
        ("Contingency", Decimal(asked["contingency"]), "money"),
        ("Currency", asked["currency"], TEXT),
        ("Basis", BudgetRequest.Basis(asked["basis"]).label, TEXT),
        ("Justification", asked["justification"], TEXT),
        ("Approvals required", asked["approvals_required"], "count"),
        *price_rows(snapshot),
        ("Snapshot SHA-256",
         request.snapshot_sha256 if frozen else "(not frozen: a preview)", TEXT),
        ("Submission", snapshot.get("submission") if frozen else None, "count"),
        ("Frozen at", datetime.fromisoformat(snapshot["frozen_at"]) if frozen else None,
         DATETIME),
        ("Estimator version", snapshot.get("estimator_version"), TEXT),
        ("Monte Carlo seed", snapshot["montecarlo"]["seed"], "id"),
        ("Monte Carlo samples", snapshot["montecarlo"]["samples"], "count"),
        ("Times in", settings.TIME_ZONE, TEXT),
    ]  # fmt: skip


COMPARISON_HEADER = (
    "Scenario", "Accelerator", "GPUs", "Currency", "Cost P10", "Cost P50", "Cost P90",
    "Days P10", "Days P50", "Days P90", "GPU-hours P50", "Cost per M tokens", "MFU",
    "Fits in memory", "Bottleneck", "Chosen",
)  # fmt: skip


def _comparison_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for run, chosen in [(context["chosen"], True)] + [(a, False) for a in context["alternatives"]]:
        cost, days = run.get("cost") or {}, run.get("training_days") or {}
        rows.append([
            run["scenario"], run["accelerator"], run["num_gpus"], run.get("currency"),
            *(Decimal(cost[k]) if k in cost else None for k in ("p10", "p50", "p90")),
            *(days.get(k) for k in ("p10", "p50", "p90")),
            Decimal((run.get("gpu_hours") or {}).get("p50", "0")),
            Decimal(run["cost_per_million_tokens"]) if run.get("cost_per_million_tokens") else None,
            run.get("mfu"), run.get("fits_in_memory"), run.get("bottleneck"), chosen,
        ])  # fmt: skip
    return rows


WHOLE_RUN_HEADER = ("Scenario", "Run", "Part", "Days", "GPU-hours", "Share of total")
MARGINS_HEADER = (
    "Scenario", "Run", "Margin", "Share of margin-free step time", "Seconds per step",
    "Scaled with cluster size",
)  # fmt: skip


def _whole_run_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for details in context["run_details"]:
        run, table = details["run"], details["whole_run"]
        lines = [*table.rows, table.total] if table else []
        rows += [
            [run["scenario"], run["run"], line.label, line.days, line.gpu_hours, line.share]
            for line in lines
        ]
    return rows


def _margin_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            details["run"]["scenario"],
            details["run"]["run"],
            margin.name,
            margin.share,
            margin.seconds,
            margin.scale_note or "",
        ]
        for details in context["run_details"]
        for margin in details["margins"]
    ]


TRAINING_METHOD_HEADER = (
    "Scenario", "Run", "Method", "LoRA rank", "LoRA targets", "Frozen", "Optimizer",
    "CPU offload", "Trainable parameters", "Trainable share", "Host memory per node (GiB)",
)  # fmt: skip


def _method_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for details, method in zip(context["run_details"], context["training_methods"], strict=True):
        run = details["run"]
        if method is None:
            rows.append([run["scenario"], run["run"], "(not in this snapshot)"])
            continue
        rows.append([
            run["scenario"], run["run"], method.name, method.rank, method.targets_text,
            method.frozen_text, method.optimizer_label, method.offload_label,
            method.trainable_count, method.trainable_share, method.host_memory_per_node_gib,
        ])  # fmt: skip
    return rows


def _sections(context: dict[str, Any]) -> list[tuple[str, tuple[str, ...], list[list[Any]]]]:
    """The pack's tables after the summary: one sheet each in the XLSX, one block in the CSV;
    the training method's only where some run is not plain full training."""
    methods = (
        [("Training method", TRAINING_METHOD_HEADER, _method_rows(context))]
        if context["training_methods"]
        else []
    )
    return [
        ("Comparison", COMPARISON_HEADER, _comparison_rows(context)),
        *methods,
        ("Whole run", WHOLE_RUN_HEADER, _whole_run_rows(context)),
        ("Step margins", MARGINS_HEADER, _margin_rows(context)),
        *([("Whole bill", BILL_HEADER, _bill_rows(context))] if context["bill"] else []),
        *([("Levers", LEVERS_HEADER, _lever_rows(context))] if context["levers"] else []),
        ("Timeline", TIMELINE_HEADER, _timeline_rows(context)),
    ]


BILL_HEADER = ("Line", "Quantity", "Unit", "Unit price", "Amount", "In total", "Formula")


def _bill_rows(context: dict[str, Any]) -> list[list[Any]]:
    bill = context["bill"] or {}
    rows: list[list[Any]] = [
        [
            line["label"],
            line["quantity"],
            line["unit"],
            None if line["unit_price"] is None else Decimal(line["unit_price"]),
            None if line["amount"] is None else Decimal(line["amount"]),
            line["in_total"],
            line["formula"],
        ]
        for line in bill.get("lines", [])
    ]
    if bill:
        rows.append(["Total of the priced lines", None, "", None, Decimal(bill["total"]), True, ""])
    return rows


LEVERS_HEADER = (
    "Change", "Fits in memory", "Days", "GPU-hours", "Cost", "Cost saved", "Why",
)  # fmt: skip


def _lever_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            lever["change"],
            lever["fits_in_memory"],
            lever["training_days"],
            Decimal(str(lever["gpu_hours"])),
            Decimal(lever["cost"]),
            Decimal(lever["cost_saved"]),
            lever["reason"],
        ]
        for lever in context["levers"]
    ]


TIMELINE_HEADER = ("When", "Who", "Action", "From", "To", "Comment")


def _timeline_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            event.created_at,
            event.actor.get_username() if event.actor else "",
            event.action,
            event.from_state,
            event.to_state,
            event.comment,
        ]
        for event in context["timeline"]
    ]


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
    _xlsx_summary(summary, _summary_rows(context))
    for title, header, rows in _sections(context):
        _xlsx_table(book.create_sheet(title), header, rows)
    _xlsx_table(book.create_sheet("Data"), COMPARISON_HEADER, _comparison_rows(context),
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
    for label, value, kind in _summary_rows(context):
        writer.writerow([label, spreadsheet_safe(cell_value(value, kind))])
    for _title, header, rows in _sections(context):
        kinds = [COLUMN_KINDS.get(name, TEXT) for name in header]
        writer.writerow([])
        writer.writerow(header)
        for row in rows:
            writer.writerow([spreadsheet_safe(cell_value(v, k))
                             for v, k in zip(row, kinds, strict=False)])  # fmt: skip
    return output.getvalue()
