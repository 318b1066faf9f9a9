"""Price books and their entries. A published book never changes: copy it to a new draft."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from lib.actors import OptionalActor, actor_user
from lib.updates import model_update
from organisations.models import Organisation
from pricing.currency import currency_code_check
from pricing.errors import DuplicateRecord, PriceBookGone, PricingError, PublishedBookImmutable
from pricing.models import PriceBook, PriceEntry, PricingType, UsagePrice
from pricing.services._common import positive_check
from pricing.services.audit import price_audit_fields, price_audit_label, price_audit_record

BOOK_FIELDS = ("name", "description", "currency", "source", "fetched_at", "dates_note")
ENTRY_FIELDS = (
    "provider",
    "region",
    "accelerator",
    "pricing_type",
    "price_per_accelerator_hour",
    "instance_type",
    "accelerators_per_instance",
    "price_per_instance_hour",
    "minimum_count",
    "minimum_term_months",
    "observed_on",
    "source",
    "data_flag",
)
ENTRY_TEXT_FIELDS = ("region", "instance_type", "source", "data_flag")
# The natural key of an entry inside its book (also a database constraint).
ENTRY_KEY = ("provider", "region", "accelerator", "pricing_type", "instance_type")
RESERVED_TERM_MONTHS = {PricingType.RESERVED_1Y: 12, PricingType.RESERVED_3Y: 36}
PRICE_QUANTUM = Decimal("1e-10")  # the scale of the price columns
#: A copy's organisation when the caller names none: the copied book's.
SAME = object()


def price_book_assert_draft(book: PriceBook) -> None:
    """Refuse any change to a published book (and so to its entries)."""
    if book.status == PriceBook.Status.PUBLISHED:
        raise PublishedBookImmutable(
            f"Price book '{book.name}' is published and cannot be changed: copy it to a new "
            "draft to change its prices."
        )


def price_book_locked_draft(book: PriceBook) -> PriceBook:
    """The book's current row, locked for this transaction, if it is still a draft.

    Reads the status from the database, not from ``book``, which may be stale or edited.
    """
    current = PriceBook.objects.select_for_update().get(pk=book.pk)
    price_book_assert_draft(current)
    return current


def price_book_values_check(values: Mapping[str, Any]) -> None:
    for name in ("name", "source"):
        if name in values and not str(values[name]).strip():
            raise PricingError("must not be empty", field=name)
    if "currency" in values:
        currency_code_check(values["currency"])
    fetched_at = values.get("fetched_at")
    if fetched_at is not None and fetched_at > timezone.now():
        raise PricingError(f"is in the future ({fetched_at:%Y-%m-%d %H:%M})", field="fetched_at")


def price_book_create(
    *,
    user: OptionalActor,
    name: str,
    currency: str,
    source: str,
    fetched_at: datetime,
    description: str = "",
    dates_note: str = "",
    organisation: Organisation | None = None,
    copied_from: PriceBook | None = None,
) -> PriceBook:
    """Start a draft price book: private to ``organisation``, or public without one (who may
    write where is :func:`pricing.access.write_organisation`'s to say); ``copied_from`` is
    :func:`price_book_copy`'s."""
    values = {"name": name, "currency": currency, "source": source, "fetched_at": fetched_at}
    price_book_values_check(values)
    book = PriceBook.objects.create(
        **values,
        description=description,
        dates_note=dates_note,
        organisation=organisation,
        copied_from=copied_from,
        created_by=actor_user(user),
    )
    price_audit_record(
        actor=user, action="created", subject=book, changes=price_audit_fields(book, BOOK_FIELDS)
    )
    return book


@transaction.atomic
def price_book_update(*, book: PriceBook, user: OptionalActor = None, **changes: Any) -> PriceBook:
    current = price_book_locked_draft(book)
    price_book_values_check(changes)
    if (
        "currency" in changes
        and current.entries.exists()
        and changes["currency"] != current.currency
    ):
        raise PricingError(
            "the book has entries priced in its currency; copy it or start a new book",
            field="currency",
        )
    changed = model_update(current, changes, allowed=BOOK_FIELDS, refuse=PricingError)
    if changed:
        price_audit_record(actor=user, action="edited", subject=current, changes=changed)
    return current


@transaction.atomic
def price_book_delete(*, book: PriceBook, user: OptionalActor = None) -> None:
    current = price_book_locked_draft(book)
    price_audit_record(
        actor=user,
        action="deleted",
        subject=current,
        comment=f"with its {current.entries.count()} entries",
    )
    current.delete()


@transaction.atomic
def price_book_publish(*, book: PriceBook, user: OptionalActor) -> PriceBook:
    """Freeze a draft: from now on no one can change it or its entries."""
    current = price_book_locked_draft(book)
    if not current.entries.exists():
        raise PricingError("a price book needs at least one entry to be published")
    current.status = PriceBook.Status.PUBLISHED
    current.published_at = timezone.now()
    current.published_by = actor_user(user)
    current.save(update_fields=["status", "published_at", "published_by", "updated_at"])
    price_audit_record(
        actor=user,
        action="published",
        subject=current,
        changes={"status": [PriceBook.Status.DRAFT, PriceBook.Status.PUBLISHED]},
    )
    return current


@transaction.atomic
def price_book_copy(
    *,
    book: PriceBook,
    user: OptionalActor,
    name: str | None = None,
    organisation: Organisation | object | None = SAME,
) -> PriceBook:
    """Copy a book (published or not) with all its entries and usage prices into a new
    draft, of ``organisation`` (by default the book's own: a public book's copy is public).

    The source row stays locked until the copy commits, so no one deletes it half-way; a book
    deleted before the copy starts is refused with :class:`PriceBookGone`.
    """
    source = PriceBook.objects.select_for_update().filter(pk=book.pk).first()
    if source is None:
        raise PriceBookGone(
            f"Price book '{book.name}' no longer exists (it was deleted), so it cannot be copied."
        )
    copy = price_book_create(
        user=user,
        name=name or f"{source.name} (draft copy)",
        currency=source.currency,
        source=source.source,
        fetched_at=source.fetched_at,
        description=source.description,
        dates_note=source.dates_note,
        organisation=source.organisation if organisation is SAME else organisation,  # type: ignore[arg-type]
        copied_from=source,
    )
    copied = price_entries_copy(source=source, target=copy)
    usage = usage_prices_copy(source=source, target=copy)
    price_audit_record(
        actor=user,
        action="copied",
        subject=copy,
        changes={"copied_from": [None, f"PriceBook {source.pk}"]},
        comment=f"{copied} entries copied from {price_audit_label(source)}"
        + (f", with its {usage} usage prices" if usage else ""),
    )
    return copy


def price_entries_copy(*, source: PriceBook, target: PriceBook) -> int:
    """Copy every entry of ``source`` into ``target`` as it is; return how many.

    One ``INSERT ... SELECT``: the rows never leave the database, and no entry is checked
    again (each passed the checks when it was written). ``bulk_create`` spent most of its
    time building a model object and its SQL per entry in Python; the time of a
    20,000-entry copy is what ``benchmarks/bench_price_book_copy.py`` prints.
    """
    return _book_rows_copy(PriceEntry, ENTRY_FIELDS, source=source, target=target)


USAGE_FIELDS = ("provider", "region", "kind", "tier", "price", "observed_on", "source")


def usage_prices_copy(*, source: PriceBook, target: PriceBook) -> int:
    """Copy every usage price (storage, egress) of ``source`` into ``target`` as it is;
    return how many. One ``INSERT ... SELECT``, as :func:`price_entries_copy` does."""
    return _book_rows_copy(UsagePrice, USAGE_FIELDS, source=source, target=target)


def _book_rows_copy(
    model: type[PriceEntry] | type[UsagePrice],
    fields: tuple[str, ...],
    *,
    source: PriceBook,
    target: PriceBook,
) -> int:
    """Copy ``model``'s rows of ``source`` into ``target`` (``fields`` and the book) in one
    ``INSERT ... SELECT``, in the order they were written; return how many."""
    quote = connection.ops.quote_name
    column = {
        field.name: quote(field.column or field.attname) for field in model._meta.concrete_fields
    }
    table = quote(model._meta.db_table)
    book = column["book"]
    copied = ", ".join(column[name] for name in fields)
    # Only the model's quoted table and column names are formatted in; values are params.
    sql = (
        f"INSERT INTO {table} ({book}, {copied}) "  # noqa: S608
        f"SELECT %s, {copied} FROM {table} WHERE {book} = %s ORDER BY {column['id']}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [target.pk, source.pk])
        return int(cursor.rowcount)


def price_per_accelerator_hour_derive(
    price_per_instance_hour: Decimal, accelerators_per_instance: int
) -> Decimal:
    """Price of one accelerator-hour from the price of an instance-hour. [currency/h]"""
    share = price_per_instance_hour / Decimal(accelerators_per_instance)
    return share.quantize(PRICE_QUANTUM, rounding=ROUND_HALF_EVEN)


def price_entry_values_check(values: dict[str, Any]) -> dict[str, Any]:
    """Check an entry's values and fill what follows from them; return them.

    Derives the per-accelerator price from an instance price when only that is given, and
    the minimum term of a reserved price from its type.
    """
    for name in ENTRY_TEXT_FIELDS:
        values[name] = (values.get(name) or "").strip()
    for name in ("provider", "accelerator"):
        if values.get(name) is None:
            raise PricingError(f"{name} is required", field=name)
    if not values["region"]:
        raise PricingError("region is required", field="region")
    if values.get("pricing_type") not in PricingType.values:
        choices = ", ".join(PricingType.values)
        raise PricingError(
            f"unknown pricing type {values.get('pricing_type')!r}: use one of {choices}",
            field="pricing_type",
        )
    _entry_instance_price_check(values)
    positive_check(
        values.get("price_per_accelerator_hour"), field="price_per_accelerator_hour", what="price"
    )
    for name in ("minimum_count", "minimum_term_months"):
        if values.get(name) is not None:
            positive_check(values[name], field=name, what=name.replace("_", " "))
    _entry_term_check(values)
    observed_on = values.get("observed_on")
    if observed_on is not None and observed_on > timezone.localdate():
        raise PricingError(f"is in the future ({observed_on})", field="observed_on")
    return values


def _entry_instance_price_check(values: dict[str, Any]) -> None:
    instance_price = values.get("price_per_instance_hour")
    count = values.get("accelerators_per_instance")
    if count is not None:
        positive_check(count, field="accelerators_per_instance", what="accelerator count")
    if instance_price is None:
        return
    positive_check(instance_price, field="price_per_instance_hour", what="price")
    if count is None:
        raise PricingError(
            "an instance price needs accelerators_per_instance", field="accelerators_per_instance"
        )
    derived = price_per_accelerator_hour_derive(instance_price, count)
    given = values.get("price_per_accelerator_hour")
    if given is None:
        values["price_per_accelerator_hour"] = derived
    elif abs(given - derived) > Decimal("0.000001"):
        raise PricingError(
            f"{given} disagrees with the instance price / accelerator count = {derived}",
            field="price_per_accelerator_hour",
        )


def _entry_term_check(values: dict[str, Any]) -> None:
    pricing_type = values["pricing_type"]
    term = values.get("minimum_term_months")
    if pricing_type in RESERVED_TERM_MONTHS:
        expected = RESERVED_TERM_MONTHS[pricing_type]
        if term is None:
            values["minimum_term_months"] = expected
        elif term != expected:
            raise PricingError(
                f"a {PricingType(pricing_type).label.lower()} price has a {expected}-month term",
                field="minimum_term_months",
            )
    elif pricing_type == PricingType.COMMITTED and term is None:
        raise PricingError(
            "a committed contract price needs its minimum term", field="minimum_term_months"
        )


def _entry_duplicate_check(
    book: PriceBook, values: Mapping[str, Any], *, exclude: int | None
) -> None:
    key = {name: values[name] for name in ENTRY_KEY}
    same = book.entries.filter(**key)
    if exclude is not None:
        same = same.exclude(pk=exclude)
    if same.exists():
        raise DuplicateRecord(
            "the book already has a price for this provider, region, accelerator, pricing type "
            "and instance type",
            field="price_per_accelerator_hour",
        )


@transaction.atomic
def price_entry_create(*, book: PriceBook, user: OptionalActor = None, **values: Any) -> PriceEntry:
    current = price_book_locked_draft(book)
    values = price_entry_values_check({name: values.get(name) for name in ENTRY_FIELDS})
    _entry_duplicate_check(current, values, exclude=None)
    entry = PriceEntry.objects.create(book=current, **values)
    price_audit_record(
        actor=user, action="created", subject=entry, changes=price_audit_fields(entry, ENTRY_FIELDS)
    )
    return entry


@transaction.atomic
def price_entry_update(
    *, entry: PriceEntry, user: OptionalActor = None, **changes: Any
) -> PriceEntry:
    current = price_book_locked_draft(entry.book)
    # The stored row, not the caller's instance: an admin form has already set its new
    # values on that one, and the comparison below would find nothing changed.
    entry = PriceEntry.objects.select_for_update().get(pk=entry.pk)
    merged = {name: changes.get(name, getattr(entry, name)) for name in ENTRY_FIELDS}
    if "price_per_instance_hour" in changes and "price_per_accelerator_hour" not in changes:
        merged["price_per_accelerator_hour"] = None  # derive it again from the new price
    values = price_entry_values_check(merged)
    _entry_duplicate_check(current, values, exclude=entry.pk)
    changed = model_update(entry, values, allowed=ENTRY_FIELDS, refuse=PricingError)
    if changed:
        price_audit_record(actor=user, action="edited", subject=entry, changes=changed)
    return entry


@transaction.atomic
def price_entry_delete(*, entry: PriceEntry, user: OptionalActor = None) -> None:
    price_book_locked_draft(entry.book)
    price_audit_record(
        actor=user, action="deleted", subject=entry, changes=price_audit_fields(entry, ENTRY_FIELDS)
    )
    entry.delete()
