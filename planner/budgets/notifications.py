"""E-mail about budget requests: approvers hear of a submission, the requester of a decision.

A notification is an outbox row (:class:`planner.budgets.models.Notification`) written in the
transaction that made the change, so nobody is told of a transition that was rolled back and
a broker outage loses nothing. After the commit a Celery task sends it with Django's
configured mail backend (the console in development, SMTP in production; tests read
``django.core.mail.outbox``); a mail server that is down or refusing is tried again later, and
mail that is not configured is a warning in the log. None of it can fail the request. Links
are absolute, on ``settings.SITE_URL``: a mail client has no page to resolve ``/budgets/1/``
against. The outbox is :mod:`lib.jobs`'s, for notifications as ``NOTIFICATION_JOBS``.
"""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings
from django.core.mail import EmailMessage, InvalidMailer
from django.core.mail.handler import DEFAULT_MAILER_ALIAS
from django.db import models, transaction
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


def _approver_addresses(request: BudgetRequest) -> list[str]:
    members = Membership.objects.filter(
        organisation=request.project.organisation, role=Role.APPROVER
    ).select_related("user")
    return sorted({m.user.email for m in members if m.user.email and m.user != request.created_by})


def _send(subject: str, body: str, recipients: list[str]) -> None:
    if recipients:
        notification = Notification.objects.create(
            subject=subject[:255], body=body, recipients=recipients
        )
        transaction.on_commit(partial(notification_dispatch, notification_id=notification.pk))


def notification_dispatch(*, notification_id: int) -> bool:
    """Hand the notification to a worker; False (the dispatcher sends it later) when the
    broker cannot be reached. Never raises: it runs after the commit of a request."""
    return jobs.dispatch(NOTIFICATION_JOBS, notification_id)


def notifications_dispatch() -> list[int]:
    """Hand every pending notification that never reached the broker to a worker."""
    return jobs.dispatch_pending(NOTIFICATION_JOBS)


def notification_send(*, notification_id: int) -> str:
    """Send a pending notification; the task's body. Returns what became of it.

    Mail that is not configured (SMTP without ``DJANGO_EMAIL_HOST``) is logged once and
    marked failed. A mail server's error is recorded on the row and raised for the task to
    try again.
    """
    notification = Notification.objects.filter(
        pk=notification_id, status=NotificationStatus.PENDING
    ).first()
    if notification is None:
        return "already sent or given up"
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
    except Exception as error:
        logger.warning(
            "notification %s: attempt %s failed, the mail server answered %s: %s",
            notification_id,
            notification.attempts + 1,
            type(error).__name__,
            error,
        )
        _mark(notification_id, error=f"{type(error).__name__}: {error}")
        raise
    _mark(notification_id, status=NotificationStatus.SENT, error="", sent_at=timezone.now())
    return "sent"


def notification_give_up(*, notification_id: int, error: Exception) -> None:
    """The mail server refused every try: mark the notification failed, with the reason."""
    logger.error("notification %s not sent, giving up: %s", notification_id, error)
    Notification.objects.filter(pk=notification_id).update(status=NotificationStatus.FAILED)


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
    _send(
        f"[TrainPlan] Budget request awaiting approval: {request.title}",
        f"{who} submitted a budget request for your approval.\n\n{_summary(request)}",
        _approver_addresses(request),
    )


def notify_decided(request: BudgetRequest, *, decision: str, approver: str, comment: str) -> None:
    recipient = request.created_by.email
    _send(
        f"[TrainPlan] Budget request {decision}: {request.title}",
        f"{approver} {decision} your budget request.\n\nComment: {comment or '(none)'}\n\n"
        f"{_summary(request)}",
        [recipient] if recipient else [],
    )
