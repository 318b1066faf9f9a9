"""Who may decide on a budget request: each Python predicate agrees with its query form."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User

from lib.actors import Actor
from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.budgets.models import BudgetRequest
from planner.budgets.rules import (
    budget_authors,
    budget_decision_standing,
    budget_requests_decidable,
    budget_submission,
    budget_submission_expression,
)
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_request_changes,
    budget_request_submit,
    budget_request_update,
)
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import run_execute, run_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    with django_capture_on_commit_callbacks(execute=False):
        started = run_start(user=requester, scenario=scenario, seed=3, samples=400)
    done = run_execute(run_id=started.pk)
    assert done is not None
    return done


@pytest.fixture
def requests(
    run: EstimationRun,
    organisation: Organisation,
    requester: User,
    approver: User,
    second_approver: User,
) -> dict[str, BudgetRequest]:
    """A draft, a submitted request, one edited by an approver, one decided, one resubmitted."""
    membership_grant(organisation=organisation, user=second_approver, role=Role.REQUESTER)

    def new(title: str) -> BudgetRequest:
        return budget_request_create(user=requester, run=run, title=title, justification="Why.")

    submitted = budget_request_submit(user=requester, request=new("submitted"))
    edited = new("edited by gwen")
    budget_request_update(user=second_approver, request=edited, title="Edited by Gwen")
    edited = budget_request_submit(user=requester, request=edited)
    decided = budget_request_submit(user=requester, request=new("decided"))
    BudgetRequest.objects.filter(pk=decided.pk).update(approvals_required=2)  # stays submitted
    budget_request_approve(user=approver, request=decided)
    resubmitted = budget_request_submit(user=requester, request=new("resubmitted"))
    budget_request_request_changes(user=approver, request=resubmitted, comment="Again.")
    resubmitted = budget_request_submit(user=requester, request=resubmitted)
    return {
        "draft": new("draft"),
        "submitted": submitted,
        "edited": edited,
        "decided": decided,
        "resubmitted": resubmitted,
    }


def test_the_current_submission_in_python_and_in_the_database_agree(
    requests: dict[str, BudgetRequest],
) -> None:
    annotated = BudgetRequest.objects.annotate(number=budget_submission_expression())
    numbers = {request.title: request.number for request in annotated}
    expected = {"draft": 1, "submitted": 1, "Edited by Gwen": 1, "decided": 1, "resubmitted": 2}
    assert numbers == expected
    for request in annotated:
        assert budget_submission(request) == request.number


def test_the_authors_are_whoever_created_edited_or_submitted(
    requests: dict[str, BudgetRequest], requester: User, second_approver: User
) -> None:
    assert budget_authors(requests["submitted"]) == {requester.pk}
    assert budget_authors(requests["edited"]) == {requester.pk, second_approver.pk}


def test_the_approver_queue_is_exactly_the_requests_one_may_decide_on(
    requests: dict[str, BudgetRequest],
    requester: User,
    approver: User,
    second_approver: User,
    viewer: User,
    outsider: User,
) -> None:
    everyone: list[Actor] = [
        requester,
        approver,
        second_approver,
        viewer,
        outsider,
        AnonymousUser(),
    ]
    queues = {}
    for user in everyone:
        queue = set(budget_requests_decidable(user, BudgetRequest.objects.all()))
        for name, request in requests.items():
            request.refresh_from_db()
            standing = budget_decision_standing(user, request)
            assert standing.may_decide == (request in queue), (user, name)
        queues[str(user)] = sorted(r.title for r in queue)
    assert queues == {
        "maya": [],
        "finn": ["Edited by Gwen", "resubmitted", "submitted"],
        "gwen": ["decided", "resubmitted", "submitted"],
        "vera": [],
        "otto": [],
        "AnonymousUser": [],
    }
