"""Notification e-mail: who hears of a budget request, links that open from a mail client, and
mail that is down or not configured never failing the change it announces.

Mail goes through an outbox row and a Celery task; these tests run that task in-process
(eager) so ``django.core.mail.outbox`` sees it, except the last, which has a real worker
send to a mail server that refuses.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
from datetime import timedelta
from typing import Any, cast

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings

from planner.budgets.models import (
    BudgetRequest,
    BudgetState,
    Notification,
    NotificationStatus,
    SignoffPack,
)
from planner.budgets.notifications import (
    RetryLater,
    notification_send,
    notifications_dispatch,
    retry_delay_s,
    site_url,
)
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


def test_retries_wait_5_s_doubling_to_10_min() -> None:
    assert [retry_delay_s(n) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 320, 600, 600]
    assert retry_delay_s(10_000) == 600


def _refusing(settings: Settings) -> None:
    settings.MAILERS = {
        "default": {"BACKEND": SMTP, "OPTIONS": {"host": "127.0.0.1", "port": _closed_port()}}
    }


def test_a_refused_try_is_due_again_after_the_backoff_and_not_before(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    _refusing(settings)
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_submit(user=requester, request=draft, comment="")
    notification = Notification.objects.get()
    assert (notification.status, notification.attempts) == ("pending", 1)
    assert notification.next_attempt_at is not None
    wait = (notification.next_attempt_at - timezone.now()).total_seconds()
    assert 3 < wait <= 5
    assert notification_send(notification_id=notification.pk).startswith("already sent")
    assert Notification.objects.get().attempts == 1  # not due: not tried


def test_the_dispatcher_sends_a_notification_whose_retry_message_was_lost(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    _refusing(settings)
    with django_capture_on_commit_callbacks(execute=True):
        budget_request_submit(user=requester, request=draft, comment="")
    pk = Notification.objects.get().pk
    assert notifications_dispatch() == []  # its retry is not overdue yet
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    # The retry was due two minutes ago and no message came (the queue was lost).
    long_ago = timezone.now() - timedelta(minutes=2)
    Notification.objects.filter(pk=pk).update(next_attempt_at=long_ago, dispatched_at=long_ago)
    assert notifications_dispatch() == [pk]
    assert (Notification.objects.get().status, len(mail.outbox)) == ("sent", 1)


def test_a_notification_is_given_up_on_24_hours_after_it_was_written(
    eager_tasks: None,
    settings: Settings,
    draft: BudgetRequest,
    requester: User,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        budget_request_submit(user=requester, request=draft, comment="")
    _refusing(settings)
    # Written 23 h 55 min ago: a retry in 5 s is still within the day, one in 10 min is not.
    written = timezone.now() - timedelta(hours=23, minutes=55)
    Notification.objects.update(created_at=written)
    pk = Notification.objects.get().pk
    with pytest.raises(RetryLater):  # the first retry, in 5 s, falls within the day
        notification_send(notification_id=pk)
    Notification.objects.filter(pk=pk).update(next_attempt_at=None, attempts=8)
    assert notification_send(notification_id=pk) == "failed"
    assert Notification.objects.get().status == NotificationStatus.FAILED
    assert f"notification {pk} not sent, giving up after 9 tries in 24 h" in caplog.text


def test_the_password_reset_mail_goes_through_the_outbox(
    eager_tasks: None,
    settings: Settings,
    requester: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    requester.email = "maya@example.com"
    requester.save()
    _refusing(settings)
    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        response = Client().post("/accounts/password_reset/", {"email": "maya@example.com"})
    assert response.status_code == 302
    assert time.monotonic() - started < 2
    notification = Notification.objects.get()
    assert notification.recipients == ["maya@example.com"]
    assert "/accounts/reset/" in notification.body
    assert (notification.status, notification.attempts) == ("pending", 1)  # tried, kept
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    Notification.objects.update(next_attempt_at=None)
    assert notification_send(notification_id=notification.pk) == "sent"
    assert [m.to for m in mail.outbox] == [["maya@example.com"]]


class _MailServer(socketserver.ThreadingTCPServer):
    """Just enough SMTP to accept mail: what a relay that came back up does."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int) -> None:
        self.received: list[str] = []
        super().__init__(("127.0.0.1", port), _SmtpSession)


class _SmtpSession(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server = cast(_MailServer, self.server)
        self.wfile.write(b"220 test ESMTP\r\n")
        while line := self.rfile.readline():
            verb = line[:4].upper()
            if verb == b"DATA":
                self.wfile.write(b"354 go on\r\n")
                body = b"".join(iter(self.rfile.readline, b".\r\n"))
                server.received.append(body.decode("utf-8", "replace"))
                self.wfile.write(b"250 queued\r\n")
            elif verb == b"QUIT":
                self.wfile.write(b"221 bye\r\n")
                return
            else:
                self.wfile.write(b"250 ok\r\n")


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_sends_once_the_mail_server_is_back(
    celery_worker_factory: type, draft: BudgetRequest, requester: User
) -> None:
    """The mail server is down when the request is submitted and comes back a few seconds
    later (backoff compressed to 1 s doubling to 2 s): the worker's retries deliver it."""
    port = _closed_port()
    worker = celery_worker_factory(
        {
            "DJANGO_EMAIL_BACKEND": SMTP,
            "DJANGO_EMAIL_HOST": "127.0.0.1",
            "DJANGO_EMAIL_PORT": str(port),
            "TRAINPLAN_EMAIL_RETRY_FIRST_S": "1",
            "TRAINPLAN_EMAIL_RETRY_MAX_S": "2",
        }
    )
    server: _MailServer | None = None
    try:
        started = time.monotonic()
        response = _client(requester).post(reverse("planner:budget-submit", args=[draft.pk]))
        assert response.status_code == 302
        assert time.monotonic() - started < 2
        wait_for(lambda: Notification.objects.get().attempts >= 2, 30, "two refused tries")
        server = _MailServer(port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        wait_for(lambda: Notification.objects.get().status == "sent", 30, "the mail to go out")
    finally:
        worker.stop()
        if server is not None:
            server.shutdown()
            server.server_close()
    notification = Notification.objects.get()
    assert notification.attempts >= 3
    assert server is not None
    assert len(server.received) == 1
    assert "Budget request awaiting approval" in server.received[0]
    log = worker.log.read_text()
    assert "the mail server answered ConnectionRefusedError" in log
    assert "Retry in" in log
