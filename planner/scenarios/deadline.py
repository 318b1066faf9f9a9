"""A run against its project's deadline: the days left and the core's check of its Monte Carlo.

Projects have no planned start, so the days available run from today to the deadline (a plan
that starts later has fewer). The probability and the verdict are
:func:`estimator.core.deadline.deadline_check`'s; this module only finds their inputs.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.utils import timezone

from estimator.core.deadline import DeadlineCheck, deadline_check
from planner.scenarios.models import EstimationRun, Project


def days_available(project: Project, *, today: date | None = None) -> int | None:
    """Whole days from ``today`` (the local date by default) to the project's deadline;
    None without a deadline. Negative once the deadline has passed. [days]"""
    if project.deadline is None:
        return None
    return (project.deadline - (today or timezone.localdate())).days


def run_deadline(
    run: EstimationRun, *, project: Project | None = None, today: date | None = None
) -> DeadlineCheck | None:
    """``run``'s deadline check from its Monte Carlo; None before the run has one."""
    montecarlo = run.montecarlo or {}
    if "training_days" not in montecarlo:
        return None
    project = project or run.scenario.project
    return deadline_check(
        montecarlo["training_days"],
        days_available(project, today=today),
        montecarlo.get("training_days_quantiles"),
    )


def run_deadline_json(
    run: EstimationRun, *, project: Project | None = None, today: date | None = None
) -> dict[str, Any] | None:
    """:func:`run_deadline` as JSON, with the deadline's date (as the API and snapshot keep it)."""
    project = project or run.scenario.project
    check = run_deadline(run, project=project, today=today)
    if check is None:
        return None
    deadline = project.deadline.isoformat() if project.deadline else None
    return {"deadline": deadline, **check.as_dict()}
