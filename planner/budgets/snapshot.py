"""Frozen budget snapshots: what a request rests on, as one JSON document, and its SHA-256.

:func:`snapshot_document` gathers the document when a request is submitted (it reads the
request, its runs and their price). The hashing needs no database: the document is serialised
with sorted keys, no insignificant whitespace and UTF-8, so the same content always gives the
same bytes and the same hash, whatever order it was built in. A reader can check a downloaded
snapshot with ``sha256sum`` after writing it out with :func:`canonical_json`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.utils import timezone

from estimator.core.memory import result_memory_verdict
from planner.budgets.models import BudgetRequest
from planner.budgets.warnings import (
    BudgetWarning,
    run_warnings,
    warnings_json,
)
from planner.common.errors import PlannerError
from planner.scenarios.deadline import run_deadline_json
from planner.scenarios.models import EstimationRun
from planner.scenarios.prices import price_get, price_record

SNAPSHOT_FORMAT = "trainplan-budget-snapshot"


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot freeze a {type(value).__name__} in a snapshot")


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """The document's canonical bytes: sorted keys, compact separators, UTF-8, no NaN."""
    text = json.dumps(
        document,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_default,
    )
    return text.encode("utf-8")


def snapshot_hash(document: Mapping[str, Any]) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``document``."""
    return hashlib.sha256(canonical_json(document)).hexdigest()


def snapshot_freeze(document: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The document as stored (a JSON round trip of its canonical form) and its hash.

    Storing the round-tripped form means the stored JSON hashes to the same value when it
    is read back, which :func:`snapshot_verify` relies on.
    """
    frozen = json.loads(canonical_json(document))
    return frozen, snapshot_hash(frozen)


def snapshot_verify(document: Mapping[str, Any], expected_hash: str) -> bool:
    """True when ``document`` still hashes to ``expected_hash``."""
    return snapshot_hash(document) == expected_hash


def _as_text(value: Any) -> Any:
    # Decimals as text in the live preview too, so a draft's page shows what freezing keeps.
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list | tuple):
        return [_as_text(item) for item in value]
    return value


def _price_record(run: EstimationRun) -> dict[str, Any]:
    """The price object the run was costed with, as it stands at submission."""
    price = price_get(run.price.get("source"), run.price.get("id"))
    if price is None:
        raise PlannerError(f"the price of run {run.pk} no longer exists", field="run")
    return price_record(price)


def _run_summary(run: EstimationRun) -> dict[str, Any]:
    budget, result = run.budget or {}, run.result or {}
    return {
        "run": run.pk,
        "scenario": run.scenario.name,
        "accelerator": run.inputs["scenario"]["cluster"]["accelerator"],
        "num_gpus": run.inputs["scenario"]["cluster"]["num_gpus"],
        "price": run.price,
        "currency": budget.get("currency"),
        "cost": budget.get("cost"),
        "commitment": budget.get("commitment"),
        "converted": budget.get("converted"),
        "training_days": budget.get("training_days"),
        "gpu_hours": budget.get("gpu_hours"),
        "cost_per_million_tokens": budget.get("cost_per_million_tokens"),
        "mfu": result.get("mfu"),
        "fits_in_memory": result.get("fits_in_memory"),
        "memory_verdict": result_memory_verdict(result) if result else None,
        "bottleneck": result.get("bottleneck"),
        "step_time_breakdown_s": result.get("time_per_step_breakdown_s"),
        "memory_per_gpu_gib": result.get("memory_per_gpu_gib"),
        "accelerator_memory_gib": result.get("accelerator_memory_gib"),
        "margins_applied": result.get("margins_applied"),
        "software_stack": result.get("software_stack"),
        "whole_run": result.get("whole_run"),
        "training_method": result.get("training_method"),
        # The run against the project's deadline on the day of the snapshot.
        "deadline": run_deadline_json(run),
    }


def snapshot_document(
    request: BudgetRequest,
    *,
    submission: int,
    warnings: Sequence[BudgetWarning] | None = None,
) -> dict[str, Any]:
    """Everything the budget rests on, as one JSON document.

    ``warnings`` are the chosen run's (:func:`~planner.budgets.warnings.run_warnings`),
    computed here unless the caller has them; ``override_reason`` says why a request went
    ahead despite a blocking one.
    """
    run, project = request.run, request.project
    if warnings is None:
        warnings = run_warnings(run, project=project)
    return {
        "format": SNAPSHOT_FORMAT,
        "version": 1,
        "frozen_at": timezone.now().isoformat(),
        "submission": submission,
        "request": {
            "id": request.pk,
            "title": request.title,
            "basis": request.basis,
            "amount": str(request.amount),
            "contingency": str(request.contingency),
            "currency": request.currency,
            "justification": request.justification,
            "approvals_required": request.approvals_required,
            "created_by": request.created_by.get_username(),
            "supersedes": request.supersedes_id,
        },
        "project": {
            "id": project.pk,
            "name": project.name,
            "organisation": project.organisation.name,
            "goal": project.goal,
            "deadline": project.deadline.isoformat() if project.deadline else None,
            "budget_ceiling": _as_text(project.budget_ceiling),
            "currency": project.currency,
        },
        "scenario": {"id": run.scenario_id, "name": run.scenario.name, "inputs": run.inputs},
        "price": run.price,
        "price_record": _price_record(run),
        "exchange_rates": (run.budget or {}).get("converted"),
        "estimator_version": run.estimator_version,
        "montecarlo": {"seed": run.seed, "samples": run.samples},
        "results": {"estimate": run.result, "montecarlo": run.montecarlo, "budget": run.budget},
        # What would make the chosen run cheaper or faster, priced (without each changed
        # scenario, which the run keeps).
        "levers": [
            {key: value for key, value in lever.items() if key != "scenario"}
            for lever in run.levers or []
        ],
        # What moves the chosen run's budget (the tornado); the whole bill is in its budget.
        "sensitivity": run.sensitivity,
        "chosen": _run_summary(run),
        "alternatives": [
            _run_summary(alt)
            for alt in request.alternatives.select_related("scenario__project").order_by("pk")
        ],
        "warnings": warnings_json(warnings),
        "override_reason": request.override_reason,
    }
