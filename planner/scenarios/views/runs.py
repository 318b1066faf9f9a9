"""Estimation runs: start one, watch its progress, read its figures, retry a failed one."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from lib.broker import runs_in_process
from planner.budgets.services import RUN_DOES_NOT_FIT
from planner.budgets.warnings import run_warnings
from planner.common.errors import NotAllowed, PlannerError
from planner.common.views import can_author, forbidden
from planner.scenarios import selectors, services
from planner.scenarios.models import EstimationRun, RunStatus
from planner.scenarios.views.figures import run_figures


@login_required
@require_POST
def run_start(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    try:
        run = services.run_start(user=request.user, scenario=scenario)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, error.message)
        return redirect(scenario)
    run.refresh_from_db(fields=["status", "dispatched_at"])
    if run.status == RunStatus.QUEUED and run.dispatched_at is None and not runs_in_process():
        messages.warning(
            request,
            f"Run {run.pk} of '{scenario.name}' is saved, but no worker can be reached: "
            "it will start when workers are back.",
        )
    else:
        messages.success(request, f"Started run {run.pk} of '{scenario.name}'.")
    return redirect(run)


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(selectors.runs_for(request.user), pk=pk)
    succeeded = run.status == RunStatus.SUCCEEDED
    context = {
        "run": run,
        "guards": run_warnings(run) if succeeded else [],
        "scenario": run.scenario,
        "project": run.scenario.project,
        "figures": run_figures(run),
        "inputs_json": json.dumps(run.inputs.get("scenario"), indent=2),
        "levers": lever_rows(run) if succeeded else [],
        "sensitivity": run.sensitivity if succeeded else None,
        "bill": (run.budget or {}).get("bill") if succeeded else None,
        "can_author": can_author(request.user, run.scenario.project.organisation),
        "budget_refusal": RUN_DOES_NOT_FIT.format(run=run.pk) if run.does_not_fit else "",
    }
    return render(request, "planner/run_detail.html", context)


def lever_rows(run: EstimationRun) -> list[dict[str, Any]]:
    """The run's levers as the page shows them: with their index (for Apply) and the change
    in days and cost in words."""
    rows = []
    deadline = run.scenario.project.deadline
    left = (deadline - timezone.localdate()).days if deadline else None
    for index, lever in enumerate(run.levers or []):
        saved = Decimal(lever["cost_saved"])
        days = float(lever["training_days_saved"])
        rows.append(
            {
                **lever,
                "index": index,
                "saves": saved > 0,
                # Finishing after the project's deadline (from today), when it has one.
                "late": left is not None and float(lever["training_days"]) > left,
                "cost_change": f"saves {saved:,.0f}" if saved > 0 else f"costs {-saved:,.0f} more",
                "days_change": f"{days:,.1f} days sooner"
                if days >= 0
                else f"{-days:,.1f} days later",
            }
        )
    return rows


def status_data(run: EstimationRun) -> dict[str, object]:
    state = run.state
    return {
        "id": run.pk,
        "status": run.status,
        "status_label": run.status_label,  # "Does not fit in memory" rather than "Succeeded"
        # waiting, running, worker_lost, succeeded or failed: what the bar shows
        "state": state.code,
        "state_message": state.message,
        "progress": run.progress,
        "progress_message": run.progress_message,
        "error": run.error,
        "finished": run.is_finished,
        "url": run.get_absolute_url(),
    }


@never_cache
@login_required
@require_GET
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    """The run's status for the page's progress bar, polled about once a second."""
    run = get_object_or_404(selectors.runs_for(request.user), pk=pk)
    return JsonResponse(status_data(run))


@login_required
@require_POST
def run_retry(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(selectors.runs_for(request.user), pk=pk)
    try:
        run = services.run_retry(user=request.user, run=run)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Run {run.pk} queued again with the same inputs and seed.")
    return redirect(run)


@login_required
@require_POST
def run_lever_apply(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """Apply one lever of the run: a new scenario in the project with that one change."""
    run = get_object_or_404(selectors.runs_for(request.user), pk=pk)
    try:
        scenario = services.scenario_from_lever(user=request.user, run=run, index=index)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, error.message)
        return redirect(run)
    messages.success(
        request, f"Scenario '{scenario.name}' made with the lever; run it to see its budget."
    )
    return redirect(scenario)
