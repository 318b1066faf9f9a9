"""Text the database cannot store is a 400 naming the field on every pricing write endpoint:
a NUL character (in text, a slug to look up, a JSON string) or text longer than its column.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from organisations.demo import demo_organisation
from pricing.api import serializers as io
from pricing.demo import WORKED_EXAMPLE
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    PriceEntry,
    Provider,
    VendorQuote,
)
from pricing.services import (
    accelerator_custom_create,
    onprem_profile_create,
    quote_create,
)
from tests.pricing.api.inputs import (
    Endpoint,
    World,
    column_bounds_kept,
    long_cases,
    long_refused,
    nul_cases,
    nul_refused,
)

pytestmark = pytest.mark.django_db

TABLES = (Accelerator, Provider, PriceBook, PriceEntry, VendorQuote, OnPremProfile, ExchangeRate)
ONPREM = {name: str(value) for name, value in WORKED_EXAMPLE.items()}


def _none(world: World) -> dict[str, Any]:
    return {}


ENDPOINTS = [
    Endpoint(
        "accelerator-create",
        "post",
        lambda w: "/api/v1/accelerators/",
        lambda w: {
            "catalog_id": "ACME-X2",
            "name": "Acme X2",
            "vendor": "Acme",
            "memory_gib": 96,
            "memory_bandwidth_tbs": 3.2,
        },
        io.AcceleratorInput,
        TABLES,
    ),
    Endpoint(
        "accelerator-update",
        "patch",
        lambda w: f"/api/v1/accelerators/{w['custom'].catalog_id}/",
        _none,
        io.AcceleratorUpdateInput,
        TABLES,
    ),
    Endpoint(
        "provider-create",
        "post",
        lambda w: "/api/v1/providers/",
        lambda w: {"slug": "coreweave", "name": "CoreWeave", "kind": "gpu_cloud"},
        io.ProviderInput,
        TABLES,
    ),
    Endpoint(
        "provider-update",
        "patch",
        lambda w: "/api/v1/providers/aws/",
        _none,
        io.ProviderInput,
        TABLES,
    ),
    Endpoint(
        "price-book-create",
        "post",
        lambda w: "/api/v1/price-books/",
        lambda w: {
            "name": "Q2",
            "currency": "USD",
            "source": "list prices",
            "fetched_at": "2026-03-01T00:00:00Z",
        },
        io.PriceBookInput,
        TABLES,
    ),
    Endpoint(
        "price-book-update",
        "patch",
        lambda w: f"/api/v1/price-books/{w['book'].pk}/",
        _none,
        io.PriceBookInput,
        TABLES,
    ),
    Endpoint(
        "price-book-copy",
        "post",
        lambda w: f"/api/v1/price-books/{w['book'].pk}/copy/",
        lambda w: {"name": "Copy"},
        io.PriceBookCopyInput,
        TABLES,
    ),
    Endpoint(
        "price-entry-create",
        "post",
        lambda w: "/api/v1/price-entries/",
        lambda w: {
            "book": w["book"].pk,
            "provider": "gcp",
            "region": "us-central1",
            "accelerator": "H100-SXM",
            "pricing_type": "spot",
            "price_per_accelerator_hour": "2.51",
        },
        io.PriceEntryInput,
        TABLES,
    ),
    Endpoint(
        "price-entry-update",
        "patch",
        lambda w: f"/api/v1/price-entries/{w['entry'].pk}/",
        _none,
        io.PriceEntryUpdateInput,
        TABLES,
    ),
    Endpoint(
        "quote-create",
        "post",
        lambda w: "/api/v1/quotes/",
        lambda w: {
            "vendor": "Acme",
            "accelerator": "H100-SXM",
            "provider": "aws",
            "accelerator_count": 64,
            "price_per_accelerator_hour": "2.00",
            "currency": "USD",
            "valid_from": "2026-01-01",
            "valid_until": "2026-12-31",
        },
        io.QuoteInput,
        TABLES,
    ),
    Endpoint(
        "quote-update",
        "patch",
        lambda w: f"/api/v1/quotes/{w['quote'].pk}/",
        _none,
        io.QuoteInput,
        TABLES,
    ),
    Endpoint(
        "onprem-profile-create",
        "post",
        lambda w: "/api/v1/onprem-profiles/",
        lambda w: ONPREM | {"name": "DC 2", "accelerator": "H100-SXM"},
        io.OnPremProfileInput,
        TABLES,
    ),
    Endpoint(
        "onprem-profile-update",
        "patch",
        lambda w: f"/api/v1/onprem-profiles/{w['profile'].pk}/",
        _none,
        io.OnPremProfileInput,
        TABLES,
    ),
    Endpoint(
        "onprem-calculate",
        "post",
        lambda w: "/api/v1/onprem-profiles/calculate/",
        lambda w: {k: v for k, v in ONPREM.items() if k != "source"},
        io.OnPremInput,
        TABLES,
    ),
    Endpoint(
        "exchange-rate-create",
        "post",
        lambda w: "/api/v1/exchange-rates/",
        lambda w: {
            "base_currency": "EUR",
            "quote_currency": "USD",
            "rate": "1.1",
            "rate_date": "2026-01-02",
            "source": "ECB",
        },
        io.ExchangeRateInput,
        TABLES,
    ),
    Endpoint(
        "exchange-rate-convert",
        "get",
        lambda w: "/api/v1/exchange-rates/convert/",
        lambda w: {"amount": "100", "from_currency": "EUR", "to_currency": "USD"},
        io.ConversionQuery,
        TABLES,
    ),
]


@pytest.fixture
def world(draft_book: PriceBook, catalog: dict[str, Accelerator]) -> World:
    """One record of each kind for the updates to change."""
    custom = accelerator_custom_create(
        user=None, catalog_id="ACME-X1", name="Acme X1", vendor="Acme", memory_gib=96,
        memory_bandwidth_tbs=3.2,
    )  # fmt: skip
    quote = quote_create(
        user=None,
        organisation=demo_organisation(),
        vendor="Acme",
        accelerator=catalog["H100-SXM"],
        accelerator_count=64,
        price_per_accelerator_hour=Decimal("2.00"),
        currency="USD",
        valid_from=date(2026, 1, 1),
        valid_until=date(2026, 12, 31),
    )
    profile = onprem_profile_create(
        user=None, organisation=demo_organisation(), name="DC 1", **dict(WORKED_EXAMPLE)
    )
    entry = draft_book.entries.first()
    return {"book": draft_book, "entry": entry, "custom": custom, "quote": quote,
            "profile": profile}  # fmt: skip


@pytest.mark.parametrize(("endpoint", "field"), list(nul_cases(ENDPOINTS)))
def test_api_nul_in_any_field_is_a_400_naming_it(
    admin_api: APIClient, world: World, endpoint: Endpoint, field: str
) -> None:
    nul_refused(admin_api, world, endpoint, field)


@pytest.mark.parametrize(("endpoint", "field", "limit"), list(long_cases(ENDPOINTS)))
def test_api_text_over_its_column_is_a_400_naming_it(
    admin_api: APIClient, world: World, endpoint: Endpoint, field: str, limit: int
) -> None:
    long_refused(admin_api, world, endpoint, field, limit)


def test_api_provider_website_over_200_characters_is_a_400(admin_api: APIClient) -> None:
    body = {"slug": "acme", "name": "Acme", "kind": "cloud"}
    website = "https://example.com/" + "a" * 190
    response = admin_api.post("/api/v1/providers/", body | {"website": website})
    assert response.status_code == 400
    assert response.json() == {"website": ["Ensure this field has no more than 200 characters."]}
    assert not Provider.objects.exists()


@pytest.mark.parametrize(
    ("serializer", "model"),
    [
        (io.AcceleratorInput, Accelerator),
        (io.ProviderInput, Provider),
        (io.PriceBookInput, PriceBook),
        (io.PriceBookCopyInput, PriceBook),
        (io.PriceEntryInput, PriceEntry),
        (io.QuoteInput, VendorQuote),
        (io.OnPremProfileInput, OnPremProfile),
        (io.ExchangeRateInput, ExchangeRate),
    ],
)
def test_api_every_text_field_is_bounded_by_its_column(serializer: Any, model: Any) -> None:
    assert column_bounds_kept(serializer, model) == []
