from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, Permission
from django.db.models import Model

from estimator.core.catalog import load_catalog
from planner.common.roles import PRICING_ADMIN
from pricing.demo import EXAMPLE_BOOK_NAME, pricing_demo_load
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    PriceEntry,
    Provider,
    VendorQuote,
)
from pricing.selectors import onprem_profile_cost, quotes_selectable

pytestmark = pytest.mark.django_db


def _counts() -> list[int]:
    models: list[type[Model]] = [
        Accelerator,
        Provider,
        PriceBook,
        PriceEntry,
        ExchangeRate,
        OnPremProfile,
        VendorQuote,
    ]
    return [model._default_manager.count() for model in models]


def test_pricing_demo_load_is_idempotent() -> None:
    first = pricing_demo_load()
    counts = _counts()
    second = pricing_demo_load()
    assert _counts() == counts
    assert any("published with 65 entries (14 flagged" in line for line in first)
    assert any("present" in line for line in second)


def test_pricing_demo_load_seeds_what_a_new_user_needs() -> None:
    pricing_demo_load()
    assert set(Accelerator.objects.values_list("catalog_id", flat=True)) == set(load_catalog())
    assert set(Provider.objects.values_list("kind", flat=True)) == {"cloud", "gpu_cloud", "onprem"}
    book = PriceBook.objects.get(name=EXAMPLE_BOOK_NAME)
    assert book.is_published
    assert "snapshot" in book.name.lower()
    assert "Uncertain" in book.dates_note
    assert ExchangeRate.objects.filter(source__startswith="Demo rate").count() == 4
    profile = OnPremProfile.objects.get()
    assert round(onprem_profile_cost(profile=profile).price_per_gpu_hour, 2) == Decimal("2.65")
    from django.utils import timezone

    quote = quotes_selectable(on=timezone.localdate(), quotes=VendorQuote.objects.all()).get()
    assert quote.is_example
    assert quote.organisation.name == "Acme AI Research"
    assert profile.organisation == quote.organisation
    assert book.organisation is None  # the list-price snapshot is public
    assert "not a real offer" in quote.vendor


def test_pricing_demo_load_grants_the_pricing_admin_group_model_permissions() -> None:
    pricing_demo_load()
    granted = set(Group.objects.get(name=PRICING_ADMIN).permissions.all())
    assert granted == set(Permission.objects.filter(content_type__app_label="pricing"))
    assert "change_pricebook" in {p.codename for p in granted}
