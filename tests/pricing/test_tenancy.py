"""Tenancy: an organisation's quotes, on-prem profiles and private price books are seen by
its members only (404 elsewhere) and changed by its pricing admins only; public books are
seen by everyone and changed by staff only."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from organisations.models import Organisation
from pricing.demo import WORKED_EXAMPLE
from pricing.models import Accelerator, OnPremProfile, PriceBook, PriceEntry, VendorQuote
from pricing.services import (
    onprem_profile_create,
    price_book_create,
    price_entry_create,
    quote_create,
)
from tests.pricing.conftest import FETCHED_AT

Records = dict[str, Any]


def _api(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def secrets(
    organisation: Organisation, catalog: dict[str, Accelerator], providers: dict[str, Any]
) -> Records:
    """A quote, an on-prem profile and a private draft book (with an entry) of the demo
    organisation."""
    quote = quote_create(
        user=None,
        organisation=organisation,
        vendor="Secret Compute",
        reference="NEGOTIATED-7",
        accelerator=catalog["H100-SXM"],
        accelerator_count=64,
        price_per_accelerator_hour=Decimal("1.11"),
        currency="USD",
        valid_from=date(2026, 1, 1),
        valid_until=date(2099, 12, 31),
    )
    profile = onprem_profile_create(
        user=None, organisation=organisation, name="Our DC", **dict(WORKED_EXAMPLE)
    )
    book = price_book_create(
        user=None,
        organisation=organisation,
        name="Our negotiated rates",
        currency="USD",
        source="contract",
        fetched_at=FETCHED_AT,
    )
    entry = price_entry_create(
        book=book,
        provider=providers["aws"],
        region="us-east-1",
        accelerator=catalog["H100-SXM"],
        pricing_type="on_demand",
        price_per_accelerator_hour=Decimal("1.50"),
    )
    return {"quote": quote, "profile": profile, "book": book, "entry": entry}


DETAIL_URLS = {
    "quote": "/api/v1/quotes/{pk}/",
    "profile": "/api/v1/onprem-profiles/{pk}/",
    "book": "/api/v1/price-books/{pk}/",
    "entry": "/api/v1/price-entries/{pk}/",
}
LIST_URLS = {
    "quote": "/api/v1/quotes/",
    "profile": "/api/v1/onprem-profiles/",
    "book": "/api/v1/price-books/",
    "entry": "/api/v1/price-entries/",
}


def _ids(response: Any) -> set[int]:
    assert response.status_code == 200
    return {row["id"] for row in response.json()["results"]}


@pytest.mark.parametrize("kind", sorted(DETAIL_URLS))
def test_members_see_their_organisations_records_and_others_get_404(
    secrets: Records, requester: User, other_pricing_admin: User, kind: str
) -> None:
    record = secrets[kind]
    url = DETAIL_URLS[kind].format(pk=record.pk)
    assert record.pk in _ids(_api(requester).get(LIST_URLS[kind]))
    assert _api(requester).get(url).status_code == 200
    outsider = _api(other_pricing_admin)
    assert record.pk not in _ids(outsider.get(LIST_URLS[kind]))
    assert outsider.get(url).status_code == 404
    assert outsider.patch(url, {"region": "x", "name": "x", "vendor": "x"}).status_code == 404
    assert outsider.delete(url).status_code == 404
    assert type(record).objects.filter(pk=record.pk).exists()


def test_the_api_names_the_organisation_of_a_record(
    secrets: Records, requester: User, organisation: Organisation
) -> None:
    body = _api(requester).get(DETAIL_URLS["quote"].format(pk=secrets["quote"].pk)).json()
    assert body["organisation"] == organisation.pk


def test_a_price_entry_filter_by_another_organisations_book_finds_nothing(
    secrets: Records, other_pricing_admin: User
) -> None:
    response = _api(other_pricing_admin).get(f"/api/v1/price-entries/?book={secrets['book'].pk}")
    assert _ids(response) == set()


def test_a_member_who_is_not_pricing_admin_may_read_but_not_change(
    secrets: Records, requester: User
) -> None:
    url = DETAIL_URLS["quote"].format(pk=secrets["quote"].pk)
    assert _api(requester).patch(url, {"vendor": "Mine now"}).status_code == 403


def test_a_pricing_admin_changes_only_their_organisations_quotes(
    secrets: Records, pricing_admin: User, other_pricing_admin: User
) -> None:
    url = DETAIL_URLS["quote"].format(pk=secrets["quote"].pk)
    assert _api(other_pricing_admin).patch(url, {"vendor": "Hijacked"}).status_code == 404
    assert _api(pricing_admin).patch(url, {"vendor": "Renamed"}).status_code == 200
    assert VendorQuote.objects.get(pk=secrets["quote"].pk).vendor == "Renamed"


def test_public_books_are_seen_by_all_and_changed_by_staff_only(
    draft_book: PriceBook, pricing_admin: User, other_pricing_admin: User
) -> None:
    assert draft_book.organisation is None
    url = DETAIL_URLS["book"].format(pk=draft_book.pk)
    assert _api(other_pricing_admin).get(url).status_code == 200
    assert _api(other_pricing_admin).patch(url, {"name": "Mine"}).status_code == 403
    entry = draft_book.entries.first()
    assert entry is not None
    entry_url = DETAIL_URLS["entry"].format(pk=entry.pk)
    assert _api(other_pricing_admin).delete(entry_url).status_code == 403
    assert _api(pricing_admin).patch(url, {"name": "Staff renamed"}).status_code == 200  # staff


def test_a_new_quote_takes_the_organisation_of_its_pricing_admin(
    catalog: dict[str, Accelerator], other_pricing_admin: User, other_organisation: Organisation
) -> None:
    response = _api(other_pricing_admin).post(
        "/api/v1/quotes/",
        {
            "vendor": "Globex GPU",
            "accelerator": "H100-SXM",
            "accelerator_count": 8,
            "price_per_accelerator_hour": "2.00",
            "currency": "USD",
            "valid_from": "2026-01-01",
            "valid_until": "2026-12-31",
        },
    )
    assert response.status_code == 201, response.json()
    assert VendorQuote.objects.get(pk=response.json()["id"]).organisation == other_organisation


def test_a_write_into_another_organisation_is_a_400_naming_it(
    catalog: dict[str, Accelerator], other_pricing_admin: User, organisation: Organisation
) -> None:
    fields = {"name": "Sneaky DC", "organisation": organisation.pk}
    response = _api(other_pricing_admin).post(
        "/api/v1/onprem-profiles/",
        {name: str(value) for name, value in WORKED_EXAMPLE.items()} | fields,
    )
    assert response.status_code == 400
    assert "organisation" in response.json()
    assert not OnPremProfile.objects.filter(name="Sneaky DC").exists()


def test_a_pricing_admin_of_several_organisations_must_name_one(
    catalog: dict[str, Accelerator],
    pricing_admin: User,
    other_organisation: Organisation,
) -> None:
    from organisations.services import membership_grant

    membership_grant(organisation=other_organisation, user=pricing_admin, role="pricing_admin")
    payload = {name: str(value) for name, value in WORKED_EXAMPLE.items()} | {"name": "DC 2"}
    refused = _api(pricing_admin).post("/api/v1/onprem-profiles/", payload)
    assert refused.status_code == 400
    assert "organisation" in refused.json()
    named = payload | {"organisation": other_organisation.pk}
    created = _api(pricing_admin).post("/api/v1/onprem-profiles/", named)
    assert created.status_code == 201
    assert created.json()["organisation"] == other_organisation.pk


def test_an_organisation_may_reuse_another_organisations_profile_name(
    secrets: Records, other_pricing_admin: User
) -> None:
    payload = {name: str(value) for name, value in WORKED_EXAMPLE.items()} | {"name": "Our DC"}
    assert _api(other_pricing_admin).post("/api/v1/onprem-profiles/", payload).status_code == 201


def test_no_entry_goes_into_another_organisations_book(
    secrets: Records, other_pricing_admin: User
) -> None:
    payload = {
        "book": secrets["book"].pk,
        "provider": "gcp",
        "region": "us-central1",
        "accelerator": "H100-SXM",
        "pricing_type": "spot",
        "price_per_accelerator_hour": "0.01",
    }
    response = _api(other_pricing_admin).post("/api/v1/price-entries/", payload)
    assert response.status_code == 400
    assert "book" in response.json()
    assert secrets["book"].entries.count() == 1


def test_copying_a_public_book_makes_a_private_draft(
    published_book: PriceBook, other_pricing_admin: User, other_organisation: Organisation
) -> None:
    url = f"/api/v1/price-books/{published_book.pk}/copy/"
    response = _api(other_pricing_admin).post(url, {})
    assert response.status_code == 201, response.json()
    assert response.json()["organisation"] == other_organisation.pk


# --- Pages ----------------------------------------------------------------------------------


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_pages_show_an_organisations_prices_to_its_members_only(
    secrets: Records, requester: User, other_pricing_admin: User
) -> None:
    member, outsider = _login(requester), _login(other_pricing_admin)
    for url, secret in (
        ("/pricing/quotes/", "NEGOTIATED-7"),
        ("/pricing/onprem/", "Our DC"),
        ("/pricing/books/", "Our negotiated rates"),
        ("/pricing/catalog/H100-SXM/", "Secret Compute"),
    ):
        assert secret in member.get(url).content.decode(), url
        assert secret not in outsider.get(url).content.decode(), url
    book_url = f"/pricing/books/{secrets['book'].pk}/"
    assert member.get(book_url).status_code == 200
    assert outsider.get(book_url).status_code == 404
    assert outsider.post(f"{book_url}publish/").status_code == 404
    assert outsider.post(f"{book_url}copy/").status_code == 404


def test_a_pricing_admin_of_another_organisation_cannot_publish_a_public_draft(
    draft_book: PriceBook, other_pricing_admin: User
) -> None:
    response = _login(other_pricing_admin).post(f"/pricing/books/{draft_book.pk}/publish/")
    assert response.status_code == 403
    draft_book.refresh_from_db()
    assert not draft_book.is_published


# --- Admin ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [VendorQuote, OnPremProfile, PriceBook, PriceEntry])
def test_admin_lists_only_the_users_organisations_records(
    secrets: Records, draft_book: PriceBook, other_pricing_admin: User, model: type
) -> None:
    other_pricing_admin.is_staff = True
    other_pricing_admin.save()
    request = RequestFactory().get("/admin/")
    request.user = other_pricing_admin
    listed = set(admin.site._registry[model].get_queryset(request))
    assert not listed & {secrets["quote"], secrets["profile"], secrets["book"], secrets["entry"]}
    if model is PriceBook:
        assert draft_book in listed  # public
    root = User.objects.create_superuser("root")
    request.user = root
    assert set(admin.site._registry[model].get_queryset(request)) & set(secrets.values())


def test_admin_quote_of_another_organisation_is_a_404(
    secrets: Records, other_pricing_admin: User
) -> None:
    other_pricing_admin.is_staff = True
    other_pricing_admin.save()
    url = f"/admin/pricing/vendorquote/{secrets['quote'].pk}/change/"
    response = _login(other_pricing_admin).get(url)
    assert response.status_code in (302, 404)  # the admin redirects a missing object home
    assert "Secret Compute" not in response.content.decode()


def test_a_pricing_admin_of_two_organisations_picks_one_when_saving_a_profile(
    secrets: Records, pricing_admin: User, other_organisation: Organisation
) -> None:
    from organisations.services import membership_grant

    membership_grant(organisation=other_organisation, user=pricing_admin, role="pricing_admin")
    client = _login(pricing_admin)
    page = client.get(f"/pricing/onprem/?profile={secrets['profile'].pk}").content.decode()
    assert 'name="organisation"' in page
    figures = {name: str(value) for name, value in WORKED_EXAMPLE.items()}
    posted = figures | {"name": "Globex DC", "organisation": str(other_organisation.pk)}
    assert client.post("/pricing/onprem/save/", posted).status_code == 302
    assert OnPremProfile.objects.get(name="Globex DC").organisation == other_organisation


def test_a_pricing_admin_of_one_organisation_is_not_asked_which(
    secrets: Records, other_pricing_admin: User, other_organisation: Organisation
) -> None:
    client = _login(other_pricing_admin)
    assert 'name="organisation"' not in client.get("/pricing/import/").content.decode()
    figures = {name: str(value) for name, value in WORKED_EXAMPLE.items()}
    response = client.post("/pricing/onprem/save/", figures | {"name": "Ours"})
    assert response.status_code == 302
    assert OnPremProfile.objects.get(name="Ours").organisation == other_organisation
