from __future__ import annotations

from decimal import Decimal

import pytest

from pricing.errors import DuplicateRecord, PricingError, PublishedBookImmutable
from pricing.models import Accelerator, PriceBook, PriceEntry, Provider
from pricing.services import (
    price_book_copy,
    price_book_delete,
    price_book_publish,
    price_book_update,
    price_entry_create,
    price_entry_delete,
    price_entry_update,
)

pytestmark = pytest.mark.django_db


def _entry_values(catalog: dict[str, Accelerator], providers: dict[str, Provider]) -> dict:
    return {
        "provider": providers["gcp"],
        "region": "us-central1",
        "accelerator": catalog["A100-80GB-SXM"],
        "pricing_type": "spot",
        "price_per_accelerator_hour": Decimal("1.25"),
    }


def test_price_entry_create_derives_the_price_per_accelerator_hour(draft_book: PriceBook) -> None:
    entry = draft_book.entries.get(instance_type="p5.48xlarge")
    assert entry.price_per_accelerator_hour == Decimal("6.88")  # 55.04 / 8
    assert entry.price_per_instance_hour == Decimal("55.04")


def test_price_entry_create_fills_the_term_of_a_reserved_price(
    draft_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    values = _entry_values(catalog, providers) | {"pricing_type": "reserved_3y"}
    assert price_entry_create(book=draft_book, **values).minimum_term_months == 36


def test_price_entry_create_refuses_a_negative_price_naming_the_field(
    draft_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    values = _entry_values(catalog, providers) | {"price_per_accelerator_hour": Decimal(-1)}
    with pytest.raises(PricingError, match="negative price") as refused:
        price_entry_create(book=draft_book, **values)
    assert refused.value.field == "price_per_accelerator_hour"


def test_price_entry_create_refuses_a_duplicate(
    draft_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    price_entry_create(book=draft_book, **_entry_values(catalog, providers))
    with pytest.raises(DuplicateRecord):
        price_entry_create(book=draft_book, **_entry_values(catalog, providers))


def test_published_book_refuses_every_change(
    published_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    entry = published_book.entries.first()
    assert entry is not None
    attempts = [
        lambda: price_book_update(book=published_book, name="changed"),
        lambda: price_book_delete(book=published_book),
        lambda: price_book_publish(book=published_book, user=None),
        lambda: price_entry_create(book=published_book, **_entry_values(catalog, providers)),
        lambda: price_entry_update(entry=entry, price_per_accelerator_hour=Decimal("0.01")),
        lambda: price_entry_delete(entry=entry),
    ]
    for attempt in attempts:
        with pytest.raises(PublishedBookImmutable, match="is published and cannot be changed"):
            attempt()
    published_book.refresh_from_db()
    assert published_book.name == "Q1 list prices"
    assert published_book.entries.count() == 2
    entry.refresh_from_db()
    assert entry.price_per_accelerator_hour == Decimal("6.88")


def test_published_book_refuses_change_through_a_stale_object(draft_book: PriceBook) -> None:
    stale = PriceBook.objects.get(pk=draft_book.pk)
    price_book_publish(book=draft_book, user=None)
    with pytest.raises(PublishedBookImmutable):
        price_book_update(book=stale, name="changed")


def test_price_book_copy_makes_a_draft_with_the_same_entries(published_book: PriceBook) -> None:
    copy = price_book_copy(book=published_book, user=None)
    assert copy.status == PriceBook.Status.DRAFT
    assert copy.copied_from == published_book
    fields = (
        "provider_id",
        "region",
        "accelerator_id",
        "pricing_type",
        "price_per_accelerator_hour",
    )
    assert sorted(copy.entries.values_list(*fields)) == sorted(
        published_book.entries.values_list(*fields)
    )
    price_entry_update(
        entry=copy.entries.get(instance_type=""), price_per_accelerator_hour=Decimal("3.49")
    )
    assert published_book.entries.get(instance_type="").price_per_accelerator_hour == Decimal(
        "3.99"
    )


def test_price_book_publish_refuses_an_empty_book(draft_book: PriceBook) -> None:
    PriceEntry.objects.filter(book=draft_book).delete()
    with pytest.raises(PricingError, match="at least one entry"):
        price_book_publish(book=draft_book, user=None)


def test_price_book_update_changes_a_draft(draft_book: PriceBook) -> None:
    price_book_update(book=draft_book, name="Q1 list prices, checked")
    draft_book.refresh_from_db()
    assert draft_book.name == "Q1 list prices, checked"
