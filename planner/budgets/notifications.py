"""E-mail about budget requests: approvers hear of a submission, the requester of a decision.

A notification is an outbox row (:class:`planner.budgets.models.Notification`) written in the
transaction that made the change, so nobody is told of a transition that was rolled back and
a broker outage loses nothing. After the commit a Celery task sends it with Django's
configured mail backend (the console in development, SMTP in production; tests read
``django.core.mail.outbox``); a mail server that is down or refusing is tried again with a
backoff from 5 s doubling to 10 min, for 24 h (:func:`retry_delay_s`), and mail that is not
configured is a warning in the log. None of it can fail the request. Links
are absolute, on ``settings.SITE_URL``: a mail client has no page to resolve ``/budgets/1/``
against. The outbox is :mod:`lib.jobs`'s, for notifications as ``NOTIFICATION_JOBS``.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.core.mail import EmailMessage, InvalidMailer
from django.core.mail.handler import DEFAULT_MAILER_ALIAS
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from lib import broker, jobs
from organisations.models import Membership, Role
from planner.budgets.models import BudgetRequest, Notification, NotificationStatus

logger = logging.getLogger(__name__)

#: The task that sends a notification (``planner.tasks``), sent by this name.
SEND_NOTIFICATION_TASK = "planner.send_notification"
#: Notifications as jobs: pending until sent or given up on. The task reads the pending row
#: itself (no claim, no heartbeat) and Celery's retries count its tries, so each send has a
#: new task id.
NOTIFICATION_JOBS = jobs.JobKind(
    model=Notification,
    task=SEND_NOTIFICATION_TASK,
    label="notification",
    broker=broker,
    queued=NotificationStatus.PENDING,
    running=None,
    task_ids=False,
)


#: How long a try holds its notification: an SMTP call's timeout (``DJANGO_EMAIL_TIMEOUT``,
#: 10 s) several times over, and the dispatcher's overdue margin comes on top. [s]
SEND_LEASE_S = 60


def _approver_addresses(request: BudgetRequest) -> list[str]:
    members = Membership.objects.filter(
        organisation=request.project.organisation, role=Role.APPROVER
    ).select_related("user")
    return sorted({m.user.email for m in members if m.user.email and m.user != request.created_by})


def notification_queue(subject: str, body: str, recipients: list[str]) -> None:
    """Write the e-mail as an outbox row, handed to a worker once the transaction commits
    (at once outside one); nothing for no recipients."""
    if recipients:
        notification = Notification.objects.create(
            subject=subject[:255], body=body, recipients=recipients
        )
        transaction.on_commit(partial(notification_dispatch, notification_id=notification.pk))


def notification_dispatch(*, notification_id: int) -> bool:
    """Hand the notification to a worker; False (the dispatcher sends it later) when the
    broker cannot be reached. Never raises: it runs after the commit of a request."""
    return jobs.dispatch(NOTIFICATION_JOBS, notification_id)


def notifications_dispatch(*, now: datetime | None = None) -> list[int]:
    """Hand to a worker every pending notification that never reached the broker, and
    every one whose retry is overdue by ``NOTIFICATION_OVERDUE_S`` (its retry message was
    lost, or its worker died mid-try); the ids sent. The claim in :func:`notification_send`
    keeps a second message for one notification from sending it twice."""
    sent = jobs.dispatch_pending(NOTIFICATION_JOBS)
    now = now or timezone.now()
    overdue_before = now - timedelta(seconds=settings.NOTIFICATION_OVERDUE_S)
    overdue = Notification.objects.filter(
        Q(next_attempt_at=None) | Q(next_attempt_at__lt=overdue_before),
        status=NotificationStatus.PENDING,
        dispatched_at__lt=overdue_before,
    ).exclude(pk__in=sent)
    for pk in overdue.order_by("created_at").values_list("pk", flat=True)[:500]:
        what = f"notification {pk} is overdue but its task"
        if jobs.publish_once(broker, SEND_NOTIFICATION_TASK, pk, what=what):
            Notification.objects.filter(pk=pk).update(dispatched_at=timezone.now())
            sent.append(pk)
    return sent


def retry_delay_s(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th refused try: ``EMAIL_RETRY_FIRST_S``
    doubling each time, at most ``EMAIL_RETRY_MAX_S`` (5, 10, 20, ... 600 s)."""
    first, most = settings.EMAIL_RETRY_FIRST_S, settings.EMAIL_RETRY_MAX_S
    return float(min(most, first * 2 ** min(max(attempts - 1, 0), 30)))


class RetryLater(Exception):
    """The mail server refused a try; the next is due in ``delay_s`` seconds."""

    def __init__(self, delay_s: float, error: Exception) -> None:
        super().__init__(f"retry in {delay_s:g} s: {type(error).__name__}: {error}")
        self.delay_s = delay_s
        self.error = error


def _claim(notification_id: int, now: datetime) -> Notification | None:
    """Take the try of a pending notification that is due (a retry may arrive a moment
    early): held for a lease, so that a second message for it does nothing meanwhile."""
    lease = timedelta(seconds=SEND_LEASE_S)
    taken = Notification.objects.filter(
        Q(next_attempt_at=None) | Q(next_attempt_at__lte=now + timedelta(seconds=1)),
        pk=notification_id,
        status=NotificationStatus.PENDING,
    ).update(next_attempt_at=now + lease)
    return Notification.objects.filter(pk=notification_id).first() if taken else None


def notification_send(*, notification_id: int) -> str:
    """Send a pending notification that is due; the task's body. Returns what became of it.

    Mail that is not configured (SMTP without ``DJANGO_EMAIL_HOST``) is logged once and
    marked failed. A mail server's refusal is recorded on the row with when the next try is
    due (:func:`retry_delay_s`) and raised as :class:`RetryLater`; once that would fall past
    ``EMAIL_RETRY_HOURS`` after the notification was written, it is marked failed instead.
    """
    now = timezone.now()
    notification = _claim(notification_id, now)
    if notification is None:
        return "already sent, given up, not due or being sent"
    message = EmailMessage(
        notification.subject,
        notification.body,
        settings.DEFAULT_FROM_EMAIL,
        notification.recipients,
    )
    try:
        message.send(using=DEFAULT_MAILER_ALIAS)
    except InvalidMailer as error:
        logger.warning(
            "mail is not configured (%s): notification %s to %s is not sent; set "
            "DJANGO_EMAIL_HOST (README, Production)",
            error,
            notification_id,
            ", ".join(notification.recipients),
        )
        _mark(notification_id, status=NotificationStatus.FAILED, error=f"not configured: {error}")
        return "not configured"
    except (smtplib.SMTPException, OSError) as error:
        attempt = notification.attempts + 1
        delay_s = retry_delay_s(attempt)
        logger.warning(
            "notification %s: attempt %s failed, the mail server answered %s: %s",
            notification_id,
            attempt,
            type(error).__name__,
            error,
        )
        due = timezone.now() + timedelta(seconds=delay_s)
        window_end = notification.created_at + timedelta(hours=settings.EMAIL_RETRY_HOURS)
        reason = f"{type(error).__name__}: {error}"
        if due > window_end:
            logger.error(
                "notification %s not sent, giving up after %s tries in %s h: %s",
                notification_id,
                attempt,
                settings.EMAIL_RETRY_HOURS,
                error,
            )
            _mark(notification_id, status=NotificationStatus.FAILED, error=reason)
            return "failed"
        _mark(notification_id, error=reason, next_attempt_at=due)
        raise RetryLater(delay_s, error) from error
    _mark(notification_id, status=NotificationStatus.SENT, error="", sent_at=timezone.now())
    return "sent"


def _mark(notification_id: int, **fields: object) -> None:
    Notification.objects.filter(pk=notification_id).update(
        attempts=models.F("attempts") + 1, **fields
    )


def site_url(path: str) -> str:
    """``path`` (``/budgets/1/``) as an address on the site users reach: ``SITE_URL`` + path."""
    return f"{settings.SITE_URL.rstrip('/')}/{path.lstrip('/')}"


def _summary(request: BudgetRequest) -> str:
    return (
        f"Project: {request.project.name}\n"
        f"Request: {request.title}\n"
        f"Amount: {request.amount:,.2f} {request.currency} "
        f"({request.get_basis_display()}, contingency {request.contingency:,.2f})\n"
        f"Snapshot SHA-256: {request.snapshot_sha256 or '(not frozen yet)'}\n"
        f"Open it: {site_url(request.get_absolute_url())}\n"
    )


def notify_submitted(request: BudgetRequest) -> None:
    who = request.created_by.get_full_name() or request.created_by.get_username()
    notification_queue(
        f"[TrainPlan] Budget request awaiting approval: {request.title}",
        f"{who} submitted a budget request for your approval.\n\n{_summary(request)}",
        _approver_addresses(request),
    )


def notify_decided(request: BudgetRequest, *, decision: str, approver: str, comment: str) -> None:
    recipient = request.created_by.email
    notification_queue(
        f"[TrainPlan] Budget request {decision}: {request.title}",
        f"{approver} {decision} your budget request.\n\nComment: {comment or '(none)'}\n\n"
        f"{_summary(request)}",
        [recipient] if recipient else [],
    )
