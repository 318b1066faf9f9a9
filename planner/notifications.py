"""E-mail about budget requests: approvers hear of a submission, the requester of a decision.

Sent with Django's configured mail backend (the console in development, SMTP in production;
tests read ``django.core.mail.outbox``). Mail goes out only after the transaction that made the
change commits, so nobody is told of a transition that was rolled back. Links are absolute,
on ``settings.SITE_URL``: a mail client has no page to resolve ``/budgets/1/`` against.
"""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from planner.models import BudgetRequest, Membership, Role


def _approver_addresses(request: BudgetRequest) -> list[str]:
    members = Membership.objects.filter(
        organisation=request.project.organisation, role=Role.APPROVER
    ).select_related("user")
    return sorted({m.user.email for m in members if m.user.email and m.user != request.created_by})


def _send(subject: str, body: str, recipients: list[str]) -> None:
    if recipients:
        transaction.on_commit(
            lambda: send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
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
