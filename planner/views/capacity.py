"""Capacity planning: we must train N tokens by date D within budget B; on what?"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from estimator.core.capacity import meets_limits
from planner import selectors
from planner.capacity import (
    MAX_OPTIONS,
    TIME_BUDGET_S,
    capacity_options,
    capacity_plan,
    capacity_scenario,
    deadline_days,
)
from planner.forms import CapacityForm
from planner.views.figures import layout_text
from planner.views.reads import tokens_text
from pricing.access import visible
from pricing.models import PriceBook

#: Rows of the feasible table; the chart shows every point.
FEASIBLE_SHOWN = 25
#: The chart leaves out clusters slower than this many times the deadline (tables keep them).
CHART_DAYS = 3


def _books(request: HttpRequest) -> QuerySet[PriceBook]:
    """Published books the user sees: public ones and their organisations' own."""
    published = PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED)
    return visible(published, request.user, field="organisation", public=True)


def _initial(request: HttpRequest) -> dict[str, Any]:
    organisation = selectors.organisations_for(request.user).first()
    book = _books(request).order_by("-fetched_at")
    return {
        "model_preset": "llama3-8b",
        "deadline": timezone.localdate() + timedelta(days=60),
        "currency": organisation.base_currency if organisation else "USD",
        "book": book.first(),
        "max_gpus": 1024,
        "include_quotes": True,
        "include_onprem": True,
    }


def _display(point: dict[str, Any], days: int, budget: float | None) -> dict[str, Any]:
    return {
        **point,
        "layout": layout_text(point["parallelism"]),
        "late": not meets_limits(point, deadline_days=days, budget=None),
        "meets": meets_limits(point, deadline_days=days, budget=budget),
    }


def _plan(form: CapacityForm, request: HttpRequest) -> dict[str, Any]:
    data = form.cleaned_data
    today = timezone.localdate()
    chosen = data.get("scenario")
    scenario = capacity_scenario(
        preset_id=data.get("model_preset") or "",
        spec=chosen.spec if chosen is not None else None,
        tokens=data.get("tokens"),
    )
    built = capacity_options(
        book=data.get("book"),
        include_quotes=bool(data.get("include_quotes")),
        include_onprem=bool(data.get("include_onprem")),
        include_spot=bool(data.get("include_spot")),
        currency=data["currency"],
        max_gpus=data["max_gpus"],
        on=today,
        viewer=request.user,
    )
    budget = data.get("budget")
    days = deadline_days(data["deadline"], today=today)
    limit = float(budget) if budget is not None else None
    plan = capacity_plan(
        scenario, built.options, deadline_days=days, budget=limit, skipped=built.skipped
    )
    return {
        "plan": plan,
        "feasible_rows": [_display(p, days, limit) for p in plan.feasible[:FEASIBLE_SHOWN]],
        "frontier_rows": [_display(p, days, limit) for p in plan.frontier],
        "tokens_label": tokens_text(float(scenario["training"]["tokens"])),
        "scenario_used": scenario,
        "deadline_days": days,
        "budget": budget,
        "budget_limit": limit,
        "currency": data["currency"],
    }


def _chart_data(result: dict[str, Any]) -> dict[str, Any]:
    plan = result["plan"]
    days, limit = result["deadline_days"], result["budget_limit"]

    def point(p: dict[str, Any]) -> dict[str, Any]:
        option = p["option"]
        return {
            "x": p["training_days"],
            "y": p["cost"],
            "gpus": p["num_gpus"],
            "accelerator": option.accelerator,
            "option": f"{option.source}: {option.label}",
            "meets": meets_limits(p, deadline_days=days, budget=limit),
        }

    return {
        "currency": result["currency"],
        "deadline_days": days,
        "budget": limit,
        "frontier": [point(p) for p in plan.frontier if p["training_days"] <= CHART_DAYS * days],
        "points": [point(p) for p in plan.points if p["training_days"] <= CHART_DAYS * days],
    }


@login_required
@require_GET
def capacity_plan_page(request: HttpRequest) -> HttpResponse:
    """The form is a GET form: a plan is read-only and its address can be shared."""
    scenarios = selectors.scenarios_for(request.user).order_by("project__name", "name")
    submitted = "deadline" in request.GET
    form = CapacityForm(
        request.GET if submitted else None, initial=_initial(request), scenarios=scenarios
    )
    book_field = form.fields["book"]
    assert isinstance(book_field, ModelChoiceField)
    book_field.queryset = _books(request)  # another organisation's book is no choice
    context: dict[str, Any] = {
        "form": form,
        "max_options": MAX_OPTIONS,
        "time_budget_s": TIME_BUDGET_S,
    }
    if submitted and form.is_valid():
        result = _plan(form, request)
        context.update(result, chart_data=_chart_data(result))
    return render(request, "planner/capacity.html", context)
