"""The budget-request pages through Django's test client: lists, the form, the request page,
its decisions, and the sign-off pack downloads.

Runs are started with ``run_start`` and executed with ``run_execute`` (the worker's service)
inside ``django_capture_on_commit_callbacks(execute=False)``, so the same tests hold in the
embedded mode and on PostgreSQL + Redis.
"""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from openpyxl import load_workbook
from pypdf import PdfReader

from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
    budget_request_update,
)
from planner.budgets.snapshot import snapshot_hash
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import run_execute, run_start, scenario_create
from pricing.models import PriceEntry
from tests.planner.conftest import list_price, small_spec, too_big_scenario, too_big_spec

pytestmark = pytest.mark.django_db

Capture = Any


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _finished_run(capture: Capture, user: User, scenario: Scenario) -> EstimationRun:
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=11, samples=400)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def _add_scenario(user: User, project: Project, name: str, accelerator: str) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=small_spec(accelerator, 64),
        price_source="price_entry",
        price=list_price(accelerator),
        model_preset="llama3-8b",
    )


@pytest.fixture
def runs(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> list[EstimationRun]:
    """Three finished runs of the project: H100 (chosen below), A100 and a second H100 plan."""
    a100 = _add_scenario(requester, scenario.project, "A100 list price", "A100-80GB-SXM")
    h200 = _add_scenario(requester, scenario.project, "H200 list price", "H200-SXM")
    return [
        _finished_run(django_capture_on_commit_callbacks, requester, each)
        for each in (scenario, a100, h200)
    ]


@pytest.fixture
def draft(runs: list[EstimationRun], requester: User) -> BudgetRequest:
    return budget_request_create(
        user=requester,
        run=runs[0],
        title="Llama 3 8B on 64 H100",
        justification="Cheapest plan that meets the summer release.",
        alternatives=runs[1:],
    )


@pytest.fixture
def submitted(draft: BudgetRequest, requester: User) -> BudgetRequest:
    return budget_request_submit(user=requester, request=draft)


def _url(name: str, budget: BudgetRequest) -> str:
    return reverse(f"planner:{name}", args=[budget.pk])


def _text(response: Any) -> str:
    return response.content.decode()


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def _events(budget: BudgetRequest) -> list[str]:
    return list(budget.audit_events.values_list("action", flat=True))


# --- The form --------------------------------------------------------------------------------


def test_the_form_offers_the_other_scenarios_runs_preselected(
    runs: list[EstimationRun], requester: User
) -> None:
    response = _client(requester).get(reverse("planner:budget-create", args=[runs[0].pk]))
    assert response.status_code == 200
    form = response.context["form"]
    assert {run.pk for run in form.fields["alternatives"].queryset} == {runs[1].pk, runs[2].pk}
    assert set(form.initial["alternatives"]) == {runs[1].pk, runs[2].pk}
    budget = runs[0].budget or {}
    default = Decimal(budget["cost"]["p90"]) - Decimal(budget["cost"]["p50"])
    assert form.initial["contingency"] == default
    html = _text(response)
    assert f"{default:,.2f}" in html  # the default contingency is shown
    assert len(re.findall(r'name="alternatives" value="\d+"[^>]*checked', html)) == 2


def test_requesting_a_budget_through_the_page_makes_a_draft(
    runs: list[EstimationRun], requester: User
) -> None:
    client = _client(requester)
    response = client.post(
        reverse("planner:budget-create", args=[runs[0].pk]),
        {
            "title": "Llama 3 8B on 64 H100",
            "justification": "Meets the deadline at the lowest P50.",
            "basis": "p50_contingency",
            "contingency": "1000.00",
            "alternatives": [runs[1].pk],
        },
    )
    budget = BudgetRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == budget.get_absolute_url()
    p50 = Decimal((runs[0].budget or {})["cost"]["p50"])
    assert budget.state == BudgetState.DRAFT
    assert budget.amount == p50 + Decimal("1000.00")
    assert list(budget.alternatives.all()) == [runs[1]]
    page = client.get(budget.get_absolute_url())
    html = _text(page)
    assert 'data-state="draft"' in html
    assert "Not frozen yet" in html
    assert 'data-testid="snapshot-sha256"' not in html
    assert 'data-testid="submit-budget"' in html
    assert 'data-testid="approve-budget"' not in html


def test_the_p90_basis_requests_the_p90_cost(runs: list[EstimationRun], requester: User) -> None:
    _client(requester).post(
        reverse("planner:budget-create", args=[runs[0].pk]),
        {"title": "P90 plan", "justification": "Safety first.", "basis": "p90"},
    )
    budget = BudgetRequest.objects.get()
    assert budget.amount == Decimal((runs[0].budget or {})["cost"]["p90"])


def test_a_service_refusal_shows_on_the_form(runs: list[EstimationRun], requester: User) -> None:
    response = _client(requester).post(
        reverse("planner:budget-create", args=[runs[0].pk]),
        {"title": "Blank reason", "justification": "   ", "basis": "p90"},
    )
    assert response.status_code == 200
    assert response.context["form"].errors["justification"]
    assert not BudgetRequest.objects.exists()


def test_viewers_and_approvers_cannot_request_budgets(
    runs: list[EstimationRun], viewer: User, approver: User
) -> None:
    for user in (viewer, approver):
        response = _client(user).get(reverse("planner:budget-create", args=[runs[0].pk]))
        assert response.status_code == 403
        assert "requester" in _text(response)


def test_the_run_scenario_and_project_pages_offer_request_budget(
    runs: list[EstimationRun], requester: User, draft: BudgetRequest
) -> None:
    client = _client(requester)
    create = reverse("planner:budget-create", args=[runs[0].pk])
    assert create in _text(client.get(runs[0].get_absolute_url()))
    assert create in _text(client.get(runs[0].scenario.get_absolute_url()))
    project_page = _text(client.get(draft.project.get_absolute_url()))
    assert create in project_page
    assert draft.get_absolute_url() in project_page  # the project's budget requests


def test_editing_is_for_drafts_and_keeps_the_diff(
    draft: BudgetRequest, requester: User, runs: list[EstimationRun]
) -> None:
    client = _client(requester)
    assert client.get(_url("budget-edit", draft)).status_code == 200
    response = client.post(
        _url("budget-edit", draft),
        {
            "title": "Llama 3 8B on 64 H100, revised",
            "justification": draft.justification,
            "basis": "p90",
            "alternatives": [runs[1].pk],
            "comment": "P90 after the review",
        },
    )
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.basis == "p90"
    assert draft.title.endswith("revised")
    edited = draft.audit_events.get(action="edited")
    assert edited.comment == "P90 after the review"
    assert edited.changes["basis"] == ["p50_contingency", "p90"]
    html = _text(client.get(draft.get_absolute_url()))
    assert "P90 after the review" in html
    assert 'data-testid="timeline-changes"' in html

    budget_request_submit(user=requester, request=draft)
    response = client.get(_url("budget-edit", draft), follow=True)
    assert "only a draft or a request sent back" in " ".join(_messages(response))


# --- Lists -----------------------------------------------------------------------------------


def test_my_requests_lists_what_i_created(
    draft: BudgetRequest, requester: User, second_requester: User
) -> None:
    mine = _client(requester).get(reverse("planner:budget-list") + "?tab=mine")
    assert [b.pk for b in mine.context["budgets"]] == [draft.pk]
    theirs = _client(second_requester).get(reverse("planner:budget-list") + "?tab=mine")
    assert theirs.context["budgets"] == []
    everything = _client(second_requester).get(reverse("planner:budget-list") + "?tab=all")
    assert [b.pk for b in everything.context["budgets"]] == [draft.pk]


def test_the_approver_queue_lists_what_they_may_decide_and_not_their_own(
    runs: list[EstimationRun],
    submitted: BudgetRequest,
    draft: BudgetRequest,
    approver: User,
    second_approver: User,
    organisation: Organisation,
    outsider: User,
) -> None:
    # Gwen is also a requester: her own submitted request must not be in her queue.
    membership_grant(organisation=organisation, user=second_approver, role=Role.REQUESTER)
    own = budget_request_create(
        user=second_approver, run=runs[1], title="Gwen's own", justification="Mine."
    )
    budget_request_submit(user=second_approver, request=own)
    still_draft = budget_request_create(
        user=second_approver, run=runs[2], title="Not submitted", justification="Later."
    )
    queue = reverse("planner:budget-list") + "?tab=queue"

    finn = _client(approver).get(queue)
    assert {b.pk for b in finn.context["budgets"]} == {submitted.pk, own.pk}
    gwen = _client(second_approver).get(queue)
    assert [b.pk for b in gwen.context["budgets"]] == [submitted.pk]
    assert still_draft.pk not in {b.pk for b in gwen.context["budgets"]}

    budget_request_approve(user=approver, request=own)
    finn = _client(approver).get(queue)
    assert [b.pk for b in finn.context["budgets"]] == [submitted.pk]
    assert 'data-testid="tab-queue"' in _text(finn)

    other = _client(outsider).get(reverse("planner:budget-list") + "?tab=all")
    assert other.context["budgets"] == []


def test_a_request_already_decided_leaves_the_queue_until_resubmitted(
    submitted: BudgetRequest, requester: User, approver: User
) -> None:
    queue = reverse("planner:budget-list") + "?tab=queue"
    client = _client(approver)
    client.post(_url("budget-request-changes", submitted), {"comment": "Add the A100 quote."})
    assert client.get(queue).context["budgets"] == []
    budget_request_submit(user=requester, request=submitted)
    assert [b.pk for b in client.get(queue).context["budgets"]] == [submitted.pk]


# --- The request page and its decisions ------------------------------------------------------


def test_the_request_page_shows_the_figures_hash_and_alternatives(
    submitted: BudgetRequest, approver: User, runs: list[EstimationRun]
) -> None:
    response = _client(approver).get(submitted.get_absolute_url())
    assert response.status_code == 200
    html = _text(response)
    assert submitted.snapshot_sha256 in html
    assert snapshot_hash(submitted.snapshot or {}) == submitted.snapshot_sha256
    assert 'data-testid="snapshot-verified"' in html
    assert len(re.findall(r'data-testid="comparison-row"', html)) == 3
    assert html.count("<svg") >= 3  # the three charts, inline
    assert f"{submitted.amount:,.2f}" in html
    assert 'data-testid="approve-budget"' in html
    assert 'data-testid="reject-budget"' in html
    assert 'data-testid="submit-budget"' not in html
    assert 'data-action="submitted"' in html


def test_approving_through_the_page_updates_state_and_timeline(
    submitted: BudgetRequest, approver: User
) -> None:
    client = _client(approver)
    response = client.post(
        _url("budget-approve", submitted), {"comment": "Within plan."}, follow=True
    )
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.APPROVED
    assert "Approved." in " ".join(_messages(response))
    html = _text(response)
    assert 'data-testid="budget-state" data-state="approved"' in html
    assert 'data-action="approved"' in html
    assert "Within plan." in html
    assert 'data-testid="approve-budget"' not in html
    assert _events(submitted)[-1] == "approved"


def test_rejecting_needs_a_comment_then_ends_the_request(
    submitted: BudgetRequest, approver: User
) -> None:
    client = _client(approver)
    response = client.post(_url("budget-reject", submitted), {"comment": ""}, follow=True)
    assert response.status_code == 200
    assert "Add a comment" in " ".join(_messages(response))
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.SUBMITTED
    assert not BudgetDecision.objects.exists()

    response = client.post(
        _url("budget-reject", submitted), {"comment": "Over the ceiling."}, follow=True
    )
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.REJECTED
    html = _text(response)
    assert 'data-action="rejected"' in html
    assert "Over the ceiling." in html


def test_requesting_changes_sends_it_back_and_the_requester_may_edit_again(
    submitted: BudgetRequest, approver: User, requester: User
) -> None:
    response = _client(approver).post(
        _url("budget-request-changes", submitted), {"comment": "Compare with a quote."}
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.CHANGES_REQUESTED
    html = _text(_client(requester).get(submitted.get_absolute_url()))
    assert 'data-testid="edit-budget"' in html
    assert 'data-testid="submit-budget"' in html
    assert "Compare with a quote." in html
    assert 'data-action="changes_requested"' in html


def test_self_approval_is_refused_at_the_page_and_nothing_changes(
    runs: list[EstimationRun], organisation: Organisation, approver: User
) -> None:
    membership_grant(organisation=organisation, user=approver, role=Role.REQUESTER)
    own = budget_request_create(
        user=approver, run=runs[0], title="Finn's own", justification="Mine to approve?"
    )
    own = budget_request_submit(user=approver, request=own)
    before = (_events(own), own.snapshot_sha256)
    client = _client(approver)
    page = _text(client.get(own.get_absolute_url()))
    assert 'data-testid="approve-budget"' not in page
    assert 'data-testid="sod-note"' in page

    response = client.post(_url("budget-approve", own), {"comment": "LGTM"}, follow=True)
    assert response.status_code == 200
    assert "another approver must decide" in " ".join(_messages(response))
    own.refresh_from_db()
    assert own.state == BudgetState.SUBMITTED
    assert not own.decisions.exists()
    assert (_events(own), own.snapshot_sha256) == before


def test_the_second_approver_is_told_who_was_first(
    submitted: BudgetRequest, approver: User, second_approver: User
) -> None:
    first, second = _client(approver), _client(second_approver)
    second_page = second.get(submitted.get_absolute_url())  # both have the page open
    assert 'data-testid="approve-budget"' in _text(second_page)
    first.post(_url("budget-approve", submitted), {"comment": "Yes."})
    response = second.post(_url("budget-reject", submitted), {"comment": "No."}, follow=True)
    text = " ".join(_messages(response))
    assert "Cannot reject it: the request is approved by finn" in text
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.APPROVED
    assert submitted.decisions.count() == 1
    assert _events(submitted).count("approved") == 1


def test_two_approvals_needed_above_the_threshold(
    draft: BudgetRequest,
    requester: User,
    approver: User,
    second_approver: User,
    organisation: Organisation,
) -> None:
    organisation.two_approvals_above = Decimal(1)
    organisation.save()
    budget_request_submit(user=requester, request=draft)
    response = _client(approver).post(_url("budget-approve", draft), follow=True)
    assert "needs another approver" in " ".join(_messages(response))
    html = _text(response)
    assert "1 of 2 approvals recorded" in html
    assert 'data-testid="decided-note"' in html
    _client(second_approver).post(_url("budget-approve", draft))
    draft.refresh_from_db()
    assert draft.state == BudgetState.APPROVED


def test_close_an_approved_budget(
    submitted: BudgetRequest, approver: User, requester: User
) -> None:
    budget_request_approve(user=approver, request=submitted)
    client = _client(requester)
    assert 'data-testid="close-budget"' in _text(client.get(submitted.get_absolute_url()))
    client.post(_url("budget-close", submitted), {"comment": "Training done."})
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.CLOSED


def test_viewers_read_but_are_refused_decisions(submitted: BudgetRequest, viewer: User) -> None:
    client = _client(viewer)
    page = _text(client.get(submitted.get_absolute_url()))
    for button in ("approve-budget", "submit-budget", "edit-budget", "close-budget"):
        assert f'data-testid="{button}"' not in page
    response = client.post(_url("budget-approve", submitted), {"comment": "?"})
    assert response.status_code == 403
    assert client.get(_url("budget-edit", submitted)).status_code == 403
    assert client.post(_url("budget-submit", submitted)).status_code == 403
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.SUBMITTED


def test_actions_need_post(submitted: BudgetRequest, approver: User) -> None:
    assert _client(approver).get(_url("budget-approve", submitted)).status_code == 405


def test_another_organisation_gets_404_everywhere(submitted: BudgetRequest, outsider: User) -> None:
    client = _client(outsider)
    for name in ("budget-detail", "budget-edit", "budget-pdf", "budget-xlsx", "budget-csv",
                 "budget-snapshot"):  # fmt: skip
        assert client.get(_url(name, submitted)).status_code == 404, name
    for name in ("budget-approve", "budget-reject", "budget-submit", "budget-close"):
        assert client.post(_url(name, submitted), {"comment": "x"}).status_code == 404, name
    assert client.get(reverse("planner:budget-create", args=[submitted.run_id])).status_code == 404
    submitted.refresh_from_db()
    assert submitted.state == BudgetState.SUBMITTED


def test_anonymous_visitors_are_sent_to_log_in(submitted: BudgetRequest) -> None:
    response = Client().get(submitted.get_absolute_url())
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def _queries(client: Client, url: str) -> int:
    """How many queries the page at ``url`` makes, once anything cached is warm."""
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return len(captured.captured_queries)


def test_the_budget_pages_make_as_many_queries_for_four_alternatives_as_for_one(
    runs: list[EstimationRun],
    requester: User,
    approver: User,
    django_capture_on_commit_callbacks: Capture,
) -> None:
    def request_with(alternatives: list[EstimationRun]) -> BudgetRequest:
        return budget_request_create(
            user=requester,
            run=runs[0],
            title="Llama 3 8B",
            justification="Cheapest.",
            alternatives=alternatives,
        )

    draft = request_with(runs[1:2])
    few = budget_request_submit(user=requester, request=request_with(runs[1:2]))
    requester_pages = [draft.get_absolute_url(), _url("budget-edit", draft),
                       reverse("planner:budget-create", args=[runs[0].pk])]  # fmt: skip
    requester_client, approver_client = _client(requester), _client(approver)
    before = [_queries(requester_client, url) for url in requester_pages]
    before.append(_queries(approver_client, few.get_absolute_url()))

    project = runs[0].scenario.project
    more = [
        _finished_run(django_capture_on_commit_callbacks, requester,
                      _add_scenario(requester, project, name, "H100-SXM"))
        for name in ("H100 second plan", "H100 third plan")
    ]  # fmt: skip
    budget_request_update(user=requester, request=draft, alternatives=[*runs[1:], *more])
    many = budget_request_submit(user=requester, request=request_with([*runs[1:], *more]))
    after = [_queries(requester_client, url) for url in requester_pages]
    after.append(_queries(approver_client, many.get_absolute_url()))
    html = _text(requester_client.get(draft.get_absolute_url()))
    assert len(re.findall(r'data-testid="comparison-row"', html)) == 5
    assert after == before


# --- The sign-off pack -----------------------------------------------------------------------


def test_the_pdf_is_a_real_pdf_with_the_project_and_hash(
    submitted: BudgetRequest, approver: User
) -> None:
    response = _client(approver).get(_url("budget-pdf", submitted))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == (
        f'attachment; filename="llama-3-8b-pre-training-budget-{submitted.pk}-signoff.pdf"'
    )
    assert response.content.startswith(b"%PDF")
    reader = PdfReader(io.BytesIO(response.content))
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert submitted.project.name in text
    assert submitted.snapshot_sha256 in text.replace("\n", "")


def test_the_request_page_and_pdf_show_each_runs_whole_run_and_margins(
    submitted: BudgetRequest, approver: User, runs: list[EstimationRun]
) -> None:
    html = _text(_client(approver).get(submitted.get_absolute_url()))
    assert 'data-testid="budget-whole-run"' in html
    for run in runs:
        result = run.result or {}
        assert f"{result['training_days']:.2f} d" in html
        jitter = result["time_per_step_breakdown_s"]["network_jitter"]
        assert f"{jitter:.3f} s per step" in html
        # The approver sees which software stack each run's speed assumes.
        assert f"stack: {result['software_stack']['name']}" in html
    for label in ("Steady-state training", "Allocation idle", "Total training time",
                  "Framework overhead", "Network jitter"):  # fmt: skip
        assert label in html, label
    response = _client(approver).get(_url("budget-pdf", submitted))
    text = "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(response.content)).pages)
    for label in ("Whole run and step margins", "Steady-state training", "Network jitter"):
        assert label in text, label


def test_a_drafts_pdf_says_it_is_not_frozen(draft: BudgetRequest, requester: User) -> None:
    response = _client(requester).get(_url("budget-pdf", draft))
    text = "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(response.content)).pages)
    assert "not frozen" in text.lower()


def test_the_xlsx_opens_with_its_sheets(submitted: BudgetRequest, approver: User) -> None:
    response = _client(approver).get(_url("budget-xlsx", submitted))
    assert response.status_code == 200
    assert response["Content-Type"].startswith(
        "application/vnd.openxmlformats-officedocument.spreadsheetml"
    )
    book = load_workbook(io.BytesIO(response.content))
    assert book.sheetnames == [
        "Summary", "Comparison", "Whole run", "Step margins", "Whole bill", "Levers",
        "Timeline", "Data",
    ]  # fmt: skip
    summary = {row[0]: row[1] for row in book["Summary"].iter_rows(values_only=True)}
    assert summary["Snapshot SHA-256"] == submitted.snapshot_sha256
    assert book["Comparison"].max_row == 4  # header, chosen, two alternatives


def test_the_csv_escapes_cells_a_spreadsheet_would_run(
    runs: list[EstimationRun], requester: User
) -> None:
    payload = "=cmd|' /C calc'!A0"
    budget = budget_request_create(
        user=requester, run=runs[0], title=payload, justification="@SUM(1+1) " + payload
    )
    response = _client(requester).get(_url("budget-csv", budget))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].endswith('-signoff.csv"')
    cells = [cell for row in csv.reader(io.StringIO(_text(response))) for cell in row]
    assert "'" + payload in cells
    assert "'@SUM(1+1) " + payload in cells
    for cell in cells:
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
        assert not re.match(r"-[^0-9]", cell), cell


def test_the_snapshot_download_hashes_to_the_value_on_the_page(
    submitted: BudgetRequest, approver: User, draft: BudgetRequest
) -> None:
    import hashlib

    response = _client(approver).get(_url("budget-snapshot", submitted))
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == submitted.snapshot_sha256


def test_a_draft_has_no_snapshot_to_download(draft: BudgetRequest, requester: User) -> None:
    response = _client(requester).get(_url("budget-snapshot", draft), follow=True)
    assert "no frozen snapshot yet" in " ".join(_messages(response))


def test_audit_events_are_only_added_by_the_pages_actions(
    submitted: BudgetRequest, approver: User
) -> None:
    count = AuditEvent.objects.count()
    client = _client(approver)
    for name in ("budget-detail", "budget-pdf", "budget-xlsx", "budget-csv", "budget-list"):
        args = [] if name == "budget-list" else [submitted.pk]
        client.get(reverse(f"planner:{name}", args=args))
    assert AuditEvent.objects.count() == count  # reading writes nothing


# --- Warnings where money is committed ---------------------------------------------------------


@pytest.fixture
def too_big(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> EstimationRun:
    big = too_big_scenario(scenario.project, requester)
    return _finished_run(django_capture_on_commit_callbacks, requester, big)


def test_the_run_page_says_a_run_does_not_fit(too_big: EstimationRun, requester: User) -> None:
    html = _text(_client(requester).get(reverse("planner:run-detail", args=[too_big.pk])))
    assert 'data-status="does_not_fit"' in html
    guards = html.split('data-testid="run-guards"', 1)[1].split("</section>", 1)[0]
    assert 'data-code="does_not_fit"' in guards
    assert 'data-severity="block"' in guards


def test_the_form_refuses_a_run_that_does_not_fit_and_the_run_page_says_why(
    too_big: EstimationRun, requester: User
) -> None:
    client = _client(requester)
    url = reverse("planner:budget-create", args=[too_big.pk])
    for response in (client.get(url), client.post(url, {"title": "70B", "justification": "Go."})):
        assert response.status_code == 302
        assert response["Location"] == too_big.get_absolute_url()
    assert not BudgetRequest.objects.exists()
    page = _text(client.get(too_big.get_absolute_url()))
    assert 'data-status="does_not_fit"' in page
    assert ">Does not fit in memory<" in page
    assert 'data-testid="request-budget"' not in page
    assert 'data-testid="request-budget-refused"' in page
    assert "not achievable" in page.split('data-testid="budget-refusal"', 1)[1]
    assert 'data-testid="figures-not-achievable"' in page
    assert 'class="kpis unachievable"' in page
    scenario_page = _text(client.get(too_big.scenario.get_absolute_url()))
    assert 'data-status="does_not_fit">Does not fit in memory<' in scenario_page
    assert 'data-status="succeeded"' not in scenario_page
    status = client.get(reverse("planner:run-status", args=[too_big.pk])).json()
    assert (status["status"], status["status_label"]) == ("succeeded", "Does not fit in memory")


def test_a_run_that_fits_is_not_asked_for_a_reason(
    runs: list[EstimationRun], requester: User
) -> None:
    page = _client(requester).get(reverse("planner:budget-create", args=[runs[0].pk]))
    assert "override_reason" not in page.context["form"].fields


def test_the_approver_sees_every_warning_above_the_approve_button(
    runs: list[EstimationRun], requester: User, approver: User
) -> None:
    run = runs[0]
    PriceEntry.objects.filter(pk=run.scenario.price_entry_id or 0).update(
        data_flag="SUSPECT: GPU spot > on-demand - verify"
    )
    draft = budget_request_create(user=requester, run=run, title="8B", justification="Go.")
    budget_request_submit(user=requester, request=draft)
    html = _text(_client(approver).get(_url("budget-detail", draft)))
    form = html.split('data-testid="decision-form"', 1)[1]
    warnings, buttons = form.split('data-testid="approve-budget"', 1)[0], form
    assert 'data-code="price_flagged"' in warnings
    assert "SUSPECT: GPU spot &gt; on-demand - verify" in warnings
    assert 'data-testid="approve-budget"' in buttons


def test_saving_a_scenario_whose_layout_does_not_fit_warns_at_once(
    project: Project, requester: User, prices: None
) -> None:
    client = _client(requester)
    scenario = too_big_scenario(project, requester)
    response = client.post(
        reverse("planner:scenario-json", args=[scenario.pk]),
        {"spec": json.dumps(too_big_spec())},
        follow=True,
    )
    assert any("does not fit in memory" in text for text in _messages(response))
