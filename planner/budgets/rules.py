"""Who may decide on a budget request, and on which submission: each rule once, its query beside.

Separation of duties: nobody approves, rejects or sends back a request they created, edited or
submitted. An approver decides once on each submission; a request sent back and submitted
again is decided afresh. The decision services (:mod:`planner.budgets.services`) enforce these
rules, the request page offers its buttons by :func:`budget_decision_standing`, and the
approver queue (:func:`planner.budgets.selectors.budget_requests_awaiting`) is
:func:`budget_requests_decidable`: the same rules as one query. Each Python predicate and its
query form sit together here, so that they change together.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Exists, IntegerField, OuterRef, Q, QuerySet, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from lib.actors import Actor
from organisations.models import Organisation, Role
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.common.access import user_roles

#: Audit actions that make a user an author of the request (and so not its approver).
AUTHORING_ACTIONS = ("created", "edited", "submitted")


# --- The current submission --------------------------------------------------------------------


def budget_submission(request: BudgetRequest) -> int:
    """The submission approvers decide on now: the frozen snapshot's number (1 before any)."""
    return int((request.snapshot or {}).get("submission", 1))


def budget_submission_expression() -> Coalesce:
    """:func:`budget_submission` as a database expression on budget-request rows."""
    number = Cast(KeyTextTransform("submission", "snapshot"), IntegerField())
    return Coalesce(number, Value(1))


def budget_current_decisions(request: BudgetRequest) -> QuerySet[BudgetDecision]:
    """The approvers' decisions on the request's current submission."""
    return request.decisions.filter(submission=budget_submission(request))


def budget_approvals_recorded(request: BudgetRequest) -> int:
    """How many approvals the current submission has."""
    approvals = budget_current_decisions(request)
    return approvals.filter(decision=BudgetDecision.Decision.APPROVE).count()


def budget_has_decided(user: Actor, request: BudgetRequest) -> bool:
    """Whether ``user`` has decided on the current submission already."""
    if user.pk is None:
        return False  # an anonymous visitor decides nothing
    return budget_current_decisions(request).filter(approver__pk=user.pk).exists()


# --- Separation of duties ----------------------------------------------------------------------


def budget_authors(request: BudgetRequest) -> set[int]:
    """Who created, edited or submitted the request (user ids): none of them may decide on it."""
    events = request.audit_events.filter(action__in=AUTHORING_ACTIONS, actor__isnull=False)
    return set(events.values_list("actor", flat=True)) | {request.created_by_id}


def budget_is_author(user: Actor, request: BudgetRequest) -> bool:
    return user.pk in budget_authors(request)


def budget_authored_by(user_pk: int) -> Q:
    """:func:`budget_authors` as a filter: the budget requests ``user_pk`` is an author of."""
    events = AuditEvent.objects.filter(
        request=OuterRef("pk"), actor__pk=user_pk, action__in=AUTHORING_ACTIONS
    )
    return Q(created_by__pk=user_pk) | Q(Exists(events))


# --- Both together -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionStanding:
    """Where a user stands on deciding a request: ``may_decide`` and the reasons it is false."""

    is_approver: bool
    is_author: bool
    has_decided: bool
    may_decide: bool


def budget_decision_standing(
    user: Actor, request: BudgetRequest, *, roles: set[str] | None = None
) -> DecisionStanding:
    """Whether ``user`` may approve, reject or send back ``request`` now, and if not, why not.

    ``roles`` are the user's roles in the request's organisation, when the caller has them.
    """
    if roles is None:
        roles = user_roles(user, request.project.organisation)
    is_approver = Role.APPROVER in roles
    is_author = budget_is_author(user, request)
    has_decided = budget_has_decided(user, request)
    submitted = request.state == BudgetState.SUBMITTED
    return DecisionStanding(
        is_approver=is_approver,
        is_author=is_author,
        has_decided=has_decided,
        may_decide=is_approver and submitted and not is_author and not has_decided,
    )


def role_organisations(user: User, role: str) -> QuerySet[Organisation]:
    """The organisations where ``user`` holds ``role`` (every one for a superuser)."""
    if user.is_superuser:
        return Organisation.objects.all()  # superusers hold every role
    return Organisation.objects.filter(memberships__user__pk=user.pk, memberships__role=role)


def budget_requests_decidable(
    user: Actor, requests: QuerySet[BudgetRequest]
) -> QuerySet[BudgetRequest]:
    """The ``requests`` that ``user`` may decide on now, as one query.

    :func:`budget_decision_standing`'s ``may_decide`` for every row: submitted, in an
    organisation where the user approves, not authored by the user, and not yet decided by
    the user on its current submission.
    """
    if not isinstance(user, User) or not user.is_authenticated:
        return requests.none()
    decided = BudgetDecision.objects.filter(
        request=OuterRef("pk"), approver__pk=user.pk, submission=OuterRef("current_submission")
    )
    return (
        requests.filter(
            state=BudgetState.SUBMITTED,
            project__organisation__in=role_organisations(user, Role.APPROVER),
        )
        .exclude(budget_authored_by(user.pk))
        .annotate(current_submission=budget_submission_expression())
        .filter(~Exists(decided))
    )
