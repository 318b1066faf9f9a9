"""Budget requests: the approval workflow, separation of duties, frozen snapshots, audit trail.

States and the only transitions between them (each one a function below)::

    draft --submit--> submitted --approve--> approved --close--> closed
                                |                    approved --successor approved--> superseded
                                |--reject--> rejected
                                |--request_changes--> changes_requested --submit--> submitted

Every transition locks the request's row (``SELECT ... FOR UPDATE``), checks the state it
finds there, saves the new one and appends an :class:`~planner.budgets.models.AuditEvent`; two
approvers acting at once therefore produce exactly one transition, and the second is told
what happened. Nobody approves, rejects or asks for changes on a request they created or
edited: that rule, and which submission is being decided, live in
:mod:`planner.budgets.rules`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from lib.actors import Actor, actor_user
from lib.updates import Change, audit_diff, model_update
from organisations.models import Role
from planner.budgets import notifications, packs
from planner.budgets.models import TRANSITION_TOKEN, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.rules import (
    budget_approvals_recorded,
    budget_has_decided,
    budget_is_author,
    budget_submission,
)
from planner.budgets.snapshot import snapshot_document, snapshot_freeze
from planner.budgets.warnings import (
    BudgetWarning,
    run_warnings,
    warnings_blocking,
    warnings_override_check,
)
from planner.common.access import AUTHOR_ROLES, role_assert
from planner.common.audit import audit_record
from planner.common.errors import PlannerError, SeparationOfDuties, TransitionRefused
from planner.scenarios.models import EstimationRun, RunStatus
from pricing.errors import PricingError
from pricing.selectors import money_convert

EDITABLE_STATES = (BudgetState.DRAFT, BudgetState.CHANGES_REQUESTED)
#: Why a run whose layout does not fit in memory cannot carry a budget request.
RUN_DOES_NOT_FIT = (
    "run {run} does not fit in memory, so its days and cost are not achievable; change the "
    "scenario (the memory levers show what makes room) and request a budget from a new run"
)
REQUEST_FIELDS = ("title", "justification", "basis", "contingency", "override_reason")


# --- Amounts -----------------------------------------------------------------------------------


def _run_budget(run: EstimationRun) -> dict[str, Any]:
    if run.status != RunStatus.SUCCEEDED or not run.budget:
        raise PlannerError(f"run {run.pk} has not succeeded; request a budget from a finished run",
                           field="run")  # fmt: skip
    if run.does_not_fit:
        raise PlannerError(RUN_DOES_NOT_FIT.format(run=run.pk), field="run")
    return run.budget


def request_amount(
    run: EstimationRun, basis: str, contingency: Decimal | None
) -> tuple[Decimal, Decimal]:
    """(amount, contingency) of a request on ``run``: P50 + contingency, or P90.

    The default contingency is P90 - P50 of the run's cost.
    """
    budget = _run_budget(run)
    p50, p90 = Decimal(budget["cost"]["p50"]), Decimal(budget["cost"]["p90"])
    if basis == BudgetRequest.Basis.P90:
        return p90, p90 - p50
    if basis != BudgetRequest.Basis.P50_CONTINGENCY:
        raise PlannerError(f"must be one of {', '.join(BudgetRequest.Basis.values)}", field="basis")
    contingency = p90 - p50 if contingency is None else contingency
    if contingency < 0:
        raise PlannerError(f"must not be negative, got {contingency}", field="contingency")
    return p50 + contingency, contingency


# --- Transitions' plumbing --------------------------------------------------------------------


def _transition(
    request: BudgetRequest, to_state: str, *, actor: Actor, action: str, comment: str = ""
) -> None:
    from_state = request.state
    request.state = to_state
    request._transition_token = TRANSITION_TOKEN
    try:
        request.save()
    finally:
        request._transition_token = None
    audit_record(
        request=request,
        project_id=request.project_id,
        actor=actor,
        action=action,
        from_state=from_state,
        to_state=to_state,
        comment=comment,
    )
    if request.is_frozen:  # the pack shows the state and the trail: its next edition
        packs.signoff_pack_queue(request)


def _locked(request: BudgetRequest, allowed: Sequence[str], doing: str) -> BudgetRequest:
    """The request's current row, locked; refused unless it is in one of ``allowed``."""
    current = BudgetRequest.objects.select_for_update().get(pk=request.pk)
    if current.state not in allowed:
        last = current.audit_events.exclude(to_state="").order_by("-created_at", "-pk").first()
        by = ""
        if last is not None and last.actor is not None:
            by = f" by {last.actor.get_full_name() or last.actor.get_username()}"
            by += f" at {timezone.localtime(last.created_at):%Y-%m-%d %H:%M}"
        raise TransitionRefused(
            f"Cannot {doing}: the request is {current.get_state_display().lower()}{by}."
        )
    return current


# --- Create and edit -------------------------------------------------------------------------


def _alternatives_check(run: EstimationRun, alternatives: Iterable[EstimationRun]) -> list[int]:
    ids = []
    for alternative in alternatives:
        if alternative.scenario.project_id != run.scenario.project_id:
            raise PlannerError(f"run {alternative.pk} belongs to another project",
                               field="alternatives")  # fmt: skip
        if alternative.status != RunStatus.SUCCEEDED:
            raise PlannerError(f"run {alternative.pk} has not succeeded", field="alternatives")
        if alternative.pk != run.pk:
            ids.append(alternative.pk)
    return ids


def _text_check(name: str, value: str) -> str:
    if not value.strip():
        raise PlannerError("must not be empty", field=name)
    return value.strip()


@transaction.atomic
def budget_request_create(
    *,
    user: Actor,
    run: EstimationRun,
    title: str,
    justification: str,
    basis: str = BudgetRequest.Basis.P50_CONTINGENCY,
    contingency: Decimal | None = None,
    alternatives: Iterable[EstimationRun] = (),
    supersedes: BudgetRequest | None = None,
    override_reason: str = "",
) -> BudgetRequest:
    """A draft request for the budget of ``run``, compared with ``alternatives``.

    Refused when the run has a blocking warning (it does not fit in memory) and
    ``override_reason`` does not say why it should be funded anyway.
    """
    project = run.scenario.project
    role_assert(user, project.organisation, AUTHOR_ROLES, action="request budgets")
    creator = actor_user(user)
    assert creator is not None  # role_assert refused anonymous users
    amount, contingency = request_amount(run, basis, contingency)
    blocking = warnings_blocking(run_warnings(run, project=project))
    override_reason = warnings_override_check(blocking, override_reason)
    alternative_ids = _alternatives_check(run, alternatives)
    if supersedes is not None and (
        supersedes.project_id != project.pk or supersedes.state != BudgetState.APPROVED
    ):
        raise PlannerError("must be an approved request of the same project", field="supersedes")
    request = BudgetRequest.objects.create(
        project=project,
        run=run,
        title=_text_check("title", title),
        justification=_text_check("justification", justification),
        override_reason=override_reason,
        basis=basis,
        amount=amount,
        contingency=contingency,
        currency=_run_budget(run)["currency"],
        supersedes=supersedes,
        created_by=creator,
    )
    request.alternatives.set(alternative_ids)
    changes: dict[str, Any] = {"amount": [None, str(amount)], "run": [None, run.pk]}
    if override_reason:
        changes["override_reason"] = [None, override_reason]
    audit_record(
        request=request,
        project_id=project.pk,
        actor=user,
        action="created",
        to_state=BudgetState.DRAFT,
        changes=changes,
        comment=_overridden(blocking, override_reason),
    )
    return request


def _overridden(blocking: Sequence[BudgetWarning], override_reason: str) -> str:
    """The audit comment of a request that goes ahead despite blocking warnings."""
    if not blocking or not override_reason:
        return ""
    what = "; ".join(warning.message for warning in blocking)
    return (
        f"Requested despite a blocking warning: the run {what}. Override reason: {override_reason}"
    )


@transaction.atomic
def budget_request_update(
    *,
    user: Actor,
    request: BudgetRequest,
    alternatives: Iterable[EstimationRun] | None = None,
    comment: str = "",
    **changes: Any,
) -> BudgetRequest:
    """Edit a draft (or a request sent back for changes); the audit trail keeps the diff.

    The amount and contingency are derived again from the basis, so they appear in the diff
    whenever an edit moves them.
    """
    role_assert(user, request.project.organisation, AUTHOR_ROLES, action="edit budget requests")
    current = _locked(request, EDITABLE_STATES, "edit it")
    unknown = set(changes) - set(REQUEST_FIELDS)
    if unknown:  # before any other check: the amount, say, is never the caller's to set
        raise PlannerError("cannot be changed", field=sorted(unknown)[0])
    values = _request_values(current, changes)
    blocking: list[BudgetWarning] = []
    if values.get("override_reason", current.override_reason) != current.override_reason:
        # A reason given or taken back: never taken back while the run is blocked.
        blocking = warnings_blocking(run_warnings(current.run, project=current.project))
        values["override_reason"] = warnings_override_check(blocking, values["override_reason"])
    changed = model_update(current, values, allowed=(*REQUEST_FIELDS, "amount"),
                           refuse=PlannerError)  # fmt: skip
    if alternatives is not None:
        moved = _alternatives_set(current, alternatives)
        if moved is not None:
            changed["alternatives"] = moved
    if changed:
        if "override_reason" in changed:
            overridden = _overridden(blocking, current.override_reason)
            comment = "\n\n".join(filter(None, [comment, overridden]))
        audit_record(request=current, project_id=current.project_id, actor=user,
                     action="edited", changes=audit_diff(changed), comment=comment)  # fmt: skip
    return current


def _request_values(current: BudgetRequest, changes: dict[str, Any]) -> dict[str, Any]:
    """The checked ``changes`` with the amount and contingency they lead to."""
    values = {name: changes[name] for name in REQUEST_FIELDS if name in changes}
    for name in ("title", "justification"):
        if name in values:
            values[name] = _text_check(name, values[name])
    basis = values.get("basis", current.basis)
    keep_contingency = "contingency" in values or basis == current.basis
    wanted = values.get("contingency", current.contingency if keep_contingency else None)
    amount, values["contingency"] = request_amount(current.run, basis, wanted)
    return values | {"amount": amount}


def _alternatives_set(
    current: BudgetRequest, alternatives: Iterable[EstimationRun]
) -> Change | None:
    """Compare the request with ``alternatives`` from now on; the change, if the list moved."""
    before = sorted(current.alternatives.values_list("pk", flat=True))
    current.alternatives.set(_alternatives_check(current.run, alternatives))
    after = sorted(current.alternatives.values_list("pk", flat=True))
    return Change(before, after) if after != before else None


def _approvals_required(request: BudgetRequest) -> int:
    threshold = request.project.organisation.two_approvals_above
    if threshold is None:
        return 1
    base = request.project.organisation.base_currency
    try:
        amount = money_convert(
            amount=request.amount, from_currency=request.currency, to_currency=base,
            on=timezone.localdate(),
        ).amount  # fmt: skip
    except PricingError as error:
        raise PlannerError(
            f"cannot compare the amount with the two-approval threshold: {error.message}",
            field="currency",
        ) from error
    return 2 if amount > threshold else 1


# --- Transitions -----------------------------------------------------------------------------


def _submission_number(request: BudgetRequest) -> int:
    return request.audit_events.filter(action="submitted").count() + 1


@transaction.atomic
def budget_request_submit(
    *, user: Actor, request: BudgetRequest, comment: str = ""
) -> BudgetRequest:
    """Freeze the snapshot and send the request to the approvers.

    Refused, as creating it would be, when its run has a blocking warning and the request no
    override reason.
    """
    role_assert(user, request.project.organisation, AUTHOR_ROLES, action="submit budget requests")
    current = _locked(request, EDITABLE_STATES, "submit it")
    warnings = run_warnings(current.run, project=current.project)
    warnings_override_check(warnings, current.override_reason)
    current.approvals_required = _approvals_required(current)
    document = snapshot_document(current, submission=_submission_number(current), warnings=warnings)
    current.snapshot, current.snapshot_sha256 = snapshot_freeze(document)
    current.submitted_at = timezone.now()
    _transition(current, BudgetState.SUBMITTED, actor=user, action="submitted", comment=comment)
    notifications.notify_submitted(current)
    return current


def _decide(
    user: Actor, request: BudgetRequest, decision: str, comment: str, doing: str
) -> tuple[BudgetRequest, User]:
    # The role first, so that a non-approver hears "not allowed" whatever the state.
    role_assert(user, request.project.organisation, (Role.APPROVER,), action=doing)
    current = _locked(request, (BudgetState.SUBMITTED,), doing)
    approver = actor_user(user)
    assert approver is not None  # role_assert refused anonymous users
    if budget_is_author(approver, current):
        raise SeparationOfDuties(
            f"You created or edited this request, so you may not {doing}: another approver "
            "must decide."
        )
    if budget_has_decided(approver, current):
        raise TransitionRefused("You have already decided on this submission.")
    BudgetDecision.objects.create(
        request=current, submission=budget_submission(current), approver=approver,
        decision=decision, comment=comment,
    )  # fmt: skip
    return current, approver


def _name(user: User) -> str:
    return user.get_full_name() or user.get_username()


@transaction.atomic
def budget_request_approve(
    *, user: Actor, request: BudgetRequest, comment: str = ""
) -> BudgetRequest:
    """Record an approval; the request is approved once it has all the approvals it needs."""
    current, approver = _decide(user, request, "approve", comment, "approve it")
    approvals = budget_approvals_recorded(current)
    if approvals < current.approvals_required:
        audit_record(request=current, project_id=current.project_id, actor=user,
                     action="approval_recorded", comment=comment,
                     changes={"approvals": [approvals - 1, approvals],
                              "required": [None, current.approvals_required]})  # fmt: skip
        packs.signoff_pack_queue(current)
        return current
    current.decided_at = timezone.now()
    _transition(current, BudgetState.APPROVED, actor=user, action="approved", comment=comment)
    if current.supersedes is not None:
        previous = _locked(current.supersedes, (BudgetState.APPROVED,), "supersede it")
        _transition(previous, BudgetState.SUPERSEDED, actor=user, action="superseded",
                    comment=f"superseded by request {current.pk}")  # fmt: skip
    notifications.notify_decided(current, decision="approved", approver=_name(approver),
                                 comment=comment)  # fmt: skip
    return current


def _comment_required(comment: str) -> str:
    if not comment.strip():
        raise PlannerError("say why, so the requester knows what to change", field="comment")
    return comment.strip()


@transaction.atomic
def budget_request_reject(*, user: Actor, request: BudgetRequest, comment: str) -> BudgetRequest:
    comment = _comment_required(comment)
    current, approver = _decide(user, request, "reject", comment, "reject it")
    current.decided_at = timezone.now()
    _transition(current, BudgetState.REJECTED, actor=user, action="rejected", comment=comment)
    notifications.notify_decided(current, decision="rejected", approver=_name(approver),
                                 comment=comment)  # fmt: skip
    return current


@transaction.atomic
def budget_request_request_changes(
    *, user: Actor, request: BudgetRequest, comment: str
) -> BudgetRequest:
    comment = _comment_required(comment)
    current, approver = _decide(user, request, "request_changes", comment, "request changes")
    _transition(current, BudgetState.CHANGES_REQUESTED, actor=user, action="changes_requested",
                comment=comment)  # fmt: skip
    notifications.notify_decided(current, decision="sent back for changes",
                                 approver=_name(approver), comment=comment)  # fmt: skip
    return current


@transaction.atomic
def budget_request_close(
    *, user: Actor, request: BudgetRequest, comment: str = ""
) -> BudgetRequest:
    """Close an approved budget (the training is done or cancelled)."""
    role_assert(user, request.project.organisation, (Role.REQUESTER, Role.APPROVER),
                action="close budgets")  # fmt: skip
    current = _locked(request, (BudgetState.APPROVED,), "close it")
    _transition(current, BudgetState.CLOSED, actor=user, action="closed", comment=comment)
    return current
