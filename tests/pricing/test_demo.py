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
    assert any("published with 72 entries (16 flagged" in line for line in first)
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


#: The cards people fine-tune on, with the on-demand prices per GPU-hour the demo book lists
#: for them (RunPod's secure cloud and Lambda, skypilot-catalog v7 copies; see data/README.md).
FINE_TUNING_PRICES = {
    "L40S": {("runpod", "0.43")},
    "L4": {("runpod", "0.44")},
    "RTX-A6000": {("runpod", "0.49"), ("lambda", "0.8")},
    "RTX-6000-ADA": {("runpod", "0.77")},
}


def test_pricing_demo_load_prices_the_fine_tuning_cards() -> None:
    pricing_demo_load()
    for catalog_id, expected in FINE_TUNING_PRICES.items():
        assert catalog_id in load_catalog()
        entries = PriceEntry.objects.filter(
            book__name=EXAMPLE_BOOK_NAME,
            accelerator__catalog_id=catalog_id,
            pricing_type="on_demand",
        )
        found = {(e.provider.slug, f"{e.price_per_accelerator_hour.normalize()}") for e in entries}
        assert found == expected, catalog_id
        assert all("skypilot-catalog catalogs/v7/" in entry.source for entry in entries)
    flagged = PriceEntry.objects.filter(
        book__name=EXAMPLE_BOOK_NAME, accelerator__catalog_id="L40S"
    )
    assert all(entry.data_flag.startswith("SUSPECT") for entry in flagged)  # spot > on-demand
