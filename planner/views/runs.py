"""Estimation runs: start one, watch its progress, read its figures, retry a failed one."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from planner import selectors, services
from planner.errors import NotAllowed, PlannerError
from planner.models import EstimationRun, RunStatus
from planner.services.budget_warnings import run_warnings
from planner.views.common import can_author, forbidden
from planner.views.figures import run_figures


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
    if run.status == RunStatus.QUEUED and run.dispatched_at is None:
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
        "can_author": can_author(request.user, run.scenario.project.organisation),
    }
    return render(request, "planner/run_detail.html", context)


def status_data(run: EstimationRun) -> dict[str, object]:
    state = run.state
    return {
        "id": run.pk,
        "status": run.status,
        "status_label": run.get_status_display(),
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
