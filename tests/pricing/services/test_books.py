from __future__ import annotations

import threading
from datetime import date
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from pricing.errors import DuplicateRecord, PriceBookGone, PricingError, PublishedBookImmutable
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
from pricing.services.books import ENTRY_FIELDS

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


# --- Copy: every field, in a fixed number of queries, and a source deleted meanwhile --------


def _entries_add(book: PriceBook, count: int) -> None:
    """``count`` entries with every field set, written directly (as a CSV import would)."""
    provider = Provider.objects.get(slug="gcp")
    accelerator = Accelerator.objects.get(catalog_id="B200")
    PriceEntry.objects.bulk_create(
        PriceEntry(
            book=book,
            provider=provider,
            region=f"region-{index}",
            accelerator=accelerator,
            pricing_type="reserved_1y",
            price_per_accelerator_hour=Decimal("4.5") + index,
            instance_type="a4-highgpu-8g",
            accelerators_per_instance=8,
            price_per_instance_hour=(Decimal("4.5") + index) * 8,
            minimum_count=16,
            minimum_term_months=12,
            observed_on=date(2026, 1, 15),
            source=f"price list page {index}",
            data_flag="list price, not negotiated" if index % 2 else "",
        )
        for index in range(count)
    )


def _entry_rows(book: PriceBook) -> list[tuple[object, ...]]:
    attnames = {field.name: field.attname for field in PriceEntry._meta.concrete_fields}
    return sorted(book.entries.values_list(*(attnames[n] for n in ENTRY_FIELDS)), key=repr)


def test_price_book_copy_keeps_every_field_of_every_entry(published_book: PriceBook) -> None:
    _entries_add(published_book, 30)
    copy = price_book_copy(book=published_book, user=None, name="Q2 list")
    assert (copy.name, copy.status, copy.copied_from) == (
        "Q2 list",
        PriceBook.Status.DRAFT,
        published_book,
    )
    assert copy.entries.count() == 32
    assert _entry_rows(copy) == _entry_rows(published_book)


def test_price_book_copy_runs_the_same_queries_for_any_number_of_entries(
    draft_book: PriceBook,
) -> None:
    with CaptureQueriesContext(connection) as small:
        price_book_copy(book=draft_book, user=None)
    _entries_add(draft_book, 200)
    with CaptureQueriesContext(connection) as large:
        price_book_copy(book=draft_book, user=None)
    # lock, create, audit "created", copied_from, INSERT ... SELECT, audit "copied", savepoints
    assert len(large.captured_queries) == len(small.captured_queries) <= 8


def test_price_book_copy_of_a_deleted_book_is_refused(draft_book: PriceBook) -> None:
    stale = PriceBook.objects.get(pk=draft_book.pk)
    price_book_delete(book=draft_book)
    with pytest.raises(PriceBookGone, match="no longer exists"):
        price_book_copy(book=stale, user=None)
    assert not PriceBook.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_price_book_copy_waits_for_a_delete_in_flight_and_refuses(draft_book: PriceBook) -> None:
    """The copy locks the source row: it waits for a delete that holds it, then says the
    book is gone (it used to insert a copy pointing at the deleted row: IntegrityError)."""
    locked, release = threading.Event(), threading.Event()

    def delete_and_hold() -> None:
        try:
            with transaction.atomic():
                price_book_delete(book=draft_book)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete_and_hold)
    deleter.start()
    assert locked.wait(10)
    threading.Timer(0.3, release.set).start()
    with pytest.raises(PriceBookGone):
        price_book_copy(book=draft_book, user=None)
    deleter.join(10)
    assert not PriceBook.objects.exists()
