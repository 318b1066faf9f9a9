"""Scenarios side by side: figures, cheapest and fastest marked, charts.

Within one project (which can be saved as a comparison) or across every project of the
user's organisations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from planner.common.errors import NotAllowed, PlannerError
from planner.common.forms import planner_error_add
from planner.common.views import forbidden
from planner.scenarios import selectors, services
from planner.scenarios.forms import ComparisonSaveForm
from planner.scenarios.models import Comparison, Project, Scenario
from planner.scenarios.views.figures import comparison_context

MAX_ID = 2**63
DEFAULT_CURRENCY = "USD"
TOKEN_SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"))


def _wanted(ids: list[str]) -> list[int]:
    # Ids beyond a 64-bit key cannot exist; PostgreSQL would refuse them in an IN (...).
    return [int(value) for value in ids if value.isdigit() and int(value) < MAX_ID]


def _chosen(request: HttpRequest, project: Project, ids: list[str]) -> QuerySet[Scenario]:
    return selectors.scenarios_for(request.user).filter(project=project, pk__in=_wanted(ids))


# --- Like for like --------------------------------------------------------------------------


def _tokens_text(tokens: float) -> str:
    """``2e11`` -> ``200B``: a token count short enough to read in a sentence."""
    for scale, suffix in TOKEN_SCALES:
        if tokens >= scale:
            return f"{tokens / scale:,.4g}{suffix}"
    return f"{tokens:,.0f}"


def _differing(values: Iterable[float]) -> list[float]:
    distinct = sorted(set(values), reverse=True)
    return distinct if len(distinct) > 1 else []


def like_for_like_notes(table: list[dict[str, Any]]) -> list[str]:
    """What differs between the ranked runs besides the hardware and price, in words.

    "Fastest" on 1,024 GPUs against 256 says nothing about which accelerator is faster, and
    "cheapest" over fewer tokens says nothing about the price of a token; a reader new to
    the page should be told before reading the marks.
    """
    scenarios = [item["run"].inputs["scenario"] for item in table if item["run"] is not None]
    notes = []
    gpus = _differing(int(spec["cluster"]["num_gpus"]) for spec in scenarios)
    if gpus:
        sizes = " vs ".join(f"{int(count):,}" for count in gpus)
        notes.append(
            f"Cluster sizes differ: {sizes} GPUs — fastest means fastest as configured, "
            "not per GPU; GPU-hours compare the work the GPUs do."
        )
    tokens = _differing(float(spec["training"]["tokens"]) for spec in scenarios)
    if tokens:
        counts = " vs ".join(_tokens_text(count) for count in tokens)
        notes.append(
            f"Token counts differ: {counts} tokens — cheapest and fastest compare whole runs "
            "of different lengths; the cost per M tokens compares like for like."
        )
    return notes


# --- Within one project ---------------------------------------------------------------------


def _page(
    request: HttpRequest,
    project: Project,
    scenarios: list[Scenario],
    form: ComparisonSaveForm | None,
    comparison: Comparison | None = None,
) -> HttpResponse:
    figures = comparison_context(scenarios, project.organisation.base_currency)
    context = {
        "project": project,
        "scenarios": scenarios,
        "all_scenarios": project.scenarios.all(),
        "chosen_ids": {s.pk for s in scenarios},
        "form": form,
        "comparison": comparison,
        "like_for_like": like_for_like_notes(figures["table"]),
        **figures,
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


# --- Across projects ------------------------------------------------------------------------


def _visible_or_404(request: HttpRequest, ids: list[str]) -> list[Scenario]:
    """The chosen scenarios in the order asked; 404 when one is not the user's to see.

    A scenario of another organisation answers exactly as one that does not exist.
    """
    wanted = list(dict.fromkeys(_wanted(ids)))
    found = selectors.scenarios_for(request.user).in_bulk(wanted)
    if len(found) != len(wanted):
        raise Http404("No such scenario.")
    return [found[pk] for pk in wanted]


def _common_currency(request: HttpRequest, scenarios: list[Scenario]) -> str:
    """The base currency most of the chosen scenarios' organisations use (ties: the first)."""
    currencies = [s.project.organisation.base_currency for s in scenarios]
    if not currencies:
        first = selectors.organisations_for(request.user).order_by("name").first()
        return first.base_currency if first else DEFAULT_CURRENCY
    return Counter(currencies).most_common(1)[0][0]


def _label(scenario: Scenario) -> str:
    return f"{scenario.project.name} · {scenario.name}"


def _charts_with_projects(figures: dict[str, Any]) -> None:
    """Name each chart's scenarios with their project: two projects may both have a
    "Baseline". The charts list the estimated scenarios, and the cost chart only those
    with a cost in the page's currency, in table order."""
    estimated = [item for item in figures["table"] if item["run"] is not None]
    priced = [item for item in estimated if item["row"].cost_p50 is not None]
    charts = figures["chart_data"]
    for point, item in zip(charts["points"], priced, strict=True):
        point["name"] = _label(item["scenario"])
    labels = [_label(item["scenario"]) for item in estimated]
    charts["step"]["labels"] = charts["memory"]["labels"] = labels


@login_required
@require_GET
def cross_project_compare(request: HttpRequest) -> HttpResponse:
    """``/compare/?scenario=1&scenario=2``: scenarios of any of the user's projects."""
    scenarios = _visible_or_404(request, request.GET.getlist("scenario"))
    figures = comparison_context(scenarios, _common_currency(request, scenarios))
    _charts_with_projects(figures)
    context = {
        "cross_project": True,
        "scenarios": scenarios,
        "all_scenarios": selectors.scenarios_across_projects(request.user),
        "chosen_ids": {s.pk for s in scenarios},
        "form": None,  # a saved comparison belongs to one project
        "like_for_like": like_for_like_notes(figures["table"]),
        **figures,
    }
    return render(request, "planner/compare.html", context)
