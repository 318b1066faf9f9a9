"""Reads of the scenarios room, always scoped to the organisations the user belongs to.

A user who is not a member of an object's organisation cannot tell it exists: the
querysets below simply do not contain it, so views answer 404.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery

from lib.actors import Actor
from organisations.selectors import organisations_for
from planner.scenarios.models import Comparison, EstimationRun, Project, RunStatus, Scenario


def projects_for(user: Actor) -> QuerySet[Project]:
    return Project.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "owner"
    )


def scenarios_for(user: Actor) -> QuerySet[Scenario]:
    return Scenario.objects.filter(project__in=projects_for(user)).select_related(
        "project__organisation",
        "price_entry__book",
        "price_entry__provider",
        "vendor_quote",
        "onprem_profile",
    )


def runs_for(user: Actor) -> QuerySet[EstimationRun]:
    return EstimationRun.objects.filter(scenario__in=scenarios_for(user)).select_related(
        "scenario__project__organisation"
    )


def comparisons_for(user: Actor) -> QuerySet[Comparison]:
    return Comparison.objects.filter(project__in=projects_for(user)).select_related(
        "project__organisation"
    )


def scenarios_with_latest_run(scenarios: QuerySet[Scenario]) -> list[Scenario]:
    """The scenarios, each with ``latest_run`` (None before its first run): two queries."""
    runs = EstimationRun.objects.order_by("-created_at")
    listed: list[Scenario] = list(
        scenarios.prefetch_related(Prefetch("runs", queryset=runs, to_attr="runs_all"))
    )
    for scenario in listed:
        scenario.latest_run = scenario.runs_all[0] if scenario.runs_all else None  # type: ignore[attr-defined]
    return listed


def latest_successful_runs(scenarios: QuerySet[Scenario]) -> QuerySet[EstimationRun]:
    """The latest successful run of each of ``scenarios`` that has one, as one query."""
    latest = (
        EstimationRun.objects.filter(scenario=OuterRef("scenario"), status=RunStatus.SUCCEEDED)
        .order_by("-finished_at")
        .values("pk")[:1]
    )
    return EstimationRun.objects.filter(scenario__in=scenarios, pk=Subquery(latest))


def scenarios_across_projects(user: Actor) -> list[Scenario]:
    """Every scenario the user can see, by organisation, project and name, each with
    ``latest_success`` (its latest successful run, or None): two queries."""
    scenarios = scenarios_for(user).order_by(
        "project__organisation__name", "project__name", "project_id", "name", "pk"
    )
    latest = {run.scenario_id: run for run in latest_successful_runs(scenarios)}
    listed = list(scenarios)
    for scenario in listed:
        scenario.latest_success = latest.get(scenario.pk)  # type: ignore[attr-defined]
    return listed


@dataclass
class ComparisonRow:
    """One scenario's figures from its latest successful run (None before it has one)."""

    scenario: Scenario
    run: EstimationRun | None
    cost_currency: str = ""
    cost_p10: Decimal | None = None
    cost_p50: Decimal | None = None
    cost_p90: Decimal | None = None
    requested: Decimal | None = None  # the budget a request on the run asks by default
    cheapest: bool = False
    fastest: bool = False

    @property
    def result(self) -> dict[str, Any]:
        return self.run.result or {} if self.run else {}

    @property
    def budget(self) -> dict[str, Any]:
        return self.run.budget or {} if self.run else {}

    @property
    def days_p50(self) -> float | None:
        return self.budget["training_days"]["p50"] if self.budget else None


def _costs_in(row: ComparisonRow, currency: str) -> None:
    """Fill the row's P10/P50/P90 cost and budget to request in ``currency`` when the run's
    figures allow it."""
    budget = row.budget
    if not budget:
        return
    rate = Decimal(1)
    if budget["currency"] != currency:
        converted = budget.get("converted") or {}
        if converted.get("currency") != currency or "rate" not in converted:
            return
        rate = Decimal(converted["rate"])
    cost = budget["cost"]
    row.cost_p10, row.cost_p50, row.cost_p90 = (
        _converted(cost[k], rate) for k in ("p10", "p50", "p90")
    )
    # Runs priced before the budget kept its request figure ask P50 + (P90 - P50).
    row.requested = _converted(budget.get("requested", cost["p90"]), rate)
    row.cost_currency = currency


def _converted(amount: str, rate: Decimal) -> Decimal:
    value = Decimal(amount)
    return value if rate == 1 else (value * rate).quantize(Decimal("0.01"))


def comparison_rows(scenarios: Iterable[Scenario], currency: str) -> list[ComparisonRow]:
    """Each scenario's latest figures with costs in ``currency``; cheapest and fastest marked.

    Cheapest compares P50 cost, fastest P50 wall-clock days; a scenario without a successful
    run, or whose cost cannot be converted, takes no part in the ranking.
    """
    scenarios = list(scenarios)
    latest: dict[int, EstimationRun] = {}
    succeeded = EstimationRun.objects.filter(scenario__in=scenarios, status="succeeded").order_by(
        "scenario_id", "-finished_at"
    )
    for run in succeeded:  # one query for all scenarios; the newest run of each comes first
        latest.setdefault(run.scenario_id, run)
    rows = []
    for scenario in scenarios:
        row = ComparisonRow(scenario, latest.get(scenario.pk))
        _costs_in(row, currency)
        rows.append(row)
    priced = [row for row in rows if row.cost_p50 is not None]
    timed = [row for row in rows if row.days_p50 is not None]
    if priced:
        min(priced, key=lambda row: row.cost_p50 or Decimal(0)).cheapest = True
    if timed:
        min(timed, key=lambda row: row.days_p50 or 0.0).fastest = True
    return rows
