"""The approval workflow in the service layer: transitions per role, separation of duties,
the protected state, frozen snapshots, the audit trail, notifications and the sign-off pack."""

from __future__ import annotations

import csv
import io
import threading
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection

from organisations.models import Organisation
from planner.budgets.models import AuditEvent, BudgetRequest, BudgetState, StateChangeRefused
from planner.budgets.services import (
    budget_request_approve,
    budget_request_close,
    budget_request_create,
    budget_request_reject,
    budget_request_request_changes,
    budget_request_submit,
    budget_request_update,
)
from planner.budgets.signoff import signoff_csv, signoff_xlsx
from planner.budgets.signoff.tables import spreadsheet_safe
from planner.budgets.snapshot import canonical_json, snapshot_hash
from planner.common.errors import NotAllowed, PlannerError, SeparationOfDuties, TransitionRefused
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import run_execute, run_start, scenario_create
from pricing.services import quote_update
from tests.planner.conftest import example_quote, small_spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> list[EstimationRun]:
    """Two finished runs of the project: H100 at a list price and H100 under the quote."""
    quoted = scenario_create(
        user=requester,
        project=scenario.project,
        name="H100 quote",
        spec=small_spec("H100-SXM", 128),
        price_source="vendor_quote",
        price=example_quote(),
    )
    finished = []
    with django_capture_on_commit_callbacks(execute=False):
        for each in (quoted, scenario):
            run = run_start(user=requester, scenario=each, seed=3)
            done = run_execute(run_id=run.pk)
            assert done is not None
            finished.append(done)
    return finished


@pytest.fixture
def draft(runs: list[EstimationRun], requester: User) -> BudgetRequest:
    return budget_request_create(
        user=requester,
        run=runs[0],
        title="Llama 3 8B on 128 H100 (quote)",
        justification="Cheapest option that meets the deadline.",
        alternatives=runs[1:],
    )


def _submitted(draft: BudgetRequest, requester: User) -> BudgetRequest:
    return budget_request_submit(user=requester, request=draft, comment="please approve")


def _states(request: BudgetRequest) -> list[tuple[str, str, str]]:
    return [
        (event.action, event.from_state, event.to_state)
        for event in AuditEvent.objects.filter(request=request).order_by("created_at", "pk")
    ]


# --- Amounts ---------------------------------------------------------------------------------


def test_amount_is_p50_plus_contingency_or_p90(runs: list[EstimationRun], requester: User) -> None:
    assert runs[0].budget is not None
    p50, p90 = (Decimal(runs[0].budget["cost"][k]) for k in ("p50", "p90"))
    default = budget_request_create(user=requester, run=runs[0], title="a", justification="b")
    assert (default.amount, default.contingency) == (p90, p90 - p50)
    custom = budget_request_create(user=requester, run=runs[0], title="c", justification="d",
                                   contingency=Decimal("1000.00"))  # fmt: skip
    assert custom.amount == p50 + Decimal("1000.00")
    with pytest.raises(PlannerError) as negative:
        budget_request_create(user=requester, run=runs[0], title="e", justification="f",
                              contingency=Decimal("-1"))  # fmt: skip
    assert negative.value.field == "contingency"


def test_an_edit_records_exactly_what_moved(
    draft: BudgetRequest, requester: User, runs: list[EstimationRun]
) -> None:
    assert runs[0].budget is not None
    before = BudgetRequest.objects.get(pk=draft.pk)
    p50 = Decimal(runs[0].budget["cost"]["p50"])
    budget_request_update(user=requester, request=draft, contingency=Decimal("100.00"),
                          alternatives=[], comment="Trimmed.")  # fmt: skip
    edited = draft.audit_events.get(action="edited")
    assert (edited.comment, edited.changes) == (
        "Trimmed.",
        {
            "contingency": [str(before.contingency), "100.00"],
            "amount": [str(before.amount), str(p50 + Decimal("100.00"))],
            "alternatives": [[runs[1].pk], []],
        },
    )
    budget_request_update(user=requester, request=draft, contingency=Decimal("100.00"),
                          alternatives=[])  # fmt: skip
    assert draft.audit_events.filter(action="edited").count() == 1  # nothing moved: no row
    with pytest.raises(PlannerError) as refused:
        budget_request_update(user=requester, request=draft, amount=Decimal(1))
    assert (refused.value.message, refused.value.field) == ("cannot be changed", "amount")


# --- Transitions per role --------------------------------------------------------------------


def test_full_flow_with_changes_requested_and_resubmission(
    draft: BudgetRequest, requester: User, approver: User
) -> None:
    submitted = _submitted(draft, requester)
    assert submitted.state == BudgetState.SUBMITTED
    back = budget_request_request_changes(user=approver, request=submitted,
                                          comment="Add the on-prem option.")  # fmt: skip
    assert back.state == BudgetState.CHANGES_REQUESTED
    budget_request_update(user=requester, request=back, justification="Now with on-prem.")
    again = budget_request_submit(user=requester, request=back)
    assert again.snapshot is not None
    assert again.snapshot["submission"] == 2
    approved = budget_request_approve(user=approver, request=again, comment="OK for Q3.")
    assert approved.state == BudgetState.APPROVED
    closed = budget_request_close(user=requester, request=approved, comment="Training done.")
    assert closed.state == BudgetState.CLOSED
    assert _states(closed) == [
        ("created", "", "draft"),
        ("submitted", "draft", "submitted"),
        ("changes_requested", "submitted", "changes_requested"),
        ("edited", "", ""),
        ("submitted", "changes_requested", "submitted"),
        ("approved", "submitted", "approved"),
        ("closed", "approved", "closed"),
    ]
    events = list(AuditEvent.objects.filter(request=closed).order_by("created_at", "pk"))
    assert [e.actor for e in events] == [requester, requester, approver, requester, requester,
                                         approver, requester]  # fmt: skip
    assert events[2].comment == "Add the on-prem option."
    assert events[3].changes["justification"] == [
        "Cheapest option that meets the deadline.", "Now with on-prem.",
    ]  # fmt: skip


def test_reject_needs_a_comment_and_ends_the_request(
    draft: BudgetRequest, requester: User, approver: User
) -> None:
    submitted = _submitted(draft, requester)
    with pytest.raises(PlannerError) as refused:
        budget_request_reject(user=approver, request=submitted, comment="  ")
    assert refused.value.field == "comment"
    rejected = budget_request_reject(user=approver, request=submitted, comment="Too dear.")
    assert rejected.state == BudgetState.REJECTED
    with pytest.raises(TransitionRefused, match="rejected"):
        budget_request_submit(user=requester, request=rejected)


@pytest.mark.parametrize(
    ("transition", "state"),
    [
        (budget_request_approve, BudgetState.DRAFT),
        (budget_request_close, BudgetState.DRAFT),
        (budget_request_update, BudgetState.SUBMITTED),
        (budget_request_submit, BudgetState.SUBMITTED),
        (budget_request_close, BudgetState.SUBMITTED),
    ],
)
def test_transitions_from_the_wrong_state_are_refused(
    transition: Any, state: str, draft: BudgetRequest, requester: User, approver: User
) -> None:
    if state == BudgetState.SUBMITTED:
        draft = _submitted(draft, requester)
    user = approver if transition is budget_request_approve else requester
    with pytest.raises(TransitionRefused):
        transition(user=user, request=draft)
    assert BudgetRequest.objects.get(pk=draft.pk).state == state


def test_only_approvers_decide_and_only_requesters_write(
    draft: BudgetRequest, requester: User, second_requester: User, viewer: User, outsider: User
) -> None:
    submitted = _submitted(draft, requester)
    for user in (second_requester, viewer, outsider):
        with pytest.raises(NotAllowed):
            budget_request_approve(user=user, request=submitted)
    for user in (viewer, outsider):
        with pytest.raises(NotAllowed):
            budget_request_create(user=user, run=draft.run, title="x", justification="y")
    assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.SUBMITTED


def test_nobody_approves_a_request_they_created_or_edited(
    draft: BudgetRequest,
    requester: User,
    organisation: Organisation,
    approver: User,
    second_approver: User,
) -> None:
    from organisations.services import membership_grant

    # The approver is also a requester here and edits the draft: now an author of it.
    membership_grant(organisation=organisation, user=approver, role="requester")
    budget_request_update(user=approver, request=draft, title="Edited by Finn")
    submitted = _submitted(draft, requester)
    for decide in (budget_request_approve, budget_request_reject, budget_request_request_changes):
        with pytest.raises(SeparationOfDuties):
            decide(user=approver, request=submitted, comment="mine")
    assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.SUBMITTED
    approved = budget_request_approve(user=second_approver, request=submitted)
    assert approved.state == BudgetState.APPROVED


def test_two_approvals_above_the_organisation_threshold(
    draft: BudgetRequest,
    requester: User,
    organisation: Organisation,
    approver: User,
    second_approver: User,
) -> None:
    Organisation.objects.filter(pk=organisation.pk).update(two_approvals_above=draft.amount - 1)
    submitted = _submitted(BudgetRequest.objects.get(pk=draft.pk), requester)
    assert submitted.approvals_required == 2
    first = budget_request_approve(user=approver, request=submitted, comment="1 of 2")
    assert first.state == BudgetState.SUBMITTED
    with pytest.raises(TransitionRefused, match="already decided"):
        budget_request_approve(user=approver, request=first)
    second = budget_request_approve(user=second_approver, request=first, comment="2 of 2")
    assert second.state == BudgetState.APPROVED


def test_an_approved_successor_supersedes_the_approved_request(
    draft: BudgetRequest, runs: list[EstimationRun], requester: User, approver: User
) -> None:
    first = budget_request_approve(user=approver, request=_submitted(draft, requester))
    successor = budget_request_create(user=requester, run=runs[1], title="Re-estimated",
                                      justification="New quote.", supersedes=first)  # fmt: skip
    budget_request_approve(user=approver, request=_submitted(successor, requester))
    assert BudgetRequest.objects.get(pk=first.pk).state == BudgetState.SUPERSEDED


# --- The protected state ---------------------------------------------------------------------


def test_the_state_cannot_be_changed_outside_the_transitions(draft: BudgetRequest) -> None:
    draft.state = BudgetState.APPROVED
    with pytest.raises(StateChangeRefused):
        draft.save()
    with pytest.raises(StateChangeRefused):
        BudgetRequest.objects.filter(pk=draft.pk).update(state=BudgetState.APPROVED)
    with pytest.raises(StateChangeRefused):
        BudgetRequest.objects.create(
            project=draft.project, run=draft.run, title="x", justification="y", amount=1,
            contingency=0, currency="USD", created_by=draft.created_by, state="approved",
        )  # fmt: skip
    assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.DRAFT


def test_the_audit_trail_is_append_only(draft: BudgetRequest) -> None:
    event = AuditEvent.objects.get(request=draft)
    event.comment = "rewritten"
    with pytest.raises(StateChangeRefused):
        event.save()
    with pytest.raises(StateChangeRefused):
        event.delete()
    with pytest.raises(StateChangeRefused):
        AuditEvent.objects.filter(request=draft).update(comment="x")
    with pytest.raises(StateChangeRefused):
        AuditEvent.objects.filter(request=draft).delete()


# --- Snapshot --------------------------------------------------------------------------------


def test_snapshot_is_frozen_at_submission_with_its_hash(
    draft: BudgetRequest, requester: User
) -> None:
    submitted = _submitted(draft, requester)
    stored = BudgetRequest.objects.get(pk=submitted.pk)
    assert stored.snapshot is not None
    assert stored.snapshot_sha256 == snapshot_hash(stored.snapshot)
    import hashlib

    assert stored.snapshot_sha256 == hashlib.sha256(canonical_json(stored.snapshot)).hexdigest()
    assert stored.snapshot["request"]["amount"] == str(draft.amount)
    assert stored.snapshot["scenario"]["inputs"] == draft.run.inputs
    assert stored.snapshot["montecarlo"]["seed"] == draft.run.seed
    assert stored.snapshot["price_record"]["vendor"].startswith("Example Compute")
    assert [a["run"] for a in stored.snapshot["alternatives"]] == [
        r.pk for r in draft.alternatives.all()
    ]


def test_an_approved_budget_survives_price_and_estimator_changes(
    draft: BudgetRequest,
    requester: User,
    approver: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    approved = budget_request_approve(user=approver, request=_submitted(draft, requester))
    before = BudgetRequest.objects.get(pk=approved.pk)
    pack_before = signoff_csv(before)
    # The vendor re-prices its quote, and the estimator is upgraded.
    quote = example_quote()
    quote_update(quote=quote, price_basis="hourly", price_per_accelerator_hour=Decimal("9.99"),
                 total_price=None, term_months=None)  # fmt: skip
    monkeypatch.setattr("planner.scenarios.services.runs.ESTIMATOR_VERSION", "99.0.0")
    # Re-estimating makes a new run (with the new price); it does not touch the request.
    with django_capture_on_commit_callbacks(execute=False):
        new_run = run_start(user=requester, scenario=draft.run.scenario, seed=3)
        rerun = run_execute(run_id=new_run.pk)
    assert rerun is not None
    assert rerun.budget is not None
    assert Decimal(rerun.budget["price_per_gpu_hour"]) == Decimal("9.99")
    assert rerun.estimator_version == "99.0.0"
    after = BudgetRequest.objects.get(pk=approved.pk)
    assert (after.amount, after.snapshot, after.snapshot_sha256) == (
        before.amount, before.snapshot, before.snapshot_sha256,
    )  # fmt: skip
    assert after.snapshot_sha256 == snapshot_hash(after.snapshot or {})
    assert (after.snapshot or {})["estimator_version"] == draft.run.estimator_version
    assert signoff_csv(after) == pack_before


# --- Concurrency -----------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_make_exactly_one_transition(
    draft: BudgetRequest, requester: User, approver: User, second_approver: User
) -> None:
    submitted = _submitted(draft, requester)
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def approve(user: User) -> None:
        start.wait()
        try:
            budget_request_approve(user=user, request=submitted, comment=f"by {user}")
            outcomes[user.username] = "approved"
        except TransitionRefused as error:
            outcomes[user.username] = error.message
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(u,)) for u in (approver, second_approver)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert list(outcomes.values()).count("approved") == 1
    refused = [message for message in outcomes.values() if message != "approved"]
    assert len(refused) == 1
    assert "approved by" in refused[0]
    assert _states(submitted).count(("approved", "submitted", "approved")) == 1
    assert BudgetRequest.objects.get(pk=submitted.pk).decisions.count() == 1


# --- Notifications ---------------------------------------------------------------------------


def test_approvers_hear_of_a_submission_and_the_requester_of_the_decision(
    draft: BudgetRequest,
    requester: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
    eager_tasks: None,
) -> None:
    for user in (requester, approver):
        user.email = f"{user.username}@example.com"
        user.save()
    with django_capture_on_commit_callbacks(execute=True):
        submitted = _submitted(draft, requester)
    assert [m.to for m in mail.outbox] == [["finn@example.com"]]
    assert submitted.snapshot_sha256 in mail.outbox[0].body
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_approve(user=approver, request=submitted, comment="Go.")
    assert mail.outbox[1].to == ["maya@example.com"]
    assert "approved" in mail.outbox[1].subject
    assert "Go." in mail.outbox[1].body


# --- Sign-off pack ---------------------------------------------------------------------------


def test_csv_escapes_cells_a_spreadsheet_would_run(
    runs: list[EstimationRun], requester: User
) -> None:
    request = budget_request_create(user=requester, run=runs[0], title="=HYPERLINK(\"x\")",
                                    justification="@SUM(A1)")  # fmt: skip
    rows = list(csv.reader(io.StringIO(signoff_csv(request))))
    cells = {row[0]: row[1] for row in rows if len(row) == 2}
    assert cells["Request"] == '\'=HYPERLINK("x")'
    assert cells["Justification"] == "'@SUM(A1)"
    assert [spreadsheet_safe(v) for v in ("+1", "-2", "\tx", "ok", 5)] == [
        "'+1", "'-2", "'\tx", "ok", 5,
    ]  # fmt: skip


def test_xlsx_holds_the_summary_comparison_whole_run_margins_and_timeline(
    draft: BudgetRequest, requester: User
) -> None:
    from openpyxl import load_workbook

    submitted = _submitted(draft, requester)
    book = load_workbook(io.BytesIO(signoff_xlsx(submitted)))
    assert book.sheetnames == [
        "Summary", "Comparison", "Whole run", "Step margins", "Whole bill", "Levers",
        "Timeline", "Data",
    ]  # fmt: skip
    summary = {row[0].value: row[1].value for row in book["Summary"].iter_rows()}
    assert summary["Snapshot SHA-256"] == submitted.snapshot_sha256
    assert Decimal(str(summary["Amount"])) == submitted.amount
    comparison = list(book["Comparison"].iter_rows(values_only=True))
    assert len(comparison) == 1 + 1 + len(draft.alternatives.all())
    chosen = comparison[0].index("Chosen")
    assert [row[chosen] for row in comparison[1:]] == [True, False]
    assert [row[2] for row in book["Timeline"].iter_rows(min_row=2, values_only=True)] == [
        "created", "submitted",
    ]  # fmt: skip
