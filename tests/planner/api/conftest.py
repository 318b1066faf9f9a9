"""Fixtures of the planner API tests: signed-in clients and request bodies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from organisations.demo import demo_organisation
from planner.models import EstimationRun, Organisation, Project, Role, Scenario
from planner.services import (
    membership_grant,
    project_create,
    run_execute,
    run_start,
    scenario_create,
)
from pricing.models import Accelerator, VendorQuote
from pricing.services import quote_create
from tests.planner.conftest import api_client, list_price, small_spec


@pytest.fixture
def requester_api(requester: User) -> APIClient:
    return api_client(requester)


@pytest.fixture
def viewer_api(viewer: User) -> APIClient:
    return api_client(viewer)


@pytest.fixture
def outsider_api(outsider: User) -> APIClient:
    return api_client(outsider)


@pytest.fixture
def scenario_payload(prices: None, project: Project) -> Callable[..., dict[str, Any]]:
    """A valid scenario body for ``project``; keyword arguments replace its fields."""

    def payload(**changes: Any) -> dict[str, Any]:
        return {
            "project": project.pk,
            "name": "H100 on 128",
            "spec": small_spec("H100-SXM", 128),
            "price_source": "price_entry",
            "price_entry": list_price("H100-SXM").pk,
        } | changes

    return payload


@pytest.fixture
def expired_quote(prices: None) -> VendorQuote:
    return quote_create(
        user=None,
        organisation=demo_organisation(),
        vendor="Old Compute Ltd",
        reference="OLD-1",
        accelerator=Accelerator.objects.get(catalog_id="H100-SXM"),
        accelerator_count=512,
        price_per_accelerator_hour=Decimal("1.99"),
        currency="USD",
        valid_from=date(2024, 1, 1),
        valid_until=date(2024, 12, 31),
    )


def finished_run(scenario: Scenario, user: User, *, seed: int = 7) -> EstimationRun:
    """A run of ``scenario`` executed here, as the worker would, without enqueuing a task."""
    run = run_start(user=user, scenario=scenario, seed=seed, samples=500)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    assert finished.status == "succeeded", finished.error
    return finished


def scenario_add(project: Project, user: User, name: str, num_gpus: int) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=small_spec("H100-SXM", num_gpus),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )


@pytest.fixture
def budget_run(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    """A succeeded run of ``scenario``: started (its task left unqueued) and executed here."""
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=11, samples=500)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    assert finished.status == "succeeded", finished.error
    return finished


@pytest.fixture
def author_approver(organisation: Organisation) -> User:
    """Both requester and approver: may write requests, and decide on the ones they did not."""
    user = User.objects.create_user("ada", password="ada-pass")
    for role in (Role.REQUESTER, Role.APPROVER):
        membership_grant(organisation=organisation, user=user, role=role)
    return user


@pytest.fixture
def foreign_run(prices: None, outsider: User, other_organisation: Organisation) -> EstimationRun:
    """A succeeded run in the other organisation, which the first one's members cannot see."""
    project = project_create(user=outsider, organisation=other_organisation, name="Globex LM")
    scenario = scenario_create(
        user=outsider,
        project=project,
        name="H100 list price",
        spec=small_spec("H100-SXM", 64),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    return finished_run(scenario, outsider)
