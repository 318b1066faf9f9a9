"""Reads of the budgets room, scoped to the organisations the user belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from lib.actors import Actor
from organisations.models import Organisation, Role
from planner.budgets.models import BudgetRequest, BudgetState
from planner.budgets.rules import (
    budget_authored_by,
    budget_requests_decidable,
    role_organisations,
)
from planner.scenarios.selectors import projects_for

#: How long an approved request stays in its requester's inbox after the decision. [days]
APPROVED_RECENT_DAYS = 30
#: The most requests each list of the home page's inbox shows; the budget list has them all.
INBOX_SHOWN = 10


def budget_requests_for(user: Actor) -> QuerySet[BudgetRequest]:
    """The requests of the projects in the user's organisations (none for anonymous users)."""
    return BudgetRequest.objects.filter(project__in=projects_for(user))


def budget_requests_awaiting(
    user: Actor, requests: QuerySet[BudgetRequest]
) -> QuerySet[BudgetRequest]:
    """The submitted ``requests`` that ``user`` may still decide on, as one query.

    The rule (separation of duties, one decision per submission) and its query live together
    in :func:`planner.budgets.rules.budget_requests_decidable`.
    """
    return budget_requests_decidable(user, requests)


@dataclass(frozen=True)
class Inbox:
    """What waits for a user, per role, in the organisations where the user holds it.

    ``awaiting``: submitted requests the user may decide on (an approver's queue).
    ``changes_requested``: the user's own requests that an approver sent back.
    ``approved``: the user's own requests approved in the last :data:`APPROVED_RECENT_DAYS`.
    The two last need the requester role in the request's organisation.
    """

    awaiting: QuerySet[BudgetRequest]
    changes_requested: QuerySet[BudgetRequest]
    approved: QuerySet[BudgetRequest]
    approving: QuerySet[Organisation]
    requesting: QuerySet[Organisation]

    @cached_property
    def is_approver(self) -> bool:
        return self.approving.exists()

    @cached_property
    def is_requester(self) -> bool:
        return self.requesting.exists()


def budget_inbox(user: Actor) -> Inbox:
    """The user's inbox: lazy querysets (nothing is read until they are used)."""
    none = BudgetRequest.objects.none()
    if not isinstance(user, User) or not user.is_authenticated:
        nowhere = Organisation.objects.none()
        return Inbox(none, none, none, approving=nowhere, requesting=nowhere)
    visible = budget_requests_for(user).select_related(
        "project__organisation", "created_by", "run__scenario"
    )
    requesting = role_organisations(user, Role.REQUESTER)
    own = visible.filter(budget_authored_by(user.pk), project__organisation__in=requesting)
    since = timezone.now() - timedelta(days=APPROVED_RECENT_DAYS)
    return Inbox(
        awaiting=budget_requests_awaiting(user, visible).order_by("submitted_at", "pk"),
        changes_requested=own.filter(state=BudgetState.CHANGES_REQUESTED).order_by(
            "-updated_at", "-pk"
        ),
        approved=own.filter(state=BudgetState.APPROVED, decided_at__gte=since).order_by(
            "-decided_at", "-pk"
        ),
        approving=role_organisations(user, Role.APPROVER),
        requesting=requesting,
    )


@dataclass(frozen=True)
class InboxCounts:
    """How many requests each list of :class:`Inbox` holds: the navigation's figures."""

    awaiting: int
    changes_requested: int
    approved: int
    approved_days: int = APPROVED_RECENT_DAYS

    @property
    def total(self) -> int:
        return self.awaiting + self.changes_requested + self.approved


def budget_inbox_counts(user: Actor) -> InboxCounts:
    inbox = budget_inbox(user)
    return InboxCounts(
        awaiting=inbox.awaiting.count(),
        changes_requested=inbox.changes_requested.count(),
        approved=inbox.approved.count(),
    )
