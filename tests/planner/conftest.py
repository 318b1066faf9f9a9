"""Fixtures of the planner tests: two organisations, users by role, priced scenarios.

Prices come from the pricing demo data (the public list-price snapshot, the example quote
and the on-prem worked example), the same data a new user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from estimator.core.presets import preset_scenario
from organisations.demo import demo_organisation
from organisations.models import Organisation, Role
from organisations.services import membership_grant, organisation_create
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario
from planner.scenarios.services import project_create, run_execute, run_start, scenario_create
from pricing.demo import EXAMPLE_BOOK_NAME, EXAMPLE_QUOTE_REFERENCE, pricing_demo_load
from pricing.models import Accelerator, OnPremProfile, PriceEntry, VendorQuote
from pricing.services import quote_create


@pytest.fixture
def prices(db: None) -> None:
    pricing_demo_load()


@pytest.fixture
def organisation(db: None) -> Organisation:
    """The demo organisation (the demo prices' quote and on-prem profile are its)."""
    return demo_organisation()


@pytest.fixture
def other_organisation(db: None) -> Organisation:
    return organisation_create(name="Globex Labs")


def _member(username: str, organisation: Organisation, *roles: str) -> User:
    user = User.objects.create_user(username, password=f"{username}-pass")
    for role in roles:
        membership_grant(organisation=organisation, user=user, role=role)
    return user


@pytest.fixture
def requester(organisation: Organisation) -> User:
    return _member("maya", organisation, Role.REQUESTER)


@pytest.fixture
def second_requester(organisation: Organisation) -> User:
    return _member("rosa", organisation, Role.REQUESTER)


@pytest.fixture
def approver(organisation: Organisation) -> User:
    return _member("finn", organisation, Role.APPROVER)


@pytest.fixture
def second_approver(organisation: Organisation) -> User:
    return _member("gwen", organisation, Role.APPROVER)


@pytest.fixture
def viewer(organisation: Organisation) -> User:
    return _member("vera", organisation, Role.VIEWER)


@pytest.fixture
def outsider(other_organisation: Organisation) -> User:
    """A requester of another organisation: sees none of the first one's data."""
    return _member("otto", other_organisation, Role.REQUESTER)


def api_client(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def project(requester: User, organisation: Organisation) -> Project:
    return project_create(
        user=requester, organisation=organisation, name="Llama 3 8B pre-training", currency="USD"
    )


def small_spec(
    accelerator: str = "H100-SXM", num_gpus: int = 64, tokens: float = 2e11
) -> dict[str, Any]:
    """Llama 3 8B on a small cluster: estimates and searches in well under a second."""
    return preset_scenario("llama3-8b", accelerator=accelerator, num_gpus=num_gpus, tokens=tokens)


#: Llama 3 70B on one node with ZeRO-1: ~16 bytes of model state per parameter over 8 GPUs is
#: 140 GB per GPU before activations, well above an H100's 80 GB.
TOO_BIG_LAYOUT = {"tp": 8, "pp": 1, "dp": 1, "micro_batch_size": 1, "zero_stage": 1,
                  "recompute": "full"}  # fmt: skip


def too_big_spec() -> dict[str, Any]:
    """A scenario whose stated layout does not fit in memory (it still estimates)."""
    return preset_scenario(
        "llama3-70b", accelerator="H100-SXM", num_gpus=8, parallelism=TOO_BIG_LAYOUT, tokens=1e9
    )


def too_big_scenario(project: Project, user: User) -> Scenario:
    """``too_big_spec`` at the GCP H100 list price."""
    return scenario_create(
        user=user,
        project=project,
        name="70B on one node",
        spec=too_big_spec(),
        price_source="price_entry",
        price=list_price("H100-SXM"),
        model_preset="llama3-70b",
    )


def list_price(accelerator: str, provider: str = "gcp") -> PriceEntry:
    """The on-demand list price of ``accelerator`` at ``provider`` in the demo book."""
    entries = PriceEntry.objects.filter(
        book__name=EXAMPLE_BOOK_NAME, accelerator__catalog_id=accelerator, data_flag=""
    )
    entry = (
        entries.filter(provider__slug=provider, pricing_type="on_demand").first() or entries.first()
    )
    assert entry is not None, f"no list price for {accelerator} in the demo book"
    return entry


def book_price(catalog_id: str) -> PriceEntry:
    """The demo book's on-demand price of an accelerator, an unflagged one if it has one."""
    entry = (
        PriceEntry.objects.filter(
            book__name=EXAMPLE_BOOK_NAME,
            accelerator__catalog_id=catalog_id,
            pricing_type="on_demand",
        )
        .order_by("data_flag", "price_per_accelerator_hour")  # "" (unflagged) first
        .first()
    )
    assert entry is not None, f"the demo book has no on-demand price for {catalog_id}"
    return entry


def example_quote() -> VendorQuote:
    return VendorQuote.objects.get(reference=EXAMPLE_QUOTE_REFERENCE)


def onprem_profile() -> OnPremProfile:
    return OnPremProfile.objects.get()


@pytest.fixture
def scenario(prices: None, project: Project, requester: User) -> Scenario:
    """Llama 3 8B on 64 H100 at a GCP list price."""
    return scenario_create(
        user=requester,
        project=project,
        name="H100 list price",
        spec=small_spec("H100-SXM", 64),
        price_source="price_entry",
        price=list_price("H100-SXM"),
        model_preset="llama3-8b",
    )


def run_finished(
    scenario: Scenario, user: User, capture: Any, *, seed: int = 3, samples: int = 200
) -> EstimationRun:
    """A succeeded run of ``scenario``: started with its task left unsent (``capture`` is
    ``django_capture_on_commit_callbacks``) and executed here, as the worker would."""
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=seed, samples=samples)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    assert finished.status == "succeeded", finished.error
    return finished


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


def quote_scenario(project: Project, user: User, num_gpus: int = 64) -> Scenario:
    """Llama-3-8B-sized training on ``num_gpus`` H100 at the demo's example quote (256 H100
    for 12 months, 4,709,376 USD)."""
    return scenario_create(
        user=user,
        project=project,
        name=f"{num_gpus} H100 on the example quote",
        spec=small_spec("H100-SXM", num_gpus),
        price_source="vendor_quote",
        price=example_quote(),
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


Capture = Callable[..., Any]


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _finished_run(capture: Capture, user: User, scenario: Scenario, seed: int = 7) -> EstimationRun:
    """A run started and executed by the worker's own service (no broker needed)."""
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=seed, samples=400)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def _budget(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None, run.error
    return run.budget


def _add_scenario(
    user: User, project: Project, name: str, accelerator: str, gpus: int, price: Any
) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=small_spec(accelerator, gpus),
        price_source="vendor_quote" if price.__class__.__name__ == "VendorQuote" else "price_entry",
        price=price,
        model_preset="llama3-8b",
    )


@pytest.fixture
def estimated(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> EstimationRun:
    return _finished_run(django_capture_on_commit_callbacks, requester, scenario)


def _form_refusal_check(
    user: User, project: Project, data: dict[str, Any], field: str, message: str
) -> None:
    """Posting ``data`` to the scenario form shows ``message`` on ``field`` and saves nothing."""
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(user).post(url, data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message.lower() in " ".join(errors[field]).lower()
    assert not Scenario.objects.exists()
