"""The sign-off pack rendered once: stored by the worker at submission, served as stored.

The runs are real (executed by the worker's service); the pack's task runs in this process
(eager Celery, the embedded default) or, in the last test, on a real worker through Redis.
"Rendered once" is read off the stored row: ``renders`` counts the renders and
``rendered_at`` says when the last was.
"""

from __future__ import annotations

import io
import socket
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from openpyxl import load_workbook
from pypdf import PdfReader
from pytest_django.fixtures import Settings

from planner.budgets.models import BudgetRequest, PackStatus, SignoffPack
from planner.budgets.packs import pack_edition, signoff_packs_recover_lost
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
    budget_request_update,
)
from planner.scenarios.models import Scenario
from planner.tasks import dispatch_pending
from pricing.models import PriceEntry
from tests.planner.conftest import _client, run_finished
from tests.services import wait_for

pytestmark = pytest.mark.django_db

Capture = Any


def _get(user: User, name: str, budget: BudgetRequest) -> Any:
    return _client(user).get(reverse(f"planner:{name}", args=[budget.pk]))


def _pdf_text(body: bytes) -> str:
    pages = PdfReader(io.BytesIO(body)).pages
    return " ".join(" ".join(page.extract_text() for page in pages).split())


def _xlsx_summary(body: bytes) -> dict[str, Any]:
    book = load_workbook(io.BytesIO(body))
    return {row[0]: row[1] for row in book["Summary"].iter_rows(values_only=True)}


@pytest.fixture
def draft(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> BudgetRequest:
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    return budget_request_create(user=requester, run=run, title="8B", justification="Go.")


@pytest.fixture
def submitted(
    draft: BudgetRequest,
    requester: User,
    eager_tasks: None,
    django_capture_on_commit_callbacks: Capture,
) -> BudgetRequest:
    """Submitted, its commit's tasks run here: the pack's render among them."""
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_submit(user=requester, request=draft)
    return BudgetRequest.objects.get(pk=draft.pk)


def test_submission_stores_both_files_rendered_from_the_snapshot(
    submitted: BudgetRequest,
) -> None:
    pack = SignoffPack.objects.get(request=submitted)
    assert pack.status == PackStatus.DONE
    assert pack.renders == 1
    assert pack.snapshot_sha256 == submitted.snapshot_sha256
    assert pack.edition == pack_edition(submitted)
    assert pack.pdf is not None
    assert pack.xlsx is not None
    pdf, xlsx = bytes(pack.pdf), bytes(pack.xlsx)
    assert pdf.startswith(b"%PDF")
    # The files embed the hash of the request's snapshot, as the page shows it.
    assert f"SHA-256 {submitted.snapshot_sha256}" in _pdf_text(pdf).replace("- ", "-")
    assert _xlsx_summary(xlsx)["Snapshot SHA-256"] == submitted.snapshot_sha256


def test_downloads_serve_the_stored_bytes_without_rendering_again(
    submitted: BudgetRequest, approver: User
) -> None:
    pack = SignoffPack.objects.get(request=submitted)
    for name, kind in (("budget-pdf", "pdf"), ("budget-xlsx", "xlsx")):
        first, second = _get(approver, name, submitted), _get(approver, name, submitted)
        assert first.status_code == second.status_code == 200
        assert first.content == second.content == bytes(getattr(pack, kind))
    after = SignoffPack.objects.get(pk=pack.pk)
    assert (after.renders, after.rendered_at) == (1, pack.rendered_at)


def test_a_download_is_the_stored_file_whatever_it_holds(
    submitted: BudgetRequest, approver: User
) -> None:
    """Bytes no renderer writes come back as they are: the download read the row."""
    SignoffPack.objects.filter(request=submitted).update(pdf=b"%PDF stored", xlsx=b"stored")
    assert _get(approver, "budget-pdf", submitted).content == b"%PDF stored"
    assert _get(approver, "budget-xlsx", submitted).content == b"stored"


def test_a_decision_stores_the_next_edition_with_the_signature(
    submitted: BudgetRequest, approver: User, django_capture_on_commit_callbacks: Capture
) -> None:
    before = SignoffPack.objects.get(request=submitted)
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_approve(user=approver, request=submitted, comment="Within plan.")
    pack = SignoffPack.objects.get(request=submitted)
    assert pack.renders == 2
    assert pack.edition != before.edition
    assert pack.snapshot_sha256 == submitted.snapshot_sha256
    response = _get(approver, "budget-pdf", submitted)
    assert response.content == bytes(pack.pdf or b"")
    assert "Within plan." in _pdf_text(response.content).partition("Sign-off")[2]
    assert SignoffPack.objects.get(pk=pack.pk).renders == 2


def test_a_pack_no_worker_stored_is_rendered_once_by_its_first_download(
    draft: BudgetRequest,
    requester: User,
    approver: User,
    eager_tasks: None,
    django_capture_on_commit_callbacks: Capture,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # the task never reaches a worker
        budget_request_submit(user=requester, request=draft)
    assert SignoffPack.objects.get(request=draft).pdf is None
    first = _get(approver, "budget-pdf", draft).content
    pack = SignoffPack.objects.get(request=draft)
    assert (pack.renders, pack.status) == (1, PackStatus.QUEUED)
    assert _get(approver, "budget-pdf", draft).content == first == bytes(pack.pdf or b"")
    assert _get(approver, "budget-xlsx", draft).content == bytes(pack.xlsx or b"")
    # The dispatcher sends the task the broker never had; it finds this edition stored.
    assert dispatch_pending()["signoff_packs_sent"] == [pack.pk]
    after = SignoffPack.objects.get(pk=pack.pk)
    assert (after.status, after.renders, after.rendered_at) == (
        PackStatus.DONE,
        1,
        pack.rendered_at,
    )


def test_a_warning_arisen_since_submission_is_a_new_edition(
    submitted: BudgetRequest, approver: User
) -> None:
    price = (submitted.snapshot or {})["price"]
    PriceEntry.objects.filter(pk=price["id"]).update(data_flag="SUSPECT: found after submission")
    text = _pdf_text(_get(approver, "budget-pdf", submitted).content)
    assert "since submission" in text
    pack = SignoffPack.objects.get(request=submitted)
    assert pack.renders == 2
    assert pack.edition == pack_edition(BudgetRequest.objects.get(pk=submitted.pk))


def test_another_organisation_gets_404_and_renders_nothing(
    submitted: BudgetRequest, draft: BudgetRequest, outsider: User
) -> None:
    for name in ("budget-pdf", "budget-xlsx"):
        assert _get(outsider, name, submitted).status_code == 404, name
    assert SignoffPack.objects.get(request=submitted).renders == 1


def test_a_drafts_preview_is_cached_until_the_draft_changes(
    draft: BudgetRequest, requester: User
) -> None:
    cache.clear()
    first = _get(requester, "budget-xlsx", draft).content
    edition = pack_edition(draft)
    assert cache.get(f"signoff-preview:{draft.pk}:xlsx:{edition}") == first
    assert _get(requester, "budget-xlsx", draft).content == first
    assert not SignoffPack.objects.filter(request=draft).exists()  # nothing stored for a draft
    budget_request_update(user=requester, request=draft, title="8B, second thoughts")
    changed = BudgetRequest.objects.get(pk=draft.pk)
    assert pack_edition(changed) != edition
    summary = _xlsx_summary(_get(requester, "budget-xlsx", changed).content)
    assert "8B, second thoughts" in summary.values()


def test_a_drafts_preview_is_rendered_while_the_cache_is_down(
    draft: BudgetRequest, requester: User, settings: Settings
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    response = _get(requester, "budget-xlsx", draft)
    assert response.status_code == 200
    assert "8B" in _xlsx_summary(response.content).values()


def test_a_render_whose_worker_was_lost_is_queued_again(submitted: BudgetRequest) -> None:
    stale = timezone.now() - timedelta(hours=1)
    SignoffPack.objects.filter(request=submitted).update(
        status=PackStatus.RUNNING, started_at=stale, heartbeat_at=stale, attempts=1
    )
    pack = SignoffPack.objects.get(request=submitted)
    requeued, failed = signoff_packs_recover_lost()
    assert (requeued, failed) == ([pack.pk], [])
    again = SignoffPack.objects.get(pk=pack.pk)
    assert again.status == PackStatus.QUEUED
    assert again.task_id != pack.task_id


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_stores_the_pack_of_a_submission(
    celery_worker: object, draft: BudgetRequest, requester: User, approver: User
) -> None:
    response = _client(requester).post(reverse("planner:budget-submit", args=[draft.pk]))
    assert response.status_code == 302
    wait_for(
        lambda: SignoffPack.objects.filter(request=draft, status=PackStatus.DONE).exists(),
        60,
        "the worker to store the pack",
    )
    submitted = BudgetRequest.objects.get(pk=draft.pk)
    pack = SignoffPack.objects.get(request=draft)
    assert pack.renders == 1
    assert pack.snapshot_sha256 == submitted.snapshot_sha256
    assert pack.edition == pack_edition(submitted)
    download = _get(approver, "budget-pdf", submitted).content
    assert download == bytes(pack.pdf or b"")
    assert f"SHA-256 {submitted.snapshot_sha256}" in _pdf_text(download).replace("- ", "-")
    assert SignoffPack.objects.get(pk=pack.pk).renders == 1
