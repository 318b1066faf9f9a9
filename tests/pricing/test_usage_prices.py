"""Usage prices (storage per GB-month, egress per GB): rules, demo data, copies, the admin."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from organisations.models import Organisation
from pricing.demo import EXAMPLE_BOOK_NAME, pricing_demo_load
from pricing.errors import DuplicateRecord, PricingError, PublishedBookImmutable
from pricing.models import PriceAuditEvent, PriceBook, Provider, UsagePrice
from pricing.services import (
    price_book_copy,
    price_book_create,
    price_book_delete,
    price_book_publish,
)
from pricing.services.usage import usage_price_create, usage_price_delete, usage_price_update
from tests.pricing.conftest import FETCHED_AT

pytestmark = pytest.mark.django_db


def _storage(book: PriceBook, provider: Provider | None, **changes: object) -> UsagePrice:
    values: dict[str, object] = {
        "provider": provider,
        "region": "us-east-1",
        "kind": "storage",
        "tier": "S3 Standard, first 50 TB/month",
        "price": Decimal("0.023"),
        "source": "https://aws.amazon.com/s3/pricing/",
    }
    return usage_price_create(book=book, user=None, **(values | changes))


# --- The model ------------------------------------------------------------------------------


def test_the_database_refuses_a_negative_price_and_a_duplicate(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    row = {"book": draft_book, "provider": providers["aws"], "region": "us-east-1"}
    UsagePrice.objects.create(**row, kind="egress", price=Decimal(0))  # free egress is a price
    with pytest.raises(IntegrityError), transaction.atomic():
        UsagePrice.objects.create(**row, kind="storage", price=Decimal("-0.01"))
    UsagePrice.objects.create(**row, kind="storage", tier="S3 Standard", price=Decimal("0.023"))
    with pytest.raises(IntegrityError), transaction.atomic():
        UsagePrice.objects.create(**row, kind="storage", tier="S3 Standard", price=Decimal("0.02"))
    UsagePrice.objects.create(**row, kind="storage", tier="S3 Glacier", price=Decimal("0.004"))
    assert draft_book.usage_prices.count() == 3


def test_a_usage_price_names_its_unit(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    storage = _storage(draft_book, providers["aws"])
    egress = _storage(draft_book, providers["aws"], kind="egress", tier="", price=Decimal("0.09"))
    assert (storage.unit, egress.unit) == ("GB-month", "GB")
    assert str(storage) == "Storage (per GB-month): AWS us-east-1 S3 Standard, first 50 TB/month"
    assert str(egress) == "Egress (per GB): AWS us-east-1"


# --- The services ---------------------------------------------------------------------------


def test_usage_price_create_checks_its_values(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    aws = providers["aws"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"price": Decimal("-0.01")}, "price"),
        ({"price": None}, "price"),
        ({"kind": "requests"}, "kind"),
        ({"region": "  "}, "region"),
        ({"provider": None}, "provider"),
        ({"observed_on": timezone.localdate() + timedelta(days=1)}, "observed_on"),
    ]
    for changes, field in cases:
        provider = changes.pop("provider", aws)
        with pytest.raises(PricingError) as caught:
            _storage(draft_book, provider, **changes)
        assert caught.value.field == field, changes
    _storage(draft_book, aws, region=" us-east-1 ")
    with pytest.raises(DuplicateRecord):
        _storage(draft_book, aws, price=Decimal("0.02"))
    assert draft_book.usage_prices.get().region == "us-east-1"


def test_a_published_books_usage_prices_never_change(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    usage = _storage(draft_book, providers["aws"])
    price_book_publish(book=draft_book, user=None)
    with pytest.raises(PublishedBookImmutable):
        _storage(draft_book, providers["gcp"])
    with pytest.raises(PublishedBookImmutable):
        usage_price_update(usage=usage, price=Decimal("0.01"))
    with pytest.raises(PublishedBookImmutable):
        usage_price_delete(usage=usage)
    usage.refresh_from_db()
    assert usage.price == Decimal("0.023")


def test_usage_price_changes_are_in_the_books_audit_trail(
    draft_book: PriceBook, providers: dict[str, Provider], pricing_admin: User
) -> None:
    usage = _storage(draft_book, providers["aws"])
    usage_price_update(usage=usage, user=pricing_admin, price=Decimal("0.021"))
    usage_price_delete(usage=UsagePrice.objects.get(pk=usage.pk), user=pricing_admin)
    events = PriceAuditEvent.objects.filter(
        subject_type=PriceAuditEvent.Subject.PRICE_BOOK,
        subject_id=draft_book.pk,
        action__startswith="usage price",
    )
    label = "usage price storage AWS us-east-1 S3 Standard, first 50 TB/month"

    def prices(changes: dict[str, list[str | None]]) -> dict[str, list[Decimal | None]]:
        return {
            key: [None if value is None else Decimal(value) for value in pair]
            for key, pair in changes.items()
        }

    assert [(event.action, prices(event.changes)) for event in events] == [
        ("usage price created", {label: [None, Decimal("0.023")]}),
        ("usage price edited", {f"{label}: price": [Decimal("0.023"), Decimal("0.021")]}),
        ("usage price deleted", {label: [Decimal("0.021"), None]}),
    ]
    assert events.last().actor == pricing_admin  # type: ignore[union-attr]
    assert not UsagePrice.objects.exists()


def test_a_copy_of_a_book_copies_its_usage_prices(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    _storage(draft_book, providers["aws"], observed_on=timezone.localdate())
    _storage(draft_book, providers["aws"], kind="egress", tier="", price=Decimal("0.09"))
    _storage(draft_book, providers["gcp"], region="us-central1", tier="Standard")
    copy = price_book_copy(book=draft_book, user=None, name="Q2 list")
    fields = ("provider_id", "region", "kind", "tier", "price", "observed_on", "source")
    assert copy.usage_prices.count() == 3
    assert sorted(copy.usage_prices.values_list(*fields)) == sorted(
        draft_book.usage_prices.values_list(*fields)
    )
    copied = PriceAuditEvent.objects.get(subject_id=copy.pk, action="copied")
    assert copied.comment.endswith("with its 3 usage prices")
    usage_price_update(usage=copy.usage_prices.get(kind="egress"), price=Decimal("0.05"))
    assert draft_book.usage_prices.get(kind="egress").price == Decimal("0.09")


def test_deleting_a_draft_book_deletes_its_usage_prices(
    draft_book: PriceBook, providers: dict[str, Provider]
) -> None:
    _storage(draft_book, providers["aws"])
    price_book_delete(book=draft_book)
    assert not UsagePrice.objects.exists()


# --- The demo data --------------------------------------------------------------------------


def test_the_demo_book_carries_storage_and_egress_prices_with_sources() -> None:
    lines = pricing_demo_load()
    assert any("6 storage and egress prices" in line for line in lines)
    book = PriceBook.objects.get(name=EXAMPLE_BOOK_NAME)
    assert book.is_published
    prices = {
        (usage.provider.slug, usage.region, usage.kind): usage.price
        for usage in book.usage_prices.select_related("provider")
    }
    assert prices == {
        ("aws", "us-east-1", "storage"): Decimal("0.023"),
        ("aws", "us-east-1", "egress"): Decimal("0.09"),
        ("gcp", "us-central1", "storage"): Decimal("0.020"),
        ("gcp", "us-central1", "egress"): Decimal("0.12"),
        ("azure", "eastus", "storage"): Decimal("0.018"),
        ("azure", "eastus", "egress"): Decimal("0.087"),
    }
    for usage in book.usage_prices.all():
        assert usage.source.startswith("https://"), usage
        assert "to re-check" in usage.source, usage
        assert usage.tier, usage
    pricing_demo_load()
    assert UsagePrice.objects.count() == 6  # idempotent


def test_a_copy_of_the_demo_book_is_a_draft_with_its_usage_prices() -> None:
    pricing_demo_load()
    book = PriceBook.objects.get(name=EXAMPLE_BOOK_NAME)
    copy = price_book_copy(book=book, user=None)
    assert copy.usage_prices.count() == 6
    assert copy.entries.count() == book.entries.count()


# --- The admin ------------------------------------------------------------------------------


@pytest.fixture
def other_book(other_organisation: Organisation, providers: dict[str, Provider]) -> PriceBook:
    book = price_book_create(
        user=None,
        name="Globex negotiated storage",
        currency="USD",
        source="contract",
        fetched_at=FETCHED_AT,
        organisation=other_organisation,
    )
    _storage(book, providers["aws"], tier="Globex secret tier", price=Decimal("0.011"))
    return book


def test_the_admin_lists_usage_prices_per_organisation(
    draft_book: PriceBook,
    other_book: PriceBook,
    providers: dict[str, Provider],
    pricing_admin: User,
    other_pricing_admin: User,
) -> None:
    _storage(draft_book, providers["gcp"], region="us-central1", tier="Public standard tier")
    mine = Client()
    mine.force_login(pricing_admin)
    page = mine.get("/admin/pricing/usageprice/").content.decode()
    assert "Public standard tier" in page
    assert "Globex secret tier" not in page
    assert "Globex negotiated storage" not in page
    secret = other_book.usage_prices.get()
    assert mine.get(f"/admin/pricing/usageprice/{secret.pk}/change/").status_code in (302, 404)
    mine.post(f"/admin/pricing/usageprice/{secret.pk}/delete/", {"post": "yes"})
    assert UsagePrice.objects.filter(pk=secret.pk).exists()

    changed = mine.post(
        f"/admin/pricing/usageprice/{secret.pk}/change/",
        {"provider": providers["aws"].pk, "region": "us-east-1", "kind": "storage",
         "tier": "Globex secret tier", "price": "0.5"},
    )  # fmt: skip
    assert changed.status_code in (302, 404)
    secret.refresh_from_db()
    assert secret.price == Decimal("0.011")

    other_pricing_admin.is_staff = True  # into the admin site
    other_pricing_admin.save(update_fields=["is_staff"])
    theirs = Client()
    theirs.force_login(other_pricing_admin)
    page = theirs.get("/admin/pricing/usageprice/").content.decode()
    assert "Globex secret tier" in page
    assert "Public standard tier" in page  # a public book's prices are everyone's to see


def test_the_admin_adds_and_edits_through_the_service(
    draft_book: PriceBook, providers: dict[str, Provider], pricing_admin: User
) -> None:
    client = Client()
    client.force_login(pricing_admin)
    form = {
        "book": draft_book.pk,
        "provider": providers["aws"].pk,
        "region": "us-east-1",
        "kind": "egress",
        "tier": "Internet, first 10 TB/month",
        "price": "-1",
        "source": "https://aws.amazon.com/ec2/pricing/on-demand/",
    }
    refused = client.post("/admin/pricing/usageprice/add/", form)
    assert refused.status_code == 200
    assert "must be 0 or more" in refused.content.decode()
    added = client.post("/admin/pricing/usageprice/add/", form | {"price": "0.09"})
    assert added.status_code == 302
    usage = draft_book.usage_prices.get()
    assert usage.price == Decimal("0.09")
    assert PriceAuditEvent.objects.filter(
        subject_id=draft_book.pk, action="usage price created", actor=pricing_admin
    ).exists()
    edited = client.post(
        f"/admin/pricing/usageprice/{usage.pk}/change/",
        {name: value for name, value in form.items() if name != "book"} | {"price": "0.085"},
    )
    assert edited.status_code == 302
    usage.refresh_from_db()
    assert usage.price == Decimal("0.085")


def test_the_admin_keeps_a_published_books_usage_prices_read_only(
    draft_book: PriceBook, providers: dict[str, Provider], pricing_admin: User
) -> None:
    usage = _storage(draft_book, providers["aws"])
    price_book_publish(book=draft_book, user=None)
    client = Client()
    client.force_login(pricing_admin)
    page = client.get(f"/admin/pricing/usageprice/{usage.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    delete = client.post(f"/admin/pricing/usageprice/{usage.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403
    assert UsagePrice.objects.filter(pk=usage.pk).exists()
