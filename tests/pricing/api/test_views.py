"""The pricing REST API: reads for everyone signed in, writes for pricing admins only."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from pricing.api.views import PriceBookViewSet
from pricing.demo import WORKED_EXAMPLE
from pricing.models import Accelerator, PriceBook, PriceEntry, Provider, VendorQuote
from pricing.services import exchange_rate_create, price_entry_create

pytestmark = pytest.mark.django_db

CALCULATION_URL = "/api/v1/onprem-profiles/calculate/"
WORKED_EXAMPLE_FIELDS = {
    name: str(value) for name, value in WORKED_EXAMPLE.items() if name != "source"
}


def _entry_payload(book: PriceBook, **changes: Any) -> dict[str, Any]:
    return {
        "book": book.pk,
        "provider": "gcp",
        "region": "us-central1",
        "accelerator": "H100-SXM",
        "pricing_type": "spot",
        "price_per_accelerator_hour": "2.51",
    } | changes


# --- Permissions ----------------------------------------------------------------------------

READ_URLS = [
    "/api/v1/accelerators/",
    "/api/v1/providers/",
    "/api/v1/price-books/",
    "/api/v1/price-entries/",
    "/api/v1/quotes/",
    "/api/v1/onprem-profiles/",
    "/api/v1/exchange-rates/",
]


@pytest.mark.parametrize("url", READ_URLS)
def test_api_reads_need_authentication(url: str) -> None:
    assert APIClient().get(url).status_code in (401, 403)


@pytest.mark.parametrize("url", READ_URLS)
def test_api_reads_are_open_to_a_requester(
    url: str, requester_api: APIClient, draft_book: PriceBook
) -> None:
    assert requester_api.get(url).status_code == 200


def test_api_writes_are_forbidden_to_a_requester(
    requester_api: APIClient, draft_book: PriceBook
) -> None:
    entry = draft_book.entries.first()
    assert entry is not None
    writes = [
        ("post", "/api/v1/accelerators/", {"catalog_id": "X1"}),
        ("post", "/api/v1/providers/", {"slug": "x"}),
        ("post", "/api/v1/price-books/", {"name": "x"}),
        ("patch", f"/api/v1/price-books/{draft_book.pk}/", {"name": "x"}),
        ("delete", f"/api/v1/price-books/{draft_book.pk}/", None),
        ("post", f"/api/v1/price-books/{draft_book.pk}/publish/", None),
        ("post", f"/api/v1/price-books/{draft_book.pk}/copy/", None),
        ("post", "/api/v1/price-entries/", _entry_payload(draft_book)),
        ("patch", f"/api/v1/price-entries/{entry.pk}/", {"price_per_accelerator_hour": "0.01"}),
        ("delete", f"/api/v1/price-entries/{entry.pk}/", None),
        ("post", "/api/v1/quotes/", {"vendor": "x"}),
        ("post", "/api/v1/onprem-profiles/", {"name": "x"}),
        ("post", "/api/v1/exchange-rates/", {"rate": "1"}),
    ]
    for method, url, payload in writes:
        response = getattr(requester_api, method)(url, payload)
        assert response.status_code == 403, (method, url)
    entry.refresh_from_db()
    assert entry.price_per_accelerator_hour == Decimal("6.88")
    assert PriceBook.objects.filter(status=PriceBook.Status.DRAFT).count() == 1


def test_api_pricing_admin_creates_an_entry_in_a_draft(
    admin_api: APIClient, draft_book: PriceBook
) -> None:
    response = admin_api.post("/api/v1/price-entries/", _entry_payload(draft_book))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["provider"], body["accelerator"], body["currency"]) == ("gcp", "H100-SXM", "USD")
    assert body["price_per_accelerator_hour"] == "2.5100000000"


def test_api_accepts_a_token(requester: User, catalog: dict[str, Accelerator]) -> None:
    api = APIClient()
    token = api.post("/api/v1/auth/token/", {"username": "maya", "password": "maya-pass"}).json()[
        "token"
    ]
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = api.get("/api/v1/accelerators/H100-SXM/")
    assert response.status_code == 200
    assert response.json()["peak_tflops"]["bf16"] == catalog["H100-SXM"].peak_tflops_bf16


# --- Published books ------------------------------------------------------------------------


def test_api_published_book_refuses_changes_with_409(
    admin_api: APIClient, published_book: PriceBook
) -> None:
    entry = published_book.entries.first()
    assert entry is not None
    attempts = [
        admin_api.patch(f"/api/v1/price-books/{published_book.pk}/", {"name": "changed"}),
        admin_api.delete(f"/api/v1/price-books/{published_book.pk}/"),
        admin_api.post("/api/v1/price-entries/", _entry_payload(published_book)),
        admin_api.patch(f"/api/v1/price-entries/{entry.pk}/", {"price_per_accelerator_hour": "1"}),
        admin_api.delete(f"/api/v1/price-entries/{entry.pk}/"),
    ]
    for response in attempts:
        assert response.status_code == 409
        body = response.json()
        assert body["code"] == "published_book_immutable"
        assert "is published and cannot be changed" in body["detail"]
    assert published_book.entries.count() == 2
    published_book.refresh_from_db()
    assert published_book.name == "Q1 list prices"


def test_api_copy_makes_a_draft_that_can_change(
    admin_api: APIClient, published_book: PriceBook
) -> None:
    response = admin_api.post(
        f"/api/v1/price-books/{published_book.pk}/copy/", {"name": "Q2 draft"}
    )
    assert response.status_code == 201
    copy = response.json()
    assert (copy["status"], copy["entry_count"], copy["copied_from"]) == (
        "draft",
        2,
        published_book.pk,
    )
    renamed = admin_api.patch(f"/api/v1/price-books/{copy['id']}/", {"name": "Q2 list"})
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Q2 list"


def test_api_publish_freezes_a_draft(admin_api: APIClient, draft_book: PriceBook) -> None:
    response = admin_api.post(f"/api/v1/price-books/{draft_book.pk}/publish/")
    assert response.status_code == 200
    assert response.json()["status"] == "published"
    assert admin_api.delete(f"/api/v1/price-books/{draft_book.pk}/").status_code == 409


# --- Bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"price_per_accelerator_hour": "-1"}, "price_per_accelerator_hour", "negative price"),
        ({"price_per_accelerator_hour": "abc"}, "price_per_accelerator_hour", "valid number"),
        ({"accelerator": "H999"}, "accelerator", "does not exist"),
        ({"provider": "acme"}, "provider", "does not exist"),
        ({"pricing_type": "monthly"}, "pricing_type", "not a valid choice"),
        ({"observed_on": "2026-02-30"}, "observed_on", "wrong format"),
        ({"book": 999999}, "book", "does not exist"),
    ],
)
def test_api_bad_entry_input_is_a_400_naming_the_field(
    admin_api: APIClient, draft_book: PriceBook, changes: dict, field: str, reason: str
) -> None:
    response = admin_api.post("/api/v1/price-entries/", _entry_payload(draft_book) | changes)
    assert response.status_code == 400
    assert reason in " ".join(response.json()[field])


def test_api_duplicate_entry_is_a_409_naming_the_field(
    admin_api: APIClient, draft_book: PriceBook
) -> None:
    payload = _entry_payload(draft_book, provider="lambda", region="us-east-1")
    payload["pricing_type"] = "on_demand"
    response = admin_api.post("/api/v1/price-entries/", payload)
    assert response.status_code == 409
    assert response.json()["code"] == "duplicate"


def test_api_custom_accelerator_is_created_flagged_custom(
    admin_api: APIClient, catalog: dict[str, Accelerator]
) -> None:
    payload = {
        "catalog_id": "ACME-X1",
        "name": "Acme X1",
        "vendor": "Acme",
        "memory_gib": 96,
        "memory_bandwidth_tbs": 3.2,
        "peak_tflops_bf16": 750,
    }
    response = admin_api.post("/api/v1/accelerators/", payload)
    assert response.status_code == 201, response.json()
    assert response.json()["is_custom"] is True
    catalog_sku = admin_api.patch("/api/v1/accelerators/H100-SXM/", {"memory_gib": 1})
    assert catalog_sku.status_code == 400
    assert "estimator's catalog" in catalog_sku.json()["detail"]


# --- Filters and queries --------------------------------------------------------------------


@pytest.fixture
def many_entries(
    draft_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> PriceBook:
    regions = ["us-east-1", "us-west-2", "eu-west-1"]
    for accelerator in ("A100-80GB-SXM", "B200", "H200-SXM"):
        for region in regions:
            for pricing_type, price in (("on_demand", "4.00"), ("spot", "1.50")):
                price_entry_create(
                    book=draft_book,
                    provider=providers["aws"],
                    region=region,
                    accelerator=catalog[accelerator],
                    pricing_type=pricing_type,
                    price_per_accelerator_hour=Decimal(price),
                )
    return draft_book


def test_api_entry_filters_by_accelerator_provider_region_and_type(
    requester_api: APIClient, many_entries: PriceBook
) -> None:
    def ids(query: str) -> set[int]:
        response = requester_api.get(f"/api/v1/price-entries/?{query}")
        assert response.status_code == 200
        return {row["id"] for row in response.json()["results"]}

    entries = PriceEntry.objects.all()
    assert ids("accelerator=b200") == set(
        entries.filter(accelerator__catalog_id="B200").values_list("id", flat=True)
    )
    assert ids("provider=lambda") == set(
        entries.filter(provider__slug="lambda").values_list("id", flat=True)
    )
    assert ids("accelerator=H200-SXM&region=eu-west-1&pricing_type=spot") == set(
        entries.filter(
            accelerator__catalog_id="H200-SXM", region="eu-west-1", pricing_type="spot"
        ).values_list("id", flat=True)
    )
    assert len(ids("accelerator=H200-SXM&region=eu-west-1&pricing_type=spot")) == 1
    assert ids("book_status=published") == set()


def test_api_entry_filter_with_a_bad_choice_is_a_400_naming_it(requester_api: APIClient) -> None:
    response = requester_api.get("/api/v1/price-entries/?pricing_type=monthly")
    assert response.status_code == 400
    assert "pricing_type" in response.json()


def test_api_entry_list_runs_a_fixed_number_of_queries(
    requester_api: APIClient, many_entries: PriceBook, django_assert_num_queries: Any
) -> None:
    # One count for the pagination, one select joining book, provider and accelerator.
    with django_assert_num_queries(2):
        response = requester_api.get("/api/v1/price-entries/")
    assert response.json()["count"] == 20


# --- On-prem calculation and currency conversion --------------------------------------------


def test_api_onprem_calculation_gives_the_worked_example(requester_api: APIClient) -> None:
    response = requester_api.post(CALCULATION_URL, WORKED_EXAMPLE_FIELDS)
    assert response.status_code == 200
    body = response.json()
    assert body["price_per_gpu_hour"] == "2.6481"
    assert body["currency"] == "USD"
    assert body["capital_recovery_factor"] == "0.301921"
    assert body["per_gpu_year"] == {
        "capital": "12580.03",
        "power": "837.02",
        "colocation": "3057.60",
        "operations": "2083.33",
        "total": "18557.98",
    }
    assert set(body["per_gpu_hour"]) == {"capital", "power", "colocation", "operations"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"utilisation_percent": "0"}, "utilisation_percent"),
        ({"pue": "0.5"}, "pue"),
        ({"server_price": "lots"}, "server_price"),
        ({"gpus_per_server": ""}, "gpus_per_server"),
    ],
)
def test_api_onprem_calculation_bad_field_is_a_400_naming_it(
    requester_api: APIClient, changes: dict, field: str
) -> None:
    response = requester_api.post(CALCULATION_URL, WORKED_EXAMPLE_FIELDS | changes)
    assert response.status_code == 400
    assert field in response.json()


def test_api_onprem_calculation_missing_field_is_a_400(requester_api: APIClient) -> None:
    fields = {k: v for k, v in WORKED_EXAMPLE_FIELDS.items() if k != "pue"}
    response = requester_api.post(CALCULATION_URL, fields)
    assert response.status_code == 400
    assert response.json() == {"pue": ["This field is required."]}


def test_api_onprem_profile_lists_its_price(admin_api: APIClient) -> None:
    created = admin_api.post("/api/v1/onprem-profiles/", WORKED_EXAMPLE_FIELDS | {"name": "DC"})
    assert created.status_code == 201, created.json()
    assert created.json()["cost"]["price_per_gpu_hour"] == "2.6481"


def test_api_convert_says_which_rate_it_used(requester_api: APIClient) -> None:
    exchange_rate_create(
        base_currency="EUR",
        quote_currency="USD",
        rate=Decimal("1.10"),
        rate_date=date(2026, 1, 2),
        source="ECB reference rate",
    )
    url = "/api/v1/exchange-rates/convert/?amount=100&from_currency=EUR&to_currency=USD"
    response = requester_api.get(f"{url}&on=2026-02-01")
    assert response.status_code == 200
    body = response.json()
    assert (body["amount"], body["rate"], body["rate_date"], body["rate_source"]) == (
        "110.0000000000",
        "1.1000000000",
        "2026-01-02",
        "ECB reference rate",
    )
    missing = requester_api.get(f"{url}&on=2025-12-31")
    assert missing.status_code == 400
    assert missing.json()["code"] == "no_exchange_rate"


def test_api_quotes_flag_expired_ones(
    admin_api: APIClient, catalog: dict[str, Accelerator]
) -> None:
    payload = {
        "vendor": "Acme",
        "accelerator": "H100-SXM",
        "accelerator_count": 64,
        "price_per_accelerator_hour": "2.00",
        "currency": "USD",
        "valid_from": "2024-01-01",
        "valid_until": "2024-12-31",
    }
    assert admin_api.post("/api/v1/quotes/", payload).status_code == 201
    rows = admin_api.get("/api/v1/quotes/").json()["results"]
    assert [row["validity_today"] for row in rows] == ["expired"]
    assert [row["is_example"] for row in rows] == [False]
    example = admin_api.post("/api/v1/quotes/", {**payload, "is_example": True}, format="json")
    assert example.json()["is_example"] is True  # budgets on it are warned
    selectable = admin_api.get("/api/v1/quotes/?selectable_on=2024-06-01").json()
    assert selectable["count"] == 2
    assert admin_api.get("/api/v1/quotes/?selectable_on=2025-01-01").json()["count"] == 0


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"term_months": -678632728}, "term_months"),  # found by schemathesis: was a 500
        ({"term_months": 601}, "term_months"),
        ({"term_months": 0}, "term_months"),
        ({"accelerator_count": 10**12}, "accelerator_count"),
    ],
)
def test_api_quote_numbers_out_of_range_are_a_400(
    admin_api: APIClient,
    catalog: dict[str, Accelerator],
    changes: dict[str, int],
    field: str,
) -> None:
    payload = {
        "vendor": "Acme",
        "accelerator": "H100-SXM",
        "accelerator_count": 64,
        "price_per_accelerator_hour": "2.00",
        "currency": "USD",
        "valid_from": "2024-01-01",
        "valid_until": "2024-12-31",
    }
    created = admin_api.post("/api/v1/quotes/", payload)
    assert created.status_code == 201
    response = admin_api.put(
        f"/api/v1/quotes/{created.json()['id']}/", {**payload, **changes}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert field in str(response.json())
    assert VendorQuote.objects.get().accelerator_count == 64


def test_a_value_beyond_its_column_is_a_400_not_a_500() -> None:
    """The net under every check: PostgreSQL's "out of range" (a ``DataError``)."""
    from django.db import DataError

    from lib.api import exception_handler

    response = exception_handler(DataError("smallint out of range"), {})
    assert response is not None
    assert response.status_code == 400
    assert response.data["code"] == "out_of_range"


def test_api_schema_documents_the_pricing_endpoints(client: Client, requester: User) -> None:
    client.force_login(requester)
    schema = client.get("/api/schema/").content.decode()
    for path in ("/api/v1/price-entries/", CALCULATION_URL, "/api/v1/exchange-rates/convert/"):
        assert path in schema
    assert "OnPremCostOutput" in schema
    assert "PriceEntryInput" in schema


# --- Copy of a deleted book, pagination -----------------------------------------------------


def test_api_copy_of_a_book_deleted_meanwhile_is_a_409(
    admin_api: APIClient, draft_book: PriceBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = PriceBook.objects.get(pk=draft_book.pk)
    monkeypatch.setattr(PriceBookViewSet, "get_object", lambda self: stale)
    PriceBook.objects.filter(pk=draft_book.pk).delete()
    response = admin_api.post(f"/api/v1/price-books/{draft_book.pk}/copy/", {})
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "price_book_gone"
    assert "no longer exists" in body["detail"]
    assert not PriceBook.objects.exists()


def test_api_copy_of_a_deleted_book_is_a_404(admin_api: APIClient, draft_book: PriceBook) -> None:
    pk = draft_book.pk
    draft_book.delete()
    assert admin_api.post(f"/api/v1/price-books/{pk}/copy/", {}).status_code == 404


def test_api_entries_of_a_book_are_paginated(
    requester_api: APIClient, draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    accelerator = Accelerator.objects.get(catalog_id="B200")
    PriceEntry.objects.bulk_create(
        PriceEntry(
            book=draft_book,
            provider=providers["gcp"],
            region=f"region-{index}",
            accelerator=accelerator,
            pricing_type="spot",
            price_per_accelerator_hour=Decimal("2.5"),
        )
        for index in range(118)
    )
    first = requester_api.get(f"/api/v1/price-entries/?book={draft_book.pk}").json()
    assert (first["count"], len(first["results"]), first["previous"]) == (120, 50, None)
    last = requester_api.get(f"/api/v1/price-entries/?book={draft_book.pk}&page=3").json()
    assert (len(last["results"]), last["next"]) == (20, None)


@pytest.mark.parametrize("url", ["/api/v1/providers/aws%00/", "/api/v1/accelerators/H100%00/"])
def test_api_detail_of_a_slug_with_a_nul_is_a_404(
    requester_api: APIClient, providers: dict[str, Provider], url: str
) -> None:
    assert requester_api.get(url).status_code == 404
