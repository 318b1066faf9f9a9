"""The Django admin: published books and their entries are read-only there."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pricing.models import (
    Accelerator,
    PriceAuditEvent,
    PriceBook,
    PriceEntry,
    Provider,
    VendorQuote,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(pricing_admin: User) -> Client:
    client = Client()
    client.force_login(pricing_admin)
    return client


def _book_form(book: PriceBook, **changes: str) -> dict[str, str]:
    data = {
        "name": book.name,
        "description": book.description,
        "currency": book.currency,
        "source": book.source,
        "fetched_at_0": book.fetched_at.strftime("%Y-%m-%d"),
        "fetched_at_1": book.fetched_at.strftime("%H:%M:%S"),
        "dates_note": book.dates_note,
        "entries-TOTAL_FORMS": "0",
        "entries-INITIAL_FORMS": "0",
        "entries-MIN_NUM_FORMS": "0",
        "entries-MAX_NUM_FORMS": "1000",
    }
    return data | changes


def test_admin_shows_a_published_book_read_only(
    admin_client: Client, published_book: PriceBook
) -> None:
    response = admin_client.get(f"/admin/pricing/pricebook/{published_book.pk}/change/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="_save"' not in html
    assert "Q1 list prices" in html


def test_admin_refuses_to_save_a_published_book(
    admin_client: Client, published_book: PriceBook
) -> None:
    response = admin_client.post(
        f"/admin/pricing/pricebook/{published_book.pk}/change/",
        _book_form(published_book, name="changed"),
    )
    assert response.status_code == 403
    published_book.refresh_from_db()
    assert published_book.name == "Q1 list prices"


def test_admin_refuses_to_change_or_delete_entries_of_a_published_book(
    admin_client: Client, published_book: PriceBook
) -> None:
    entry = published_book.entries.get(instance_type="")
    change = admin_client.post(
        f"/admin/pricing/priceentry/{entry.pk}/change/",
        {"book": published_book.pk, "price_per_accelerator_hour": "0.01"},
    )
    assert change.status_code == 403
    delete = admin_client.post(f"/admin/pricing/priceentry/{entry.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403
    book_delete = admin_client.post(
        f"/admin/pricing/pricebook/{published_book.pk}/delete/", {"post": "yes"}
    )
    assert book_delete.status_code == 403
    entry.refresh_from_db()
    assert entry.price_per_accelerator_hour == Decimal("3.99")
    assert PriceBook.objects.filter(pk=published_book.pk).exists()


def test_admin_bulk_delete_leaves_published_books(
    admin_client: Client, published_book: PriceBook
) -> None:
    response = admin_client.post(
        "/admin/pricing/pricebook/",
        {"action": "delete_selected", "_selected_action": [published_book.pk], "post": "yes"},
        follow=True,
    )
    assert response.status_code == 200
    assert PriceBook.objects.filter(pk=published_book.pk).exists()
    assert PriceEntry.objects.filter(book=published_book).count() == 2


def test_admin_cannot_add_an_entry_to_a_published_book(
    admin_client: Client,
    published_book: PriceBook,
    catalog: dict[str, Accelerator],
    providers: dict[str, Provider],
) -> None:
    response = admin_client.post(
        "/admin/pricing/priceentry/add/",
        {
            "book": published_book.pk,
            "provider": providers["gcp"].pk,
            "region": "us-central1",
            "accelerator": catalog["B200"].pk,
            "pricing_type": "spot",
            "price_per_accelerator_hour": "1.00",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert "Select a valid choice" in response.content.decode()
    assert published_book.entries.count() == 2


def test_admin_saves_a_draft_book_through_the_service(
    admin_client: Client, draft_book: PriceBook
) -> None:
    response = admin_client.post(
        f"/admin/pricing/pricebook/{draft_book.pk}/change/",
        _book_form(draft_book, name="Q1 checked", currency="usd"),
    )
    assert response.status_code == 200
    assert "unknown currency" in response.content.decode()
    response = admin_client.post(
        f"/admin/pricing/pricebook/{draft_book.pk}/change/", _book_form(draft_book, name="Q1 ok")
    )
    assert response.status_code == 302
    draft_book.refresh_from_db()
    assert draft_book.name == "Q1 ok"


def test_admin_publish_action_freezes_a_draft(admin_client: Client, draft_book: PriceBook) -> None:
    admin_client.post(
        "/admin/pricing/pricebook/",
        {"action": "publish_selected", "_selected_action": [draft_book.pk]},
    )
    draft_book.refresh_from_db()
    assert draft_book.status == PriceBook.Status.PUBLISHED


@pytest.mark.parametrize(
    "model",
    ["accelerator", "provider", "pricebook", "priceentry", "vendorquote", "onpremprofile",
     "exchangerate"],
)  # fmt: skip
def test_admin_lists_every_pricing_model(
    admin_client: Client, draft_book: PriceBook, model: str
) -> None:
    assert admin_client.get(f"/admin/pricing/{model}/").status_code == 200


def test_an_admin_edit_of_a_draft_entry_is_saved_and_audited(
    admin_client: Client, draft_book: PriceBook
) -> None:
    """The admin's form sets the new values on the instance before ``save_model`` calls the
    service; the service must compare against the stored row, or nothing is saved (it was:
    the page said "changed successfully" and 55.04 stayed 55.04)."""
    entry = draft_book.entries.order_by("pk").first()
    assert entry is not None
    page = admin_client.get(f"/admin/pricing/priceentry/{entry.pk}/change/")
    form = page.context["adminform"].form
    data = {
        name: ("" if value is None else value)
        for name, value in ((name, form[name].value()) for name in form.fields)
    }
    data |= {"price_per_instance_hour": "60.00", "price_per_accelerator_hour": "7.5"}
    response = admin_client.post(f"/admin/pricing/priceentry/{entry.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    entry.refresh_from_db()
    assert entry.price_per_instance_hour == Decimal("60.00")
    assert entry.price_per_accelerator_hour == Decimal("7.5")  # 60 / 8 accelerators
    audit = PriceAuditEvent.objects.filter(subject_type="price_entry", subject_id=entry.pk)
    assert audit.filter(action="edited").exists()


def test_an_admin_edit_of_a_provider_is_saved(admin_client: Client) -> None:
    provider = Provider.objects.create(slug="acme", name="Acme Cloud", kind="gpu_cloud")
    response = admin_client.post(
        f"/admin/pricing/provider/{provider.pk}/change/",
        {"slug": "acme", "name": "Acme GPU Cloud", "kind": "gpu_cloud", "website": "", "notes": ""},
    )
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.name == "Acme GPU Cloud"


def test_admin_shows_quote_prices_as_money_not_ten_decimals(
    admin_client: Client, term_quote: VendorQuote
) -> None:
    listing = admin_client.get("/admin/pricing/vendorquote/").content.decode()
    # 4,709,376 / (256 x 12 x 730 h) = 2.10 USD per GPU-hour, the commitment in whole dollars
    assert "2.10 USD/GPU-h" in listing
    assert "4,709,376 USD for 12 months" in listing
    form = admin_client.get(f"/admin/pricing/vendorquote/{term_quote.pk}/change/")
    assert 'value="2.10"' in form.content.decode()
    assert "2.1000000000" not in listing + form.content.decode()


def test_admin_lists_entry_prices_in_the_book_currency(
    admin_client: Client, published_book: PriceBook
) -> None:
    listing = admin_client.get("/admin/pricing/priceentry/").content.decode()
    assert "3.99 USD/GPU-h" in listing
    # 55.04 USD for an 8-GPU instance: 6.88 USD per GPU-hour
    assert "6.88 USD/GPU-h" in listing
    assert "3.9900000000" not in listing
    book = admin_client.get(f"/admin/pricing/pricebook/{published_book.pk}/change/")
    assert "3.99 USD/GPU-h" in book.content.decode()
    assert "3.9900000000" not in book.content.decode()
