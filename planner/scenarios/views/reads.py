"""Read helpers of the pages: the selectors' rows shaped for templates (no writes).

Costs shown against a project's budget ceiling are in the project's currency: a run priced
in another currency counts only when its stored conversion (``budget["converted"]``) is in
that currency; otherwise the page says the figure cannot be compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lib.actors import Actor
from organisations.models import Organisation, Role
from planner.common.access import user_roles
from planner.scenarios import selectors
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario

CENT = Decimal("0.01")
ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


def cost_in(budget: Mapping[str, Any] | None, currency: str, key: str = "p50") -> Decimal | None:
    """A run's cost percentile in ``currency``, or None when no stored rate converts it."""
    if not budget:
        return None
    amount = Decimal(budget["cost"][key])
    if budget["currency"] == currency:
        return amount
    converted = budget.get("converted") or {}
    if converted.get("currency") == currency and "rate" in converted:
        return (amount * Decimal(converted["rate"])).quantize(CENT)
    return None


def tokens_text(tokens: float) -> str:
    """``2e12`` as ``2 T``, ``3.5e11`` as ``350 B``: how planners say token counts."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if tokens >= scale:
            return f"{tokens / scale:,.4g} {suffix}"
    return f"{tokens:,.0f}"


@dataclass
class ScenarioRow:
    """A scenario with its latest run (any status) and its latest successful one."""

    scenario: Scenario
    latest: EstimationRun | None
    succeeded: EstimationRun | None
    currency: str
    ceiling: Decimal | None = None

    @property
    def budget(self) -> dict[str, Any]:
        return (self.succeeded.budget or {}) if self.succeeded else {}

    @property
    def result(self) -> dict[str, Any]:
        return (self.succeeded.result or {}) if self.succeeded else {}

    @property
    def days_p50(self) -> float | None:
        return self.budget["training_days"]["p50"] if self.budget else None

    @property
    def tokens_label(self) -> str:
        return tokens_text(float(self.scenario.spec["training"]["tokens"]))

    @property
    def cost_p50(self) -> Decimal | None:
        return cost_in(self.budget, self.currency, "p50")

    @property
    def cost_p90(self) -> Decimal | None:
        return cost_in(self.budget, self.currency, "p90")

    @property
    def mfu_percent(self) -> float | None:
        return self.result["mfu"] * 100 if self.result else None

    @property
    def within_ceiling(self) -> bool | None:
        """P90 cost at or under the ceiling; None when either is unknown."""
        if self.ceiling is None or self.cost_p90 is None:
            return None
        return self.cost_p90 <= self.ceiling

    @property
    def deadline(self) -> Any:
        """The latest successful run against the project's deadline (a DeadlineCheck), or None."""
        if self.succeeded is None:
            return None
        return run_deadline(self.succeeded, project=self.scenario.project)

    @property
    def is_active(self) -> bool:
        return self.latest is not None and self.latest.status in ACTIVE


def _row(scenario: Scenario, currency: str, ceiling: Decimal | None) -> ScenarioRow:
    runs: list[EstimationRun] = getattr(scenario, "runs_all", [])
    succeeded = next((run for run in runs if run.status == RunStatus.SUCCEEDED), None)
    latest = runs[0] if runs else None
    return ScenarioRow(scenario, latest, succeeded, currency, ceiling)


def scenario_rows(project: Project) -> list[ScenarioRow]:
    """The project's scenarios for its page, costs in the project's currency (two queries)."""
    scenarios = selectors.scenarios_with_latest_run(
        Scenario.objects.filter(project=project).select_related("project")
    )
    return [_row(s, project.currency, project.budget_ceiling) for s in scenarios]


@dataclass
class ProjectSummary:
    """A project's line on the dashboard: its cheapest and fastest estimated scenario."""

    project: Project
    rows: list[ScenarioRow] = field(default_factory=list)

    @property
    def cheapest(self) -> ScenarioRow | None:
        priced = [row for row in self.rows if row.cost_p50 is not None]
        return min(priced, key=lambda row: row.cost_p50 or 0) if priced else None

    @property
    def fastest(self) -> ScenarioRow | None:
        timed = [row for row in self.rows if row.days_p50 is not None]
        return min(timed, key=lambda row: row.days_p50 or 0.0) if timed else None

    @property
    def active_runs(self) -> int:
        return sum(row.is_active for row in self.rows)

    @property
    def failed_runs(self) -> int:
        return sum(bool(row.latest and row.latest.status == RunStatus.FAILED) for row in self.rows)


def project_summaries(user: Actor) -> list[ProjectSummary]:
    """Every project the user can see, newest first, with its scenarios' latest figures."""
    projects = list(selectors.projects_for(user))
    summaries = {project.pk: ProjectSummary(project) for project in projects}
    scenarios = selectors.scenarios_with_latest_run(
        selectors.scenarios_for(user).filter(project__in=[p.pk for p in projects])
    )
    for scenario in scenarios:
        summary = summaries[scenario.project_id]
        project = summary.project
        summary.rows.append(_row(scenario, project.currency, project.budget_ceiling))
    return list(summaries.values())


def author_organisations(user: Actor) -> list[Organisation]:
    """Organisations where ``user`` may create projects (requesters)."""
    return [
        organisation
        for organisation in selectors.organisations_for(user)
        if Role.REQUESTER in user_roles(user, organisation)
    ]


def roles_by_organisation(user: Actor) -> list[tuple[Organisation, list[str]]]:
    labels = dict(Role.choices)
    return [
        (organisation, sorted(labels[role] for role in user_roles(user, organisation)))
        for organisation in selectors.organisations_for(user)
    ]


def dashboard_context(user: Actor) -> dict[str, Any]:
    summaries = project_summaries(user)
    by_organisation: dict[str, list[ProjectSummary]] = defaultdict(list)
    for summary in summaries:
        by_organisation[summary.project.organisation.name].append(summary)
    recent = selectors.runs_for(user).select_related("scenario__project")[:6]
    return {
        "summaries": summaries,
        "recent_runs": list(recent),
        "memberships": roles_by_organisation(user),
        "can_create": bool(author_organisations(user)),
        "running": sum(summary.active_runs for summary in summaries),
    }
