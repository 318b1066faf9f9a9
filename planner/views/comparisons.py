"""Scenarios of one project side by side: figures, cheapest and fastest marked, charts."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from planner import selectors, services
from planner.errors import NotAllowed, PlannerError
from planner.forms import ComparisonSaveForm, planner_error_add
from planner.models import Comparison, Project, Scenario
from planner.views.common import forbidden
from planner.views.figures import comparison_context

MAX_ID = 2**63


def _chosen(request: HttpRequest, project: Project, ids: list[str]) -> QuerySet[Scenario]:
    # Ids beyond a 64-bit key cannot exist; PostgreSQL would refuse them in an IN (...).
    wanted = [int(value) for value in ids if value.isdigit() and int(value) < MAX_ID]
    return selectors.scenarios_for(request.user).filter(project=project, pk__in=wanted)


def _page(
    request: HttpRequest,
    project: Project,
    scenarios: list[Scenario],
    form: ComparisonSaveForm | None,
    comparison: Comparison | None = None,
) -> HttpResponse:
    context = {
        "project": project,
        "scenarios": scenarios,
        "all_scenarios": project.scenarios.all(),
        "chosen_ids": {s.pk for s in scenarios},
        "form": form,
        "comparison": comparison,
        **comparison_context(scenarios, project.organisation.base_currency),
    }
    return render(request, "planner/compare.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def project_compare(request: HttpRequest, pk: int) -> HttpResponse:
    """``?scenario=1&scenario=2``: compare; POST with a name saves the comparison."""
    project = get_object_or_404(selectors.projects_for(request.user), pk=pk)
    source = request.POST if request.method == "POST" else request.GET
    scenarios = list(_chosen(request, project, source.getlist("scenario")))
    form = ComparisonSaveForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            comparison = services.comparison_create(
                user=request.user,
                project=project,
                name=form.cleaned_data["name"],
                scenarios=scenarios,
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            messages.success(request, f"Saved the comparison '{comparison.name}'.")
            return redirect(comparison)
    return _page(request, project, scenarios, form)


@login_required
@require_GET
def comparison_detail(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = get_object_or_404(selectors.comparisons_for(request.user), pk=pk)
    scenarios = list(
        selectors.scenarios_for(request.user).filter(comparisons=comparison).order_by("name")
    )
    return _page(request, comparison.project, scenarios, None, comparison)
