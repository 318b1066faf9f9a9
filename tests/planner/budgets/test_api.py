"""Budget requests over the API: create and edit drafts, every transition by every role,
separation of duties, the read-only state, two approvals, the timeline and the snapshot."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from organisations.models import Organisation
from planner.budgets import services
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.serializers import STATE_READ_ONLY
from planner.budgets.snapshot import canonical_json
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import project_create, run_start
from tests.planner.conftest import api_client, finished_run, scenario_add, too_big_scenario

pytestmark = pytest.mark.django_db

LIST_URL = "/api/v1/budgets/"
TRANSITIONS = ("submit", "approve", "reject", "request-changes", "close")
DECISIONS = ("approve", "reject", "request-changes")


def _url(budget: BudgetRequest | int, action: str = "") -> str:
    pk = budget if isinstance(budget, int) else budget.pk
    return f"{LIST_URL}{pk}/{action}/" if action else f"{LIST_URL}{pk}/"


def _state(budget: BudgetRequest) -> str:
    return BudgetRequest.objects.values_list("state", flat=True).get(pk=budget.pk)


def _draft(user: User, run: EstimationRun, title: str = "Llama 3 8B budget") -> BudgetRequest:
    return services.budget_request_create(
        user=user, run=run, title=title, justification="Pre-training for the Q3 release"
    )


def _submitted(user: User, run: EstimationRun, title: str = "Llama 3 8B budget") -> BudgetRequest:
    return services.budget_request_submit(user=user, request=_draft(user, run, title))


@pytest.fixture
def draft(requester: User, budget_run: EstimationRun) -> BudgetRequest:
    return _draft(requester, budget_run)


@pytest.fixture
def submitted(requester: User, draft: BudgetRequest) -> BudgetRequest:
    return services.budget_request_submit(user=requester, request=draft)


@pytest.fixture
def changes_requested(approver: User, submitted: BudgetRequest) -> BudgetRequest:
    return services.budget_request_request_changes(
        user=approver, request=submitted, comment="Cut the contingency"
    )


@pytest.fixture
def approved(approver: User, submitted: BudgetRequest) -> BudgetRequest:
    return services.budget_request_approve(user=approver, request=submitted)


@pytest.fixture
def rejected(approver: User, submitted: BudgetRequest) -> BudgetRequest:
    return services.budget_request_reject(user=approver, request=submitted, comment="Too dear")


@pytest.fixture
def closed(requester: User, approved: BudgetRequest) -> BudgetRequest:
    return services.budget_request_close(user=requester, request=approved)


def _as(request: pytest.FixtureRequest, user_fixture: str) -> APIClient:
    return api_client(request.getfixturevalue(user_fixture))


# --- Create ---------------------------------------------------------------------------------


def test_create_makes_a_draft_priced_from_the_run(
    requester_api: APIClient, requester: User, budget_run: EstimationRun, scenario: Scenario
) -> None:
    other = scenario_add(scenario.project, requester, "H100 on 128", 128)
    alternative = finished_run(other, requester)
    response = requester_api.post(
        LIST_URL,
        {
            "run": budget_run.pk,
            "title": "Llama 3 8B budget",
            "justification": "Pre-training for the Q3 release",
            "alternatives": [alternative.pk],
        },
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    cost = budget_run.budget["cost"]  # type: ignore[index]
    p50, p90 = Decimal(cost["p50"]), Decimal(cost["p90"])
    assert (body["state"], body["run"], body["alternatives"]) == (
        "draft",
        budget_run.pk,
        [alternative.pk],
    )
    assert (body["project"], body["basis"], body["currency"]) == (
        scenario.project_id,
        "p50_contingency",
        budget_run.budget["currency"],  # type: ignore[index]
    )
    # Money is decimal text; the default contingency is P90 - P50, so the amount is P90.
    assert (Decimal(body["contingency"]), Decimal(body["amount"])) == (p90 - p50, p90)
    assert isinstance(body["amount"], str)
    assert (body["snapshot"], body["snapshot_sha256"], body["decisions"]) == (None, "", [])
    assert (body["created_by"], body["created_by_name"]) == (requester.pk, "maya")
    assert [(e["action"], e["to_state"], e["actor_name"]) for e in body["timeline"]] == [
        ("created", "draft", "maya")
    ]
    assert BudgetRequest.objects.get(pk=body["id"]).state == BudgetState.DRAFT


def test_create_on_the_p90_basis_with_a_contingency_ignores_it(
    requester_api: APIClient, budget_run: EstimationRun
) -> None:
    response = requester_api.post(
        LIST_URL,
        {
            "run": budget_run.pk,
            "title": "P90",
            "justification": "Safe side",
            "basis": "p90",
            "contingency": "1.00",
        },
    )
    assert response.status_code == 201, response.json()
    p90 = Decimal(budget_run.budget["cost"]["p90"])  # type: ignore[index]
    assert Decimal(response.json()["amount"]) == p90


def test_create_refuses_a_state(requester_api: APIClient, budget_run: EstimationRun) -> None:
    response = requester_api.post(
        LIST_URL,
        {"run": budget_run.pk, "title": "t", "justification": "j", "state": "approved"},
    )
    assert response.status_code == 400
    assert response.json() == {"state": [STATE_READ_ONLY]}
    assert not BudgetRequest.objects.exists()


@pytest.mark.parametrize("field", ["run", "alternatives", "supersedes"])
def test_create_with_an_id_of_another_organisation_is_a_400_on_that_field(
    requester_api: APIClient,
    budget_run: EstimationRun,
    foreign_run: EstimationRun,
    outsider: User,
    field: str,
) -> None:
    body: dict[str, Any] = {"run": budget_run.pk, "title": "t", "justification": "j"}
    if field == "run":
        body["run"] = foreign_run.pk
    elif field == "alternatives":
        body["alternatives"] = [foreign_run.pk]
    else:
        body["supersedes"] = _draft(outsider, foreign_run).pk
    response = requester_api.post(LIST_URL, body)
    assert response.status_code == 400
    assert "does not exist" in str(response.json()[field]), response.json()
    assert not BudgetRequest.objects.filter(project__organisation__name="Acme AI Research").exists()


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"run": 999_999}, "run", "does not exist"),
        ({"title": ""}, "title", "blank"),
        ({"title": "   "}, "title", ""),
        ({"basis": "p99"}, "basis", "valid choice"),
        ({"contingency": "-5"}, "contingency", "negative"),
        ({"contingency": "lots"}, "contingency", "valid number"),
    ],
)
def test_create_bad_input_is_a_400_naming_the_field(
    requester_api: APIClient,
    budget_run: EstimationRun,
    changes: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    body = {"run": budget_run.pk, "title": "t", "justification": "j"} | changes
    response = requester_api.post(LIST_URL, body)
    assert response.status_code == 400
    assert reason in str(response.json()[field]), response.json()
    assert not BudgetRequest.objects.exists()


def test_create_from_a_run_that_has_not_finished_is_a_400_on_run(
    requester_api: APIClient, requester: User, scenario: Scenario
) -> None:
    queued = run_start(user=requester, scenario=scenario, seed=1, samples=500)
    response = requester_api.post(LIST_URL, {"run": queued.pk, "title": "t", "justification": "j"})
    assert response.status_code == 400
    assert "has not succeeded" in response.json()["run"][0]


@pytest.fixture
def too_big_run(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    """A succeeded run whose stated layout does not fit in memory."""
    with django_capture_on_commit_callbacks(execute=False):
        return finished_run(too_big_scenario(scenario.project, requester), requester)


def test_a_run_that_does_not_fit_is_a_400_on_run_even_with_an_override_reason(
    requester_api: APIClient, requester: User, too_big_run: EstimationRun
) -> None:
    body = {"run": too_big_run.pk, "title": "70B", "justification": "j"}
    for extra in ({}, {"override_reason": "Finance wants the single-node figure."}):
        refused = requester_api.post(LIST_URL, body | extra, format="json")
        assert refused.status_code == 400
        assert "does not fit in memory" in refused.json()["run"][0]
        assert "not achievable" in refused.json()["run"][0]
    assert not BudgetRequest.objects.exists()


def test_a_run_says_its_memory_verdict(
    requester_api: APIClient, too_big_run: EstimationRun
) -> None:
    body = requester_api.get(f"/api/v1/runs/{too_big_run.pk}/").json()
    assert body["memory_verdict"] == "does_not_fit"
    assert body["result"]["fits_in_memory"] is False


@pytest.mark.parametrize("user_fixture", ["approver", "viewer"])
def test_only_requesters_create_requests(
    request: pytest.FixtureRequest, budget_run: EstimationRun, user_fixture: str
) -> None:
    response = _as(request, user_fixture).post(
        LIST_URL, {"run": budget_run.pk, "title": "t", "justification": "j"}
    )
    assert response.status_code == 403
    assert response.json()["code"] == "not_allowed"
    assert not BudgetRequest.objects.exists()


# --- Edit -----------------------------------------------------------------------------------


def test_patch_edits_a_draft_and_the_timeline_keeps_the_diff(
    requester_api: APIClient, draft: BudgetRequest
) -> None:
    response = requester_api.patch(
        _url(draft), {"title": "Smaller budget", "contingency": "100.00", "comment": "trimmed"}
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["title"], body["contingency"], body["state"]) == (
        "Smaller budget",
        "100.00",
        "draft",
    )
    edited = body["timeline"][-1]
    assert (edited["action"], edited["comment"], edited["actor_name"]) == (
        "edited",
        "trimmed",
        "maya",
    )
    assert edited["changes"]["title"] == ["Llama 3 8B budget", "Smaller budget"]
    assert edited["changes"]["contingency"][1] == "100.00"


@pytest.mark.parametrize(
    "body",
    [{"state": "approved"}, {"state": "approved", "title": "sneaky"}, {"state": "draft"}],
)
def test_patch_cannot_change_the_state(
    requester_api: APIClient, draft: BudgetRequest, body: dict[str, Any]
) -> None:
    response = requester_api.patch(_url(draft), body)
    assert response.status_code == 400
    assert response.json() == {"state": [STATE_READ_ONLY]}
    draft.refresh_from_db()
    assert (draft.state, draft.title) == (BudgetState.DRAFT, "Llama 3 8B budget")
    assert not AuditEvent.objects.filter(request=draft, action="edited").exists()


def test_patch_cannot_change_the_state_of_a_submitted_request_either(
    approver: User, submitted: BudgetRequest
) -> None:
    response = api_client(approver).patch(_url(submitted), {"state": "approved"})
    assert response.status_code == 400
    assert response.json() == {"state": [STATE_READ_ONLY]}
    assert _state(submitted) == BudgetState.SUBMITTED


def test_put_and_delete_are_not_offered(requester_api: APIClient, draft: BudgetRequest) -> None:
    assert requester_api.put(_url(draft), {"title": "x", "justification": "y"}).status_code == 405
    assert requester_api.delete(_url(draft)).status_code == 405
    assert BudgetRequest.objects.filter(pk=draft.pk).exists()


def test_patch_alternatives_with_an_id_of_another_organisation_is_a_400(
    requester_api: APIClient, draft: BudgetRequest, foreign_run: EstimationRun
) -> None:
    response = requester_api.patch(_url(draft), {"alternatives": [foreign_run.pk]})
    assert response.status_code == 400
    assert "does not exist" in response.json()["alternatives"][0]


def test_patch_of_a_submitted_request_is_a_409(
    requester_api: APIClient, submitted: BudgetRequest
) -> None:
    response = requester_api.patch(_url(submitted), {"title": "late change"})
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "transition_refused"
    assert body["detail"].startswith("Cannot edit it: the request is submitted by maya at ")
    submitted.refresh_from_db()
    assert submitted.title == "Llama 3 8B budget"


@pytest.mark.parametrize("user_fixture", ["approver", "viewer"])
def test_only_requesters_edit(
    request: pytest.FixtureRequest, draft: BudgetRequest, user_fixture: str
) -> None:
    response = _as(request, user_fixture).patch(_url(draft), {"title": "mine now"})
    assert response.status_code == 403
    assert response.json()["code"] == "not_allowed"
    draft.refresh_from_db()
    assert draft.title == "Llama 3 8B budget"


# --- Transitions: who may do what ----------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "action", "user_fixture", "comment", "end"),
    [
        ("draft", "submit", "requester", "", "submitted"),
        ("draft", "submit", "second_requester", "", "submitted"),
        ("changes_requested", "submit", "requester", "contingency cut", "submitted"),
        ("submitted", "approve", "approver", "", "approved"),
        ("submitted", "approve", "second_approver", "fine", "approved"),
        ("submitted", "reject", "approver", "Too dear", "rejected"),
        ("submitted", "request-changes", "approver", "Cut it", "changes_requested"),
        ("approved", "close", "requester", "trained", "closed"),
        ("approved", "close", "approver", "", "closed"),
    ],
)
def test_allowed_transitions(
    request: pytest.FixtureRequest,
    start: str,
    action: str,
    user_fixture: str,
    comment: str,
    end: str,
) -> None:
    budget: BudgetRequest = request.getfixturevalue(start)
    response = _as(request, user_fixture).post(_url(budget, action), {"comment": comment})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["id"], body["state"]) == (budget.pk, end)
    assert _state(budget) == end
    last = body["timeline"][-1]
    user = request.getfixturevalue(user_fixture)
    assert (last["from_state"], last["to_state"], last["actor"], last["comment"]) == (
        start,
        end,
        user.pk,
        comment,
    )


@pytest.mark.parametrize(
    ("start", "action", "user_fixture"),
    [
        ("draft", "submit", "approver"),
        ("draft", "submit", "viewer"),
        ("changes_requested", "submit", "viewer"),
        *[("submitted", action, "requester") for action in DECISIONS],
        *[("submitted", action, "second_requester") for action in DECISIONS],
        *[("submitted", action, "viewer") for action in DECISIONS],
        ("approved", "close", "viewer"),
    ],
)
def test_forbidden_transitions_are_a_403_and_change_nothing(
    request: pytest.FixtureRequest, start: str, action: str, user_fixture: str
) -> None:
    budget: BudgetRequest = request.getfixturevalue(start)
    events = AuditEvent.objects.filter(request=budget).count()
    response = _as(request, user_fixture).post(_url(budget, action), {"comment": "because"})
    assert response.status_code == 403
    assert response.json()["code"] == "not_allowed"
    assert _state(budget) == start
    assert AuditEvent.objects.filter(request=budget).count() == events
    assert not BudgetDecision.objects.filter(
        request=budget, approver=request.getfixturevalue(user_fixture)
    ).exists()


@pytest.mark.parametrize("authored_by", ["created", "edited", "submitted"])
@pytest.mark.parametrize("action", DECISIONS)
def test_an_approver_who_wrote_the_request_may_not_decide_on_it(
    requester: User,
    author_approver: User,
    budget_run: EstimationRun,
    authored_by: str,
    action: str,
) -> None:
    author_api = api_client(author_approver)
    creator = author_approver if authored_by == "created" else requester
    budget = _draft(creator, budget_run)
    if authored_by == "edited":
        assert author_api.patch(_url(budget), {"title": "edited"}).status_code == 200
    submitter = author_approver if authored_by == "submitted" else requester
    services.budget_request_submit(user=submitter, request=budget)
    events = AuditEvent.objects.filter(request=budget).count()

    response = author_api.post(_url(budget, action), {"comment": "looks fine to me"})

    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "separation_of_duties"
    assert "You created or edited this request" in body["detail"]
    assert _state(budget) == BudgetState.SUBMITTED
    assert AuditEvent.objects.filter(request=budget).count() == events
    assert not BudgetDecision.objects.filter(request=budget).exists()


def test_an_approver_who_wrote_one_request_decides_on_another(
    author_approver: User, submitted: BudgetRequest
) -> None:
    response = api_client(author_approver).post(_url(submitted, "approve"))
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "approved"


@pytest.mark.parametrize("action", ["reject", "request-changes"])
@pytest.mark.parametrize("body", [{}, {"comment": ""}, {"comment": "   "}])
def test_reject_and_request_changes_need_a_comment(
    approver: User, submitted: BudgetRequest, action: str, body: dict[str, Any]
) -> None:
    response = api_client(approver).post(_url(submitted, action), body)
    assert response.status_code == 400
    assert "say why" in response.json()["comment"][0]
    assert _state(submitted) == BudgetState.SUBMITTED
    assert not BudgetDecision.objects.exists()


@pytest.mark.parametrize(
    ("start", "action", "user_fixture", "doing"),
    [
        ("draft", "approve", "approver", "approve it"),
        ("draft", "reject", "approver", "reject it"),
        ("draft", "request-changes", "approver", "request changes"),
        ("draft", "close", "requester", "close it"),
        ("submitted", "submit", "requester", "submit it"),
        ("submitted", "close", "approver", "close it"),
        ("changes_requested", "approve", "approver", "approve it"),
        ("approved", "submit", "requester", "submit it"),
        ("approved", "approve", "second_approver", "approve it"),
        ("approved", "reject", "second_approver", "reject it"),
        ("rejected", "submit", "requester", "submit it"),
        ("rejected", "close", "requester", "close it"),
        ("closed", "close", "requester", "close it"),
        ("closed", "approve", "second_approver", "approve it"),
    ],
)
def test_transitions_from_the_wrong_state_are_a_409_with_a_message(
    request: pytest.FixtureRequest, start: str, action: str, user_fixture: str, doing: str
) -> None:
    budget: BudgetRequest = request.getfixturevalue(start)
    response = _as(request, user_fixture).post(_url(budget, action), {"comment": "now"})
    assert response.status_code == 409
    body = response.json()
    assert set(body) == {"detail", "code"}
    assert body["code"] == "transition_refused"
    label = BudgetState(start).label.lower()
    assert body["detail"].startswith(f"Cannot {doing}: the request is {label}"), body
    assert _state(budget) == start


def test_the_409_says_who_moved_the_request_on(
    approver: User, second_approver: User, submitted: BudgetRequest
) -> None:
    assert api_client(approver).post(_url(submitted, "approve")).status_code == 200
    response = api_client(second_approver).post(_url(submitted, "reject"), {"comment": "no"})
    assert response.status_code == 409
    assert response.json()["detail"].startswith("Cannot reject it: the request is approved by finn")


# --- Other organisations and viewers ---------------------------------------------------------


def test_an_outsider_cannot_tell_a_request_exists(
    outsider_api: APIClient, submitted: BudgetRequest
) -> None:
    assert outsider_api.get(LIST_URL).json()["results"] == []
    assert outsider_api.get(_url(submitted)).status_code == 404
    assert outsider_api.patch(_url(submitted), {"title": "x"}).status_code == 404
    for action in TRANSITIONS:
        response = outsider_api.post(_url(submitted, action), {"comment": "x"})
        assert response.status_code == 404, action
    assert _state(submitted) == BudgetState.SUBMITTED
    assert outsider_api.get(LIST_URL, {"awaiting": "me"}).json()["results"] == []


def test_a_viewer_reads_requests(viewer_api: APIClient, submitted: BudgetRequest) -> None:
    listed = viewer_api.get(LIST_URL)
    assert listed.status_code == 200
    assert [row["id"] for row in listed.json()["results"]] == [submitted.pk]
    detail = viewer_api.get(_url(submitted))
    assert detail.status_code == 200
    assert detail.json()["snapshot_sha256"] == submitted.snapshot_sha256


def test_anonymous_requests_are_refused(submitted: BudgetRequest) -> None:
    assert APIClient().get(LIST_URL).status_code in (401, 403)
    assert APIClient().post(_url(submitted, "approve")).status_code in (401, 403)


# --- Two approvals ---------------------------------------------------------------------------


def test_above_the_threshold_a_request_needs_two_approvers(
    organisation: Organisation,
    requester_api: APIClient,
    approver: User,
    second_approver: User,
    draft: BudgetRequest,
) -> None:
    organisation.two_approvals_above = draft.amount - Decimal("0.01")
    organisation.save(update_fields=["two_approvals_above"])
    submitted = requester_api.post(_url(draft, "submit"))
    assert submitted.json()["approvals_required"] == 2

    first = api_client(approver).post(_url(draft, "approve"), {"comment": "one"})
    assert first.status_code == 200, first.json()
    assert (first.json()["state"], len(first.json()["decisions"])) == ("submitted", 1)
    assert first.json()["timeline"][-1]["action"] == "approval_recorded"
    again = api_client(approver).post(_url(draft, "approve"))
    assert again.status_code == 409
    assert again.json()["detail"] == "You have already decided on this submission."
    assert _state(draft) == BudgetState.SUBMITTED

    second = api_client(second_approver).post(_url(draft, "approve"), {"comment": "two"})
    assert second.status_code == 200, second.json()
    body = second.json()
    assert body["state"] == "approved"
    assert [(d["approver_name"], d["decision"], d["comment"]) for d in body["decisions"]] == [
        ("finn", "approve", "one"),
        ("gwen", "approve", "two"),
    ]


def test_at_or_below_the_threshold_one_approval_is_enough(
    organisation: Organisation, requester_api: APIClient, approver: User, draft: BudgetRequest
) -> None:
    organisation.two_approvals_above = draft.amount
    organisation.save(update_fields=["two_approvals_above"])
    assert requester_api.post(_url(draft, "submit")).json()["approvals_required"] == 1
    response = api_client(approver).post(_url(draft, "approve"))
    assert response.json()["state"] == "approved"


# --- The timeline and the snapshot -----------------------------------------------------------


def test_the_timeline_of_a_full_flow(
    requester_api: APIClient, approver: User, budget_run: EstimationRun
) -> None:
    approver_api = api_client(approver)
    created = requester_api.post(
        LIST_URL, {"run": budget_run.pk, "title": "Llama budget", "justification": "Q3"}
    )
    pk = created.json()["id"]
    assert requester_api.post(_url(pk, "submit"), {"comment": "please"}).status_code == 200
    sent_back = approver_api.post(_url(pk, "request-changes"), {"comment": "Cut contingency"})
    assert sent_back.status_code == 200
    edited = requester_api.patch(_url(pk), {"contingency": "50.00", "comment": "cut"})
    assert edited.status_code == 200, edited.json()
    assert requester_api.post(_url(pk, "submit"), {"comment": "again"}).status_code == 200
    assert approver_api.post(_url(pk, "approve"), {"comment": "ok"}).status_code == 200

    body = requester_api.get(_url(pk)).json()
    timeline = [
        (e["actor_name"], e["action"], e["from_state"], e["to_state"], e["comment"])
        for e in body["timeline"]
    ]
    assert timeline == [
        ("maya", "created", "", "draft", ""),
        ("maya", "submitted", "draft", "submitted", "please"),
        ("finn", "changes_requested", "submitted", "changes_requested", "Cut contingency"),
        ("maya", "edited", "", "", "cut"),
        ("maya", "submitted", "changes_requested", "submitted", "again"),
        ("finn", "approved", "submitted", "approved", "ok"),
    ]
    created_amount = created.json()["amount"]
    edit = body["timeline"][3]["changes"]
    assert edit["contingency"][1] == "50.00"
    assert edit["amount"][0] == created_amount
    assert [(d["submission"], d["decision"]) for d in body["decisions"]] == [
        (1, "request_changes"),
        (2, "approve"),
    ]
    assert body["snapshot"]["submission"] == 2
    assert body["snapshot"]["request"]["contingency"] == "50.00"
    assert all(e["created_at"] for e in body["timeline"])


def test_the_snapshot_hash_is_the_sha256_of_its_canonical_json(
    requester_api: APIClient, draft: BudgetRequest
) -> None:
    before = requester_api.get(_url(draft)).json()
    assert (before["snapshot"], before["snapshot_sha256"]) == (None, "")

    body = requester_api.post(_url(draft, "submit")).json()
    assert len(body["snapshot_sha256"]) == 64
    assert body["snapshot_sha256"] == hashlib.sha256(canonical_json(body["snapshot"])).hexdigest()
    detail = requester_api.get(_url(draft)).json()
    assert detail["snapshot"] == body["snapshot"]
    assert detail["snapshot_sha256"] == body["snapshot_sha256"]
    assert body["snapshot"]["request"]["amount"] == body["amount"]
    assert body["snapshot"]["chosen"]["run"] == draft.run_id


# --- Listing ----------------------------------------------------------------------------------


def test_list_filters_by_project_and_state(
    requester_api: APIClient,
    requester: User,
    organisation: Organisation,
    budget_run: EstimationRun,
    draft: BudgetRequest,
) -> None:
    sent = _submitted(requester, budget_run, "sent")
    other_project = project_create(user=requester, organisation=organisation, name="Other")

    def ids(**query: Any) -> list[int]:
        response = requester_api.get(LIST_URL, query)
        assert response.status_code == 200, response.json()
        return sorted(row["id"] for row in response.json()["results"])

    assert ids() == sorted([draft.pk, sent.pk])
    assert ids(state="submitted") == [sent.pk]
    assert ids(state="draft") == [draft.pk]
    assert ids(project=draft.project_id) == sorted([draft.pk, sent.pk])
    assert ids(project=other_project.pk) == []
    assert requester_api.get(LIST_URL, {"state": "bribed"}).status_code == 400


def test_list_refuses_a_project_of_another_organisation(
    requester_api: APIClient, foreign_run: EstimationRun
) -> None:
    foreign_project = foreign_run.scenario.project
    response = requester_api.get(LIST_URL, {"project": foreign_project.pk})
    assert response.status_code == 400
    assert "project" in response.json()


def test_list_leaves_out_the_snapshot_and_timeline(
    requester_api: APIClient, submitted: BudgetRequest
) -> None:
    row = requester_api.get(LIST_URL).json()["results"][0]
    assert "snapshot" not in row
    assert "timeline" not in row
    assert row["snapshot_sha256"] == submitted.snapshot_sha256


def _awaiting(user: User) -> list[int]:
    response = api_client(user).get(LIST_URL, {"awaiting": "me"})
    assert response.status_code == 200, response.json()
    return sorted(row["id"] for row in response.json()["results"])


def test_awaiting_me_lists_what_the_user_may_decide_on(
    requester: User,
    approver: User,
    author_approver: User,
    viewer: User,
    budget_run: EstimationRun,
    draft: BudgetRequest,
) -> None:
    theirs = _submitted(requester, budget_run, "theirs")
    own = _submitted(author_approver, budget_run, "own")
    done = services.budget_request_approve(
        user=approver, request=_submitted(requester, budget_run, "done")
    )
    assert done.state == BudgetState.APPROVED

    assert _awaiting(approver) == sorted([theirs.pk, own.pk])
    assert _awaiting(author_approver) == [theirs.pk]  # never their own request
    assert _awaiting(requester) == []  # not an approver
    assert _awaiting(viewer) == []
    assert api_client(approver).get(LIST_URL, {"awaiting": "you"}).status_code == 400


def test_awaiting_me_follows_the_current_submission(
    organisation: Organisation,
    requester: User,
    approver: User,
    second_approver: User,
    draft: BudgetRequest,
) -> None:
    organisation.two_approvals_above = Decimal("0.01")
    organisation.save(update_fields=["two_approvals_above"])
    services.budget_request_submit(user=requester, request=draft)
    services.budget_request_approve(user=approver, request=draft)
    assert _awaiting(approver) == []  # decided on this submission
    assert _awaiting(second_approver) == [draft.pk]

    services.budget_request_request_changes(user=second_approver, request=draft, comment="why?")
    assert _awaiting(second_approver) == []  # no longer submitted
    services.budget_request_submit(user=requester, request=draft)
    assert _awaiting(approver) == [draft.pk]  # a new submission needs new decisions
    assert _awaiting(second_approver) == [draft.pk]


def test_an_approver_who_edited_a_request_does_not_await_it(
    requester: User, author_approver: User, draft: BudgetRequest
) -> None:
    services.budget_request_update(user=author_approver, request=draft, title="tuned")
    services.budget_request_submit(user=requester, request=draft)
    assert _awaiting(author_approver) == []


def _list_queries(api: APIClient, **query: Any) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(LIST_URL, query)
    assert response.status_code == 200
    return len(captured)


def test_the_list_makes_the_same_few_queries_however_many_requests(
    organisation: Organisation,
    requester: User,
    approver: User,
    second_approver: User,
    scenario: Scenario,
    budget_run: EstimationRun,
    django_assert_max_num_queries: Any,
) -> None:
    other = scenario_add(scenario.project, requester, "H100 on 128", 128)
    alternative = finished_run(other, requester)

    organisation.two_approvals_above = Decimal("0.01")
    organisation.save(update_fields=["two_approvals_above"])

    def add(title: str) -> None:
        # Submitted with one of its two approvals: it has a decision and awaits the second.
        budget = services.budget_request_create(
            user=requester,
            run=budget_run,
            title=title,
            justification="j",
            alternatives=[alternative],
        )
        services.budget_request_submit(user=requester, request=budget)
        services.budget_request_approve(user=approver, request=budget)

    add("first")
    api = api_client(second_approver)
    few = _list_queries(api)
    few_awaiting = _list_queries(api, awaiting="me")
    for index in range(5):
        add(f"more {index}")
    with django_assert_max_num_queries(4):  # count, page, alternatives, decisions
        response = api.get(LIST_URL)
    rows = response.json()["results"]
    assert len(rows) == 6
    assert all(len(row["decisions"]) == 1 for row in rows)
    assert all(row["alternatives"] == [alternative.pk] for row in rows)
    assert all(row["project_name"] == scenario.project.name for row in rows)
    assert _list_queries(api) == few
    assert len(_awaiting(second_approver)) == 6
    assert _list_queries(api, awaiting="me") == few_awaiting
