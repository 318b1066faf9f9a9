"""Budget requests: the lists, the form, the request page with its decisions, the sign-off pack.

Every page reads through :func:`planner.scenarios.selectors.projects_for`, so another organisation's
request is a 404. Writes go through :mod:`planner.budgets.services`, which checks roles,
states and separation of duties again; the buttons shown here only spare users a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lib.actors import Actor
from organisations.models import Role
from planner.budgets import packs, selectors, services, signoff
from planner.budgets.forms import BudgetActionForm, BudgetRequestForm, initial_from
from planner.budgets.models import BudgetRequest, BudgetState
from planner.budgets.rules import budget_approvals_recorded, budget_decision_standing
from planner.budgets.services import EDITABLE_STATES, RUN_DOES_NOT_FIT, request_amount
from planner.budgets.snapshot import canonical_json, snapshot_verify
from planner.budgets.warnings import (
    BudgetWarning,
    request_warnings,
    run_warnings,
    warnings_blocking,
)
from planner.common.access import user_roles
from planner.common.errors import NotAllowed, PlannerError
from planner.common.forms import edit_is_stale, form_version, planner_error_add, versioned
from planner.common.views import can_author, forbidden
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.selectors import latest_successful_runs, organisations_for, runs_for

TABS = (("mine", "My requests"), ("queue", "Awaiting my approval"), ("all", "All requests"))


# --- Reads -------------------------------------------------------------------------------------


def requests_for(user: Actor) -> QuerySet[BudgetRequest]:
    """The budget requests of the projects ``user`` can see, with what the pages show."""
    return selectors.budget_requests_for(user).select_related(
        "project__organisation", "created_by", "run__scenario"
    )


def _pk(user: Actor) -> int:
    """The user's id; 0 (nobody) for an anonymous visitor."""
    return int(user.pk or 0)


def is_approver_somewhere(user: Actor) -> bool:
    return any(
        Role.APPROVER in user_roles(user, organisation) for organisation in organisations_for(user)
    )


@dataclass(frozen=True)
class Allowed:
    """Which buttons the request page offers the user."""

    edit: bool
    submit: bool
    decide: bool
    close: bool
    is_approver: bool
    is_author: bool
    has_decided: bool


def allowed_actions(user: Actor, budget: BudgetRequest) -> Allowed:
    roles = user_roles(user, budget.project.organisation)
    requester = Role.REQUESTER in roles
    standing = budget_decision_standing(user, budget, roles=roles)
    editable = budget.state in EDITABLE_STATES
    return Allowed(
        edit=requester and editable,
        submit=requester and editable,
        decide=standing.may_decide,
        close=(requester or standing.is_approver) and budget.state == BudgetState.APPROVED,
        is_approver=standing.is_approver,
        is_author=standing.is_author,
        has_decided=standing.has_decided,
    )


def alternative_runs(run: EstimationRun, keep: Iterable[int] = ()) -> QuerySet[EstimationRun]:
    """The latest successful run of each other scenario of the run's project (and ``keep``):
    one query, however many scenarios the project has."""
    others = Scenario.objects.filter(project_id=run.scenario.project_id).exclude(pk=run.scenario_id)
    latest = latest_successful_runs(others).values("pk")
    return (
        EstimationRun.objects.filter(Q(pk__in=latest) | Q(pk__in=list(keep)))
        .select_related("scenario")
        .order_by("scenario__name", "-pk")
    )


# --- Lists -------------------------------------------------------------------------------------


@login_required
@require_GET
def budget_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    lists = {
        "mine": requests_for(user).filter(created_by__pk=_pk(user)),
        "queue": selectors.budget_requests_awaiting(user, requests_for(user)).order_by(
            "submitted_at"
        ),
        "all": requests_for(user),
    }
    is_approver = is_approver_somewhere(user)
    tab = request.GET.get("tab") or ("queue" if is_approver else "mine")
    if tab not in lists:
        tab = "mine"
    context = {
        "tab": tab,
        "tabs": [(key, label, lists[key].count()) for key, label in TABS],
        "budgets": list(lists[tab]),
        "is_approver": is_approver,
    }
    return render(request, "budgets/list.html", context)


# --- Create and edit ---------------------------------------------------------------------------


def _form_page(
    request: HttpRequest,
    form: BudgetRequestForm,
    run: EstimationRun,
    budget: BudgetRequest | None,
    warnings: list[BudgetWarning],
    *,
    version: str = "",
) -> HttpResponse:
    p90, default_contingency = request_amount(run, BudgetRequest.Basis.P90, None)
    context = {
        "version": version,
        "form": form,
        "run": run,
        "scenario": run.scenario,
        "project": run.scenario.project,
        "budget": budget,
        "figures": run.budget,
        "p50": p90 - default_contingency,
        "p90": p90,
        "default_contingency": default_contingency,
        "warnings": warnings,
    }
    return render(request, "budgets/form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def budget_create(request: HttpRequest, run_pk: int) -> HttpResponse:
    run = get_object_or_404(runs_for(request.user), pk=run_pk)
    project = run.scenario.project
    if not can_author(request.user, project.organisation):
        return forbidden(request, NotAllowed(f"Only a requester of {project.organisation} may "
                                             "request budgets."))  # fmt: skip
    if run.status != RunStatus.SUCCEEDED or not run.budget:
        messages.error(request, "Request a budget from a run that has succeeded.")
        return redirect(run)
    if run.does_not_fit:
        messages.error(request, RUN_DOES_NOT_FIT.format(run=run.pk).capitalize() + ".")
        return redirect(run)
    alternatives = alternative_runs(run)
    contingency = request_amount(run, BudgetRequest.Basis.P90, None)[1]
    warnings = run_warnings(run, project=project)
    form = BudgetRequestForm(
        request.POST or None,
        alternatives=alternatives,
        supersedes=project.budget_requests.filter(state=BudgetState.APPROVED),
        default_contingency=contingency,
        needs_override=bool(warnings_blocking(warnings)),
        initial={
            "title": f"{run.scenario.name} for {project.name}",
            "contingency": contingency,
            "alternatives": [alternative.pk for alternative in alternatives],
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            budget = services.budget_request_create(
                user=request.user, run=run, **form.service_arguments()
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            messages.success(request, "Saved as a draft. Check it, then submit it for approval.")
            return redirect(budget)
    return _form_page(request, form, run, None, warnings)


@login_required
@require_http_methods(["GET", "POST"])
def budget_edit(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    organisation = budget.project.organisation
    if not can_author(request.user, organisation):
        return forbidden(request, NotAllowed(f"Only a requester of {organisation} may edit "
                                             "budget requests."))  # fmt: skip
    if budget.state not in EDITABLE_STATES:
        state = budget.get_state_display().lower()
        messages.error(request, f"The request is {state}: only a draft or a request sent back "
                                "for changes can be edited.")  # fmt: skip
        return redirect(budget)
    current = list(budget.alternatives.all())
    warnings = run_warnings(budget.run, project=budget.project)
    form = BudgetRequestForm(
        request.POST or None,
        alternatives=alternative_runs(budget.run, keep=[run.pk for run in current]),
        default_contingency=request_amount(budget.run, BudgetRequest.Basis.P90, None)[1],
        needs_override=bool(warnings_blocking(warnings) or budget.override_reason),
        initial=versioned(initial_from(budget, current), budget),
    )
    if (
        request.method == "POST"
        and form.is_valid()
        and not edit_is_stale(request, form, budget, what="budget request")
    ):
        try:
            services.budget_request_update(
                user=request.user, request=budget, **form.service_arguments()
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            messages.success(request, "Saved. The audit trail keeps what changed.")
            return redirect(budget)
    return _form_page(request, form, budget.run, budget, warnings, version=form_version(form))


# --- The request page and its actions ----------------------------------------------------------


def _detail_context(user: Actor, budget: BudgetRequest) -> dict[str, Any]:
    context = signoff.signoff_context(budget)
    guards = request_warnings(budget, context["snapshot"])
    transitions = [event for event in context["timeline"] if event.to_state]
    context.update(
        guards=guards,
        guards_total=len(guards.shown) + len(guards.since_submission),
        guards_note=(
            "The approver sees every one of them above the decision buttons."
            if budget.state in EDITABLE_STATES
            else "As frozen in the snapshot at submission, and any that arose since."
        ),
        can=allowed_actions(user, budget),
        action_form=BudgetActionForm(),
        approvals_recorded=budget_approvals_recorded(budget),
        latest_transition=transitions[-1] if transitions else None,
        snapshot_verified=(
            snapshot_verify(budget.snapshot, budget.snapshot_sha256) if budget.snapshot else None
        ),
        successors=list(budget.superseded_by.all()),
    )
    return context


@login_required
@require_GET
def budget_detail(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    return render(request, "budgets/detail.html", _detail_context(request.user, budget))


ACTIONS: dict[str, Callable[..., BudgetRequest]] = {
    "submit": services.budget_request_submit,
    "approve": services.budget_request_approve,
    "reject": services.budget_request_reject,
    "request_changes": services.budget_request_request_changes,
    "close": services.budget_request_close,
}
#: What the user is told, by the state the action left the request in.
DONE = {
    BudgetState.SUBMITTED: "Submitted: the snapshot is frozen and the approvers have been told.",
    BudgetState.APPROVED: "Approved. The requester has been told.",
    BudgetState.REJECTED: "Rejected. The requester has been told.",
    BudgetState.CHANGES_REQUESTED: "Sent back for changes. The requester has been told.",
    BudgetState.CLOSED: "Closed.",
}
APPROVAL_RECORDED = "Your approval is recorded; the request needs another approver's as well."


def _act(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """Parse the comment, call the transition, say how it went on the request page."""
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    comment = BudgetActionForm(request.POST).comment_text()
    try:
        budget = ACTIONS[name](user=request.user, request=budget, comment=comment)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        prefix = "Add a comment: " if error.field == "comment" else ""
        messages.error(request, prefix + error.message)
    else:
        recorded = name == "approve" and budget.state == BudgetState.SUBMITTED
        messages.success(
            request, APPROVAL_RECORDED if recorded else DONE[BudgetState(budget.state)]
        )
    return redirect(budget)


@login_required
@require_POST
def budget_submit(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, "submit")


@login_required
@require_POST
def budget_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, "approve")


@login_required
@require_POST
def budget_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, "reject")


@login_required
@require_POST
def budget_request_changes(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, "request_changes")


@login_required
@require_POST
def budget_close(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, "close")


# --- The sign-off pack -------------------------------------------------------------------------


def _attachment(
    body: bytes | str, content_type: str, budget: BudgetRequest, suffix: str
) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    name = slugify(budget.project.name) or "project"
    response["Content-Disposition"] = f'attachment; filename="{name}-budget-{budget.pk}-{suffix}"'
    return response


@login_required
@require_GET
def budget_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    try:
        body = packs.signoff_pack_file(budget, "pdf")
    except signoff.SignoffUnavailable as error:
        messages.error(request, f"The PDF cannot be made on this server: {error}")
        return redirect(budget)
    return _attachment(body, "application/pdf", budget, "signoff.pdf")


@login_required
@require_GET
def budget_xlsx(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    content_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    return _attachment(
        packs.signoff_pack_file(budget, "xlsx"), content_type, budget, "signoff.xlsx"
    )


@login_required
@require_GET
def budget_csv(request: HttpRequest, pk: int) -> HttpResponse:
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    return _attachment(
        signoff.signoff_csv(budget), "text/csv; charset=utf-8", budget, "signoff.csv"
    )


@login_required
@require_GET
def budget_snapshot(request: HttpRequest, pk: int) -> HttpResponse:
    """The frozen snapshot's canonical bytes: ``sha256sum`` of this file is the page's hash."""
    budget = get_object_or_404(requests_for(request.user), pk=pk)
    if not budget.snapshot:
        messages.error(request, "A draft has no frozen snapshot yet: it is frozen on submission.")
        return redirect(budget)
    return _attachment(canonical_json(budget.snapshot), "application/json", budget, "snapshot.json")
