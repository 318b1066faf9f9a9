"""Fixtures of the planner tests: two organisations, users by role, priced scenarios.

Prices come from the pricing demo data (the public list-price snapshot, the example quote
and the on-prem worked example), the same data a new user sees.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from estimator.core.presets import preset_scenario
from organisations.demo import demo_organisation
from planner.models import EstimationRun, Organisation, Project, Role, Scenario
from planner.services import (
    membership_grant,
    organisation_create,
    project_create,
    run_execute,
    run_start,
    scenario_create,
)
from pricing.demo import EXAMPLE_BOOK_NAME, EXAMPLE_QUOTE_REFERENCE, pricing_demo_load
from pricing.models import OnPremProfile, PriceEntry, VendorQuote


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
