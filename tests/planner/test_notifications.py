"""Notification e-mail: who hears of a budget request, and links that open from a mail client."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from pytest_django.fixtures import Settings

from planner.models import BudgetRequest, Scenario
from planner.notifications import site_url
from planner.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
    run_execute,
    run_start,
)

pytestmark = pytest.mark.django_db

SITE = "https://trainplan.example.com"


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
