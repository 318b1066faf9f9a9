"""Fixtures of the pricing tests: the real catalog, providers, users by role in two
organisations, price books."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from organisations.demo import demo_organisation
from organisations.models import Organisation
from organisations.services import membership_grant, organisation_create
from planner.common.roles import PRICING_ADMIN, REQUESTER
from pricing.demo import pricing_admin_permissions_grant
from pricing.models import Accelerator, PriceBook, Provider, VendorQuote
from pricing.services import (
    accelerator_catalog_sync,
    price_book_create,
    price_book_publish,
    price_entry_create,
    provider_create,
    quote_create,
)

FETCHED_AT = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def catalog(db: None) -> dict[str, Accelerator]:
    accelerator_catalog_sync()
    return {a.catalog_id: a for a in Accelerator.objects.all()}


@pytest.fixture
def providers(db: None) -> dict[str, Provider]:
    specs = [("aws", "AWS", "cloud"), ("lambda", "Lambda", "gpu_cloud"), ("gcp", "GCP", "cloud")]
    return {slug: provider_create(slug=slug, name=name, kind=kind) for slug, name, kind in specs}


@pytest.fixture
def organisation(db: None) -> Organisation:
    """The demo organisation: the demo's quote and on-prem profile are its."""
    return demo_organisation()


@pytest.fixture
def other_organisation(db: None) -> Organisation:
    return organisation_create(name="Globex Labs")


def _user_with_role(
    username: str, role: str, organisation: Organisation, *, is_staff: bool = False
) -> User:
    """A member of ``organisation`` holding ``role`` there, in the group of the role too."""
    user = User.objects.create_user(username, password=f"{username}-pass", is_staff=is_staff)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    membership_grant(organisation=organisation, user=user, role=role)
    return user


@pytest.fixture
def requester(organisation: Organisation) -> User:
    return _user_with_role("maya", REQUESTER, organisation)


@pytest.fixture
def pricing_admin(organisation: Organisation) -> User:
    """Pricing admin of the demo organisation, and staff (may change public books)."""
    pricing_admin_permissions_grant()
    return _user_with_role("ivan", PRICING_ADMIN, organisation, is_staff=True)


@pytest.fixture
def other_pricing_admin(other_organisation: Organisation) -> User:
    """Pricing admin of another organisation, not staff."""
    pricing_admin_permissions_grant()
    return _user_with_role("olga", PRICING_ADMIN, other_organisation)


@pytest.fixture
def draft_book(catalog: dict[str, Accelerator], providers: dict[str, Provider]) -> PriceBook:
    book = price_book_create(
        user=None, name="Q1 list prices", currency="USD", source="test", fetched_at=FETCHED_AT
    )
    price_entry_create(
        book=book,
        provider=providers["aws"],
        region="us-east-1",
        accelerator=catalog["H100-SXM"],
        pricing_type="on_demand",
        price_per_instance_hour=Decimal("55.04"),
        accelerators_per_instance=8,
        instance_type="p5.48xlarge",
    )
    price_entry_create(
        book=book,
        provider=providers["lambda"],
        region="us-east-1",
        accelerator=catalog["H100-SXM"],
        pricing_type="on_demand",
        price_per_accelerator_hour=Decimal("3.99"),
    )
    return book


@pytest.fixture
def published_book(draft_book: PriceBook) -> PriceBook:
    return price_book_publish(book=draft_book, user=None)


@pytest.fixture
def requester_api(requester: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(requester)
    return api


@pytest.fixture
def admin_api(pricing_admin: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(pricing_admin)
    return api


@pytest.fixture
def term_quote(organisation: Organisation, catalog: dict[str, Accelerator]) -> VendorQuote:
    """256 H100s for 12 months at 4,709,376 USD (the demo's figures): 2.10 USD a GPU-hour."""
    return quote_create(
        user=None,
        organisation=organisation,
        vendor="Example Compute",
        reference="Q-7",
        accelerator=catalog["H100-SXM"],
        accelerator_count=256,
        total_price=Decimal("4709376.00"),
        term_months=12,
        currency="USD",
        valid_from=date(2026, 1, 1),
        valid_until=date(2099, 12, 31),
    )
