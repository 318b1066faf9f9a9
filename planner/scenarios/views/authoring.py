"""What the writing pages of projects and scenarios share: the refusal, the delete step."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Model, ProtectedError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from planner.budgets.models import AuditEvent, BudgetRequest
from planner.common.errors import NotAllowed
from planner.scenarios.models import Project, Scenario

#: Why a row the database protects (``on_delete=PROTECT``) stops a delete, by its model.
PROTECTING_REASONS: dict[type[Model], str] = {
    BudgetRequest: "budget requests were made from its runs",
    AuditEvent: "the audit trail records its history",
}


def refusal(project: Project, action: str) -> NotAllowed:
    return NotAllowed(f"Only a requester of {project.organisation} may {action}.")


def delete_refusal(subject: str, protected: Iterable[Model]) -> str:
    """Why ``subject`` cannot be deleted, from the rows that protect it."""
    reasons = sorted(
        {
            PROTECTING_REASONS.get(type(row), f"{row._meta.verbose_name_plural} refer to it")
            for row in protected
        }
    )
    return (
        f"{subject} cannot be deleted: {' and '.join(reasons)}. Those records are kept, "
        "so nothing was deleted."
    )


def delete_page(
    request: HttpRequest,
    project: Project,
    scenario: Scenario | None = None,
    error: ProtectedError | None = None,
) -> HttpResponse:
    """The confirmation step of deleting ``scenario``, else ``project``.

    With ``error`` the delete was refused: the page says why and lists the budget requests
    in the way, with a 409 (the row is in use, the request itself was fine).
    """
    subject = f"The scenario '{scenario.name}'" if scenario else f"The project '{project.name}'"
    context: dict[str, object] = {
        "project": project,
        "scenario": scenario,
        "subject": subject,
        "cancel_url": (scenario or project).get_absolute_url(),
    }
    if error is not None:
        protected = list(error.protected_objects)
        context["refusal"] = delete_refusal(subject, protected)
        blocking = {row for row in protected if isinstance(row, BudgetRequest)}
        context["blocking"] = sorted(blocking, key=lambda budget: budget.pk)
    status = 200 if error is None else 409
    return render(request, "planner/confirm_delete.html", context, status=status)
