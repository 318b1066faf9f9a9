"""Notification e-mail: who hears of a budget request, links that open from a mail client, and
mail that is down or not configured never failing the change it announces.

Mail goes through an outbox row and a Celery task; these tests run that task in-process
(eager) so ``django.core.mail.outbox`` sees it, except the last, which has a real worker
send to a mail server that refuses.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from planner.budgets.models import (
    BudgetRequest,
    BudgetState,
    Notification,
    NotificationStatus,
    SignoffPack,
)
from planner.budgets.notifications import notifications_dispatch, site_url
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
)
from planner.scenarios.models import Scenario
from planner.scenarios.services import run_execute, run_start
from tests.services import wait_for
from trainplan.celery import app as celery_app

pytestmark = pytest.mark.django_db

SITE = "https://trainplan.example.com"
SMTP = "django.core.mail.backends.smtp.EmailBackend"


def _closed_port() -> int:
    """A local port where nothing listens: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def draft(
    scenario: Scenario,
    requester: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
) -> BudgetRequest:
    """A draft request on a finished run; both users have an address to write to."""
    for user in (requester, approver):
        user.email = f"{user.username}@example.com"
        user.save()
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=3, samples=200)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    return budget_request_create(user=requester, run=finished, title="8B", justification="Go.")


def test_site_url_joins_the_configured_address_and_a_path(settings: Settings) -> None:
    settings.SITE_URL = SITE
    assert site_url("/budgets/7/") == f"{SITE}/budgets/7/"
    settings.SITE_URL = f"{SITE}/"
    assert site_url("/budgets/7/") == f"{SITE}/budgets/7/"


def test_the_mail_links_to_the_request_on_the_configured_site(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.SITE_URL = SITE
    link = f"{SITE}/budgets/{draft.pk}/"
    with django_capture_on_commit_callbacks(execute=True):
        submitted = budget_request_submit(user=requester, request=draft, comment="")
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_approve(user=approver, request=submitted, comment="Fine.")
    assert [m.to for m in mail.outbox] == [["finn@example.com"], ["maya@example.com"]]
    for message in mail.outbox:
        assert f"Open it: {link}\n" in message.body


def test_a_notification_is_an_outbox_row_sent_after_the_commit(
    eager_tasks: None,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        budget_request_submit(user=requester, request=draft, comment="")
    notification = Notification.objects.get()
    assert (notification.status, notification.recipients) == ("pending", ["finn@example.com"])
    assert notification.dispatched_at is None
    assert mail.outbox == []  # nothing leaves before the commit
    for callback in callbacks:
        callback()
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("sent", 1)
    assert notification.dispatched_at is not None
    assert [m.subject for m in mail.outbox] == [notification.subject]


def test_a_notification_the_broker_missed_is_sent_by_the_dispatcher(
    eager_tasks: None,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broker_down(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr("lib.broker.publish", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_submit(user=requester, request=draft, comment="")
    assert Notification.objects.get().dispatched_at is None
    assert "the dispatcher sends it when the broker is back" in caplog.text
    assert notifications_dispatch() == []  # still down
    monkeypatch.undo()
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    assert notifications_dispatch() == [Notification.objects.get().pk]
    assert Notification.objects.get().status == "sent"
    assert [m.to for m in mail.outbox] == [["finn@example.com"]]


def test_mail_that_is_not_configured_is_a_warning_not_a_failed_request(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    approver: User,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Production settings without DJANGO_EMAIL_HOST: SMTP with no host to send to.
    settings.MAILERS = {"default": {"BACKEND": SMTP, "OPTIONS": {}}}
    with django_capture_on_commit_callbacks(execute=True):
        submitted = _client(requester).post(reverse("planner:budget-submit", args=[draft.pk]))
    with django_capture_on_commit_callbacks(execute=True):
        approved = _client(approver).post(reverse("planner:budget-approve", args=[draft.pk]))
    assert (submitted.status_code, approved.status_code) == (302, 302)
    assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.APPROVED
    warnings = [r for r in caplog.records if "mail is not configured" in r.getMessage()]
    assert [r.levelno for r in warnings] == [logging.WARNING] * 2  # once per notification
    assert "must define 'host'" in warnings[0].getMessage()
    assert set(Notification.objects.values_list("status", flat=True)) == {"failed"}


def test_a_refusing_mail_server_does_not_fail_the_request(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.MAILERS = {
        "default": {"BACKEND": SMTP, "OPTIONS": {"host": "127.0.0.1", "port": _closed_port()}}
    }
    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        response = _client(requester).post(reverse("planner:budget-submit", args=[draft.pk]))
    elapsed = time.monotonic() - started
    assert response.status_code == 302
    # Eager tasks render the sign-off pack in this request too: the mail's part is the rest.
    assert elapsed - (SignoffPack.objects.get(request=draft).render_seconds or 0) < 2
    assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.SUBMITTED
    notification = Notification.objects.get()
    assert notification.status == NotificationStatus.PENDING  # a worker would try again
    assert notification.error.startswith("ConnectionRefusedError")
    assert "the mail server answered ConnectionRefusedError" in caplog.text


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_retries_a_refusing_mail_server_and_then_gives_up(
    celery_worker_factory: type, draft: BudgetRequest, requester: User
) -> None:
    worker = celery_worker_factory(
        {
            "DJANGO_EMAIL_BACKEND": SMTP,
            "DJANGO_EMAIL_HOST": "127.0.0.1",
            "DJANGO_EMAIL_PORT": str(_closed_port()),
            "TRAINPLAN_EMAIL_MAX_RETRIES": "2",
        }
    )
    try:
        started = time.monotonic()
        response = _client(requester).post(reverse("planner:budget-submit", args=[draft.pk]))
        elapsed = time.monotonic() - started
        assert response.status_code == 302
        assert elapsed < 2, elapsed
        assert BudgetRequest.objects.get(pk=draft.pk).state == BudgetState.SUBMITTED
        notification = Notification.objects.get()
        assert notification.dispatched_at is not None
        # Backoff of 5 s with jitter: three tries take at most 5 + 10 s.
        wait_for(lambda: Notification.objects.get().status == "failed", 40, "the worker to give up")
    finally:
        worker.stop()
    notification.refresh_from_db()
    assert notification.attempts == 3
    assert notification.error.startswith("ConnectionRefusedError")
    log = worker.log.read_text()
    assert log.count("the mail server answered ConnectionRefusedError") == 3
    assert "Retry in" in log
    assert f"notification {notification.pk} not sent, giving up" in log
