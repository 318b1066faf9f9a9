"""The diff of two runs: what differs, and how much each difference moved days and cost."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from planner.budgets.models import BudgetState
from planner.budgets.selectors import budget_requests_for
from planner.scenarios.models import EstimationRun, RunStatus
from planner.scenarios.run_diff import RunDiff, run_diff
from planner.scenarios.selectors import runs_for

#: Runs offered in the picker.
PICKER_LIMIT = 50


def _not_succeeded(run: EstimationRun) -> str:
    return (
        f"Run {run.pk} is {run.get_status_display().lower()}: only a succeeded run has figures "
        "to compare. Wait for it to finish, or pick another run."
    )


def _candidates(user: Any, run: EstimationRun) -> list[dict[str, Any]]:
    """The runs to compare ``run`` with: those behind an approved budget of its scenario
    first, then the scenario's other succeeded runs, newest first."""
    approved = (
        budget_requests_for(user)
        .filter(run__scenario=run.scenario, state=BudgetState.APPROVED, run__status="succeeded")
        .exclude(run=run)
        .select_related("run")
        .order_by("-decided_at")
    )
    listed: dict[int, dict[str, Any]] = {}
    for request in approved:
        entry = listed.setdefault(request.run_id, {"run": request.run, "budgets": []})
        entry["budgets"].append(request)
    others = (
        runs_for(user)
        .filter(scenario=run.scenario, status=RunStatus.SUCCEEDED)
        .exclude(pk=run.pk)
        .order_by("-created_at")[:PICKER_LIMIT]
    )
    for other in others:
        listed.setdefault(other.pk, {"run": other, "budgets": []})
    return list(listed.values())


def _other(request: HttpRequest, run: EstimationRun) -> EstimationRun | None:
    """The run named by ``?other=``: one of the user's, of ``run``'s organisation (else 404)."""
    raw = request.GET.get("other", "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise Http404("No such run.")
    other = get_object_or_404(runs_for(request.user), pk=int(raw))
    if other.scenario.project.organisation_id != run.scenario.project.organisation_id:
        raise Http404("No such run.")
    return other


@login_required
@require_GET
def run_diff_page(request: HttpRequest, pk: int) -> HttpResponse:
    """``/runs/<pk>/diff/?other=<id>``: the older run is "before" (``swap=1`` reverses)."""
    run = get_object_or_404(runs_for(request.user), pk=pk)
    other = _other(request, run)
    context: dict[str, Any] = {
        "run": run,
        "other": other,
        "scenario": run.scenario,
        "project": run.scenario.project,
        "problem": "",
        "diff": None,
    }
    if run.status != RunStatus.SUCCEEDED:
        context["problem"] = _not_succeeded(run)
    elif other is None:
        context["candidates"] = _candidates(request.user, run)
    elif other.pk == run.pk:
        context["problem"] = "Pick another run: a run does not differ from itself."
        context["candidates"] = _candidates(request.user, run)
    elif other.status != RunStatus.SUCCEEDED:
        context["problem"] = _not_succeeded(other)
        context["candidates"] = _candidates(request.user, run)
    else:
        before, after = sorted((run, other), key=lambda item: (item.created_at, item.pk))
        if request.GET.get("swap") == "1":
            before, after = after, before
        diff: RunDiff = run_diff(before, after)
        context.update(
            diff=diff,
            before=before,
            after=after,
            swapped=request.GET.get("swap") == "1",
            other_scenario=before.scenario_id != after.scenario_id,
            other_project=before.scenario.project_id != after.scenario.project_id,
        )
    return render(request, "planner/run_diff.html", context)
