"""What the sign-off pack shows, read from the request's frozen snapshot.

:func:`signoff_context` is what the request page, the PDF, the XLSX and the CSV show;
:func:`signoff_pack_context` adds what only the pack shows: every warning (those arisen
since submission marked), the override reason, the price's rows and the blocks to sign.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from planner.budgets.charts import CostPoint, Spread, cost_versus_days, stacked_bars, tornado_svg
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.signoff.tables import PackWarning, cell_text, price_rows
from planner.budgets.snapshot import snapshot_document
from planner.budgets.warnings import BLOCK, CHECKED, request_warnings
from planner.common.labels import MEMORY_PARTS, STEP_MARGINS, STEP_PARTS
from planner.scenarios.breakdowns import (
    TrainingMethod,
    margin_lines,
    software_stack_shown,
    step_parts,
    training_method,
    whole_run_table,
)


def signoff_document(request: BudgetRequest) -> dict[str, Any]:
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
    document = signoff_document(request)
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
        checked=CHECKED,
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


def _pack_warnings(request: BudgetRequest, document: Mapping[str, Any]) -> list[PackWarning]:
    found = request_warnings(request, document)
    return [
        *(PackWarning(w.code, w.severity, w.message) for w in found.shown),
        *(PackWarning(w.code, w.severity, w.message, True) for w in found.since_submission),
    ]
