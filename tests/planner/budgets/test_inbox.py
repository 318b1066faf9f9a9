"""The inbox: what waits for each user, per role, in their own organisations only.

An approver sees the submitted requests they may decide on; a requester sees their requests
sent back with changes requested and those approved lately. The navigation counts them on
every page and the home page lists them; a request of another organisation never appears.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.budgets.models import BudgetRequest
from planner.budgets.selectors import (
    APPROVED_RECENT_DAYS,
    budget_inbox,
    budget_inbox_counts,
)
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_request_changes,
    budget_request_submit,
)
from planner.scenarios.models import EstimationRun
from tests.planner.conftest import _client

pytestmark = pytest.mark.django_db


def _submitted(user: User, run: EstimationRun, title: str) -> BudgetRequest:
    draft = budget_request_create(user=user, run=run, title=title, justification="Cheapest.")
    return budget_request_submit(user=user, request=draft)


def _titles(requests: object) -> set[str]:
    return {request.title for request in requests}  # type: ignore[attr-defined]


@pytest.fixture
def foreign_approver(other_organisation: Organisation) -> User:
    user = User.objects.create_user("olga", password="olga-pass")
    membership_grant(organisation=other_organisation, user=user, role=Role.APPROVER)
    return user


@pytest.fixture
def ours(requester: User, budget_run: EstimationRun) -> BudgetRequest:
    return _submitted(requester, budget_run, "Ours: H100 for the summer")


@pytest.fixture
def theirs(outsider: User, foreign_run: EstimationRun) -> BudgetRequest:
    return _submitted(outsider, foreign_run, "Theirs: Globex LM")


def test_a_submitted_request_awaits_its_organisations_approver(
    ours: BudgetRequest, approver: User, requester: User
) -> None:
    inbox = budget_inbox(approver)
    assert list(inbox.awaiting) == [ours]
    assert inbox.is_approver
    assert not inbox.is_requester
    assert budget_inbox_counts(approver).awaiting == 1
    # The requester has nothing to decide, and nothing sent back or approved yet.
    assert budget_inbox_counts(requester).total == 0


def test_an_approved_request_leaves_the_queue_for_its_requesters_approved_list(
    ours: BudgetRequest, approver: User, requester: User, second_requester: User
) -> None:
    budget_request_approve(user=approver, request=ours, comment="Fine.")
    assert budget_inbox_counts(approver).awaiting == 0
    assert list(budget_inbox(requester).approved) == [ours]
    assert budget_inbox_counts(second_requester).total == 0  # not theirs


def test_an_approval_older_than_the_window_leaves_the_approved_list(
    ours: BudgetRequest, approver: User, requester: User
) -> None:
    budget_request_approve(user=approver, request=ours, comment="Fine.")
    decided = timezone.now() - timedelta(days=APPROVED_RECENT_DAYS, hours=1)
    BudgetRequest.objects.filter(pk=ours.pk).update(decided_at=decided)
    assert budget_inbox_counts(requester).approved == 0


def test_a_request_sent_back_waits_for_its_requester_only(
    ours: BudgetRequest, approver: User, requester: User, second_requester: User
) -> None:
    budget_request_request_changes(user=approver, request=ours, comment="Add the storage.")
    assert list(budget_inbox(requester).changes_requested) == [ours]
    assert budget_inbox_counts(requester).changes_requested == 1
    assert budget_inbox_counts(second_requester).changes_requested == 0
    assert budget_inbox_counts(approver).awaiting == 0  # no longer submitted


def test_another_organisations_requests_never_appear(
    ours: BudgetRequest,
    theirs: BudgetRequest,
    approver: User,
    requester: User,
    outsider: User,
    foreign_approver: User,
) -> None:
    assert _titles(budget_inbox(approver).awaiting) == {ours.title}
    assert _titles(budget_inbox(foreign_approver).awaiting) == {theirs.title}
    budget_request_request_changes(user=approver, request=ours, comment="Add the storage.")
    budget_request_approve(user=foreign_approver, request=theirs, comment="Fine.")
    assert _titles(budget_inbox(requester).changes_requested) == {ours.title}
    assert _titles(budget_inbox(requester).approved) == set()
    assert _titles(budget_inbox(outsider).approved) == {theirs.title}
    assert _titles(budget_inbox(outsider).changes_requested) == set()
    page = _client(approver).get("/").content.decode()
    assert theirs.title not in page


def test_an_author_who_also_approves_does_not_find_their_own_request_to_decide(
    author_approver: User, budget_run: EstimationRun, approver: User
) -> None:
    own = _submitted(author_approver, budget_run, "Ada's own request")
    assert own not in budget_inbox(author_approver).awaiting
    assert own in budget_inbox(approver).awaiting


def test_the_navigation_counts_and_the_home_page_lists_the_inbox(
    ours: BudgetRequest, approver: User, requester: User
) -> None:
    page = _client(approver).get("/").content.decode()
    assert 'data-testid="nav-awaiting"' in page
    assert "1 to decide" in page
    assert f'data-testid="inbox-item" data-budget-id="{ours.pk}"' in page
    # Every page's navigation counts it, not only the home page.
    assert "1 to decide" in _client(approver).get("/budgets/").content.decode()
    budget_request_request_changes(user=approver, request=ours, comment="Add the storage.")
    page = _client(requester).get("/").content.decode()
    assert "1 sent back" in page
    assert f'data-testid="inbox-item" data-budget-id="{ours.pk}"' in page
    assert 'data-testid="nav-awaiting"' not in page


def test_a_user_with_an_empty_inbox_gets_no_counts_in_the_navigation(
    approver: User, requester: User
) -> None:
    page = _client(approver).get("/").content.decode()
    assert 'data-testid="nav-inbox"' not in page
    assert "Nothing awaits your decision." in page
