"""The sign-off pack of a budget request: PDF, XLSX and CSV from one set of figures.

Everything comes from the request's frozen snapshot (a draft has none yet, so it gets a live
preview built by the same function that freezes one): what finance signs is exactly what was
submitted, whatever happened to prices or the estimator since. The PDF is the HTML template
``budgets/signoff_pdf.html`` rendered by WeasyPrint, with the charts as inline SVG.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone

from planner.breakdowns import (
    TrainingMethod,
    margin_lines,
    step_parts,
    training_method,
    whole_run_table,
)
from planner.labels import MEMORY_PARTS, STEP_MARGINS, STEP_PARTS
from planner.models import AuditEvent, BudgetRequest
from planner.services.budgets import snapshot_document
from planner.svgcharts import CostPoint, Spread, cost_versus_days, stacked_bars

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
    return {
        "run": run,
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
        "timeline": list(timeline),
        "generated_at": timezone.now(),
    }


def signoff_pdf(request: BudgetRequest) -> bytes:
    """The sign-off pack as PDF (A4), rendered from ``budgets/signoff_pdf.html``."""
    try:
        from weasyprint import HTML
    except OSError as error:  # Pango/HarfBuzz missing on this machine
        raise SignoffUnavailable(
            "PDF export needs the Pango library (Debian: apt-get install libpango-1.0-0 "
            f"libpangoft2-1.0-0): {error}"
        ) from error
    html = render_to_string("budgets/signoff_pdf.html", signoff_context(request))
    return bytes(HTML(string=html).write_pdf())


def _summary_rows(context: dict[str, Any]) -> list[tuple[str, Any]]:
    request, snapshot = context["request"], context["snapshot"]
    asked = snapshot["request"]  # the figures of the document the hash covers
    return [
        ("Project", snapshot["project"]["name"]),
        ("Organisation", snapshot["project"]["organisation"]),
        ("Request", asked["title"]),
        ("State", request.get_state_display()),
        ("Amount", Decimal(asked["amount"])),
        ("Contingency", Decimal(asked["contingency"])),
        ("Currency", asked["currency"]),
        ("Basis", BudgetRequest.Basis(asked["basis"]).label),
        ("Justification", asked["justification"]),
        ("Approvals required", asked["approvals_required"]),
        (
            "Snapshot SHA-256",
            request.snapshot_sha256 if not context["is_preview"] else "(not frozen: a preview)",
        ),
        ("Estimator version", snapshot.get("estimator_version")),
        ("Monte Carlo seed", snapshot["montecarlo"]["seed"]),
        ("Monte Carlo samples", snapshot["montecarlo"]["samples"]),
    ]


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
        ("Timeline", TIMELINE_HEADER, _timeline_rows(context)),
    ]


TIMELINE_HEADER = ("When", "Who", "Action", "From", "To", "Comment")


def _timeline_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            timezone.localtime(event.created_at).strftime("%Y-%m-%d %H:%M:%S %Z"),
            event.actor.get_username() if event.actor else "",
            event.action,
            event.from_state,
            event.to_state,
            event.comment,
        ]
        for event in context["timeline"]
    ]


def signoff_xlsx(request: BudgetRequest) -> bytes:
    """The sign-off pack as a workbook: Summary, Comparison, Training method (fine-tuning
    only), Whole run, Step margins and Timeline sheets."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    context = signoff_context(request)
    book = Workbook()
    summary = book.active
    assert summary is not None
    summary.title = "Summary"
    for label, value in _summary_rows(context):
        summary.append([label, spreadsheet_safe(value)])
    for title, header, rows in _sections(context):
        sheet = book.create_sheet(title)
        sheet.append(list(header))
        for cell in sheet[1]:
            cell.font = Font(bold=True)
        for row in rows:
            sheet.append([spreadsheet_safe(value) for value in row])
    output = io.BytesIO()
    book.save(output)
    return output.getvalue()


def signoff_csv(request: BudgetRequest) -> str:
    """The sign-off pack as CSV: the summary, then each table of the XLSX's sheets in turn."""
    context = signoff_context(request)
    output = io.StringIO()
    writer = csv.writer(output)
    for label, value in _summary_rows(context):
        writer.writerow([label, spreadsheet_safe(value)])
    for _title, header, rows in _sections(context):
        writer.writerow([])
        writer.writerow(header)
        for row in rows:
            writer.writerow([spreadsheet_safe(value) for value in row])
    return output.getvalue()
