"""CSV import of price-book entries and vendor quotes: all of a file, or nothing.

Every row is parsed and checked with the same rules as the other services before anything
is written; any problem (with its line, column and reason) fails the whole file. The
columns are documented in ``pricing/data/README.md``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import Model

from lib.actors import OptionalActor, actor_user
from lib.text import model_text_lengths, text_problem
from organisations.models import Organisation
from pricing.currency import currency_code_check
from pricing.errors import CsvImportError, CsvRowError, PricingError
from pricing.models import Accelerator, PriceBook, PriceEntry, PricingType, Provider, VendorQuote
from pricing.services.audit import price_audit_fields, price_audit_record
from pricing.services.books import (
    price_book_create,
    price_book_locked_draft,
    price_entry_values_check,
)
from pricing.services.quotes import QUOTE_FIELDS, quote_values_check

MAX_ROWS = 20_000


@dataclass(frozen=True)
class Lookups:
    """Providers and accelerators by their lower-cased names, read once per file."""

    providers: dict[str, Provider]
    accelerators: dict[str, Accelerator]

    @classmethod
    def load(cls) -> Lookups:
        providers: dict[str, Provider] = {}
        for provider in Provider.objects.all():
            providers[provider.slug.lower()] = provider
            providers[provider.name.lower()] = provider
        accelerators = {a.catalog_id.lower(): a for a in Accelerator.objects.all()}
        return cls(providers, accelerators)


Parser = Callable[[str, Lookups], Any]


def _text(cell: str, lookups: Lookups) -> str:
    return cell.strip()


def _decimal(cell: str, lookups: Lookups) -> Decimal | None:
    if not cell.strip():
        return None
    try:
        number = Decimal(cell.strip())
    except InvalidOperation:
        raise PricingError(f"bad number {cell!r}") from None
    if not number.is_finite():
        raise PricingError(f"bad number {cell!r}")
    return number


def _integer(cell: str, lookups: Lookups) -> int | None:
    if not cell.strip():
        return None
    try:
        return int(cell.strip())
    except ValueError:
        raise PricingError(f"bad whole number {cell!r}") from None


def _date(cell: str, lookups: Lookups) -> date | None:
    if not cell.strip():
        return None
    try:
        return date.fromisoformat(cell.strip())
    except ValueError:
        raise PricingError(f"bad date {cell!r}: use YYYY-MM-DD") from None


def _currency(cell: str, lookups: Lookups) -> str:
    return currency_code_check(cell.strip())


def _provider(cell: str, lookups: Lookups) -> Provider | None:
    if not cell.strip():
        return None
    provider = lookups.providers.get(cell.strip().lower())
    if provider is None:
        raise PricingError(f"unknown provider {cell!r}: add it first (admin or API)")
    return provider


def _accelerator(cell: str, lookups: Lookups) -> Accelerator | None:
    if not cell.strip():
        return None
    accelerator = lookups.accelerators.get(cell.strip().lower())
    if accelerator is None:
        raise PricingError(f"unknown SKU {cell!r}: use a catalog id such as H100-SXM")
    return accelerator


def _pricing_type(cell: str, lookups: Lookups) -> str:
    wanted = cell.strip().lower()
    for value, label in PricingType.choices:
        if wanted in (value, str(label).lower()):
            return value
    raise PricingError(f"unknown pricing type {cell!r}: use one of {', '.join(PricingType.values)}")


# column name -> (parser, whether the column must be in the header)
ENTRY_COLUMNS: dict[str, tuple[Parser, bool]] = {
    "provider": (_provider, True),
    "region": (_text, True),
    "accelerator": (_accelerator, True),
    "pricing_type": (_pricing_type, True),
    "currency": (_currency, True),
    "price_per_accelerator_hour": (_decimal, False),
    "price_per_instance_hour": (_decimal, False),
    "accelerators_per_instance": (_integer, False),
    "instance_type": (_text, False),
    "minimum_count": (_integer, False),
    "minimum_term_months": (_integer, False),
    "observed_on": (_date, False),
    "source": (_text, False),
    "data_flag": (_text, False),
}
QUOTE_COLUMNS: dict[str, tuple[Parser, bool]] = {
    "vendor": (_text, True),
    "accelerator": (_accelerator, True),
    "accelerator_count": (_integer, True),
    "currency": (_currency, True),
    "valid_from": (_date, True),
    "valid_until": (_date, True),
    "price_per_accelerator_hour": (_decimal, False),
    "total_price": (_decimal, False),
    "term_months": (_integer, False),
    "provider": (_provider, False),
    "reference": (_text, False),
    "terms": (_text, False),
}

#: What each quote column means, as the quotes page documents it (pricing/data/README.md too).
QUOTE_CSV_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("vendor", "yes", "who made the offer"),
    ("accelerator", "yes", "catalog id of the SKU, e.g. H100-SXM"),
    ("accelerator_count", "yes", "whole number, positive"),
    ("currency", "yes", "ISO 4217 code, e.g. USD"),
    ("valid_from", "yes", "YYYY-MM-DD"),
    ("valid_until", "yes", "YYYY-MM-DD, not before valid_from"),
    ("price_per_accelerator_hour", "one of the two", "decimal, positive"),
    ("total_price", "one of the two",
     "decimal, positive, for the whole term (the commitment); needs term_months; the hourly "
     "price is total / (count x months x 730 h)"),
    ("term_months", "with total_price", "whole number, 1 to 600"),
    ("provider", "no", "provider slug or name"),
    ("reference", "no", "the vendor's quote number (a vendor's reference may appear once)"),
    ("terms", "no", "free text"),
)  # fmt: skip


def csv_text_decode(data: bytes) -> str:
    """The text of an uploaded file (UTF-8, with or without a byte-order mark)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CsvImportError(
            [CsvRowError(1, "", f"the file is not UTF-8 text (byte {error.start})")]
        ) from None


@dataclass(frozen=True)
class ParsedRow:
    line: int
    values: dict[str, Any]


def _records(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, cells) per record; a quoted cell may span lines."""
    reader = csv.reader(io.StringIO(text))
    start = 1
    for cells in reader:
        yield start, cells
        start = reader.line_num + 1


def _header_check(header: list[str], columns: Mapping[str, tuple[Parser, bool]]) -> list[str]:
    names = [name.strip().lower() for name in header]
    errors = [CsvRowError(1, name, "unknown column") for name in names if name not in columns]
    errors += [
        CsvRowError(1, name, "missing column")
        for name, (_, required) in columns.items()
        if required and name not in names
    ]
    errors += [
        CsvRowError(1, name, "column appears twice")
        for index, name in enumerate(names)
        if name in names[:index]
    ]
    if errors:
        raise CsvImportError(errors)
    return names


def _row_parse(
    line: int,
    cells: list[str],
    names: list[str],
    columns: Mapping[str, tuple[Parser, bool]],
    lookups: Lookups,
    lengths: Mapping[str, int],
) -> tuple[dict[str, Any], list[CsvRowError]]:
    """A row's values by column, or what is wrong with its cells (text the database cannot
    store included: a NUL anywhere, text longer than its column)."""
    if len(cells) > len(names):
        return {}, [CsvRowError(line, "", f"{len(cells)} cells but {len(names)} columns")]
    values: dict[str, Any] = {}
    errors: list[CsvRowError] = []
    for name, cell in zip(names, cells + [""] * (len(names) - len(cells)), strict=True):
        problem = text_problem(cell.strip(), max_length=lengths.get(name))
        if problem is not None:
            errors.append(CsvRowError(line, name, problem))
            continue
        try:
            values[name] = columns[name][0](cell, lookups)
        except PricingError as error:
            errors.append(CsvRowError(line, name, error.message))
    return values, errors


def _text_column_lengths(
    columns: Mapping[str, tuple[Parser, bool]], model: type[Model]
) -> dict[str, int]:
    """The column length of each text column (the others' parsers bound their values)."""
    lengths = model_text_lengths(model)
    return {
        name: lengths[name]
        for name, (parse, _) in columns.items()
        if parse is _text and name in lengths
    }


def _rows_parse(
    text: str,
    columns: Mapping[str, tuple[Parser, bool]],
    check: Callable[[dict[str, Any]], dict[str, Any]],
    model: type[Model],
) -> list[ParsedRow]:
    """Parse and check every row; raise :class:`CsvImportError` listing every problem."""
    records = _records(text)
    first = next(records, None)
    if first is None or not any(cell.strip() for cell in first[1]):
        raise CsvImportError([CsvRowError(1, "", "the file is empty: expected a header line")])
    names = _header_check(first[1], columns)
    lookups = Lookups.load()
    lengths = _text_column_lengths(columns, model)
    rows: list[ParsedRow] = []
    errors: list[CsvRowError] = []
    for line, cells in records:
        if not any(cell.strip() for cell in cells):
            continue
        if len(rows) >= MAX_ROWS:
            raise CsvImportError([CsvRowError(line, "", f"more than {MAX_ROWS} rows")])
        values, row_errors = _row_parse(line, cells, names, columns, lookups, lengths)
        if not row_errors:
            try:
                rows.append(ParsedRow(line, check(values)))
            except PricingError as error:
                row_errors.append(CsvRowError(line, error.field or "", error.message))
        errors += row_errors
    if not rows and not errors:
        errors.append(CsvRowError(1, "", "the file has a header but no rows"))
    if errors:
        raise CsvImportError(errors)
    return rows


def _entry_row_check(book: PriceBook) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def check(values: dict[str, Any]) -> dict[str, Any]:
        currency = values.pop("currency")
        if currency != book.currency:
            raise PricingError(
                f"currency {currency} differs from the book's currency {book.currency}",
                field="currency",
            )
        return price_entry_values_check(values)

    return check


def _entry_duplicates(book: PriceBook, rows: list[ParsedRow]) -> list[CsvRowError]:
    """Rows that repeat an earlier row, or an entry of the book (line 0 in ``seen``)."""
    existing = book.entries.values_list(
        "provider_id", "region", "accelerator_id", "pricing_type", "instance_type"
    )
    seen: dict[tuple[Any, ...], int] = dict.fromkeys(existing, 0)
    errors = []
    for row in rows:
        values = row.values
        key = (
            values["provider"].pk,
            values["region"],
            values["accelerator"].pk,
            values["pricing_type"],
            values["instance_type"],
        )
        first_line = seen.setdefault(key, row.line)
        if first_line != row.line:
            where = f"line {first_line}" if first_line else "an entry already in the book"
            reason = f"same provider, region, accelerator, pricing type and instance as {where}"
            errors.append(CsvRowError(row.line, "instance_type", reason))
    return errors


@dataclass(frozen=True)
class PriceBookImport:
    book: PriceBook
    created: int


@transaction.atomic
def price_book_csv_import(
    *,
    text: str,
    user: OptionalActor,
    book: PriceBook | None = None,
    new_book: Mapping[str, Any] | None = None,
) -> PriceBookImport:
    """Import price entries into a draft ``book``, or into a new draft made from ``new_book``
    (the arguments of ``price_book_create``). All rows or none; a new book too."""
    if book is not None:
        target = price_book_locked_draft(book)
    elif new_book is not None:
        target = price_book_create(user=user, **new_book)
    else:
        raise PricingError("choose a draft price book or name a new one", field="book")
    rows = _rows_parse(text, ENTRY_COLUMNS, _entry_row_check(target), PriceEntry)
    duplicates = _entry_duplicates(target, rows)
    if duplicates:
        raise CsvImportError(duplicates)
    PriceEntry.objects.bulk_create(PriceEntry(book=target, **row.values) for row in rows)
    price_audit_record(
        actor=user,
        action="imported",
        subject=target,
        comment=f"{len(rows)} entries imported from a CSV file",
    )
    return PriceBookImport(target, len(rows))


def _quote_duplicates(rows: list[ParsedRow], organisation: Organisation) -> list[CsvRowError]:
    seen: dict[tuple[str, str], int] = {}
    quotes = VendorQuote.objects.filter(organisation=organisation).exclude(reference="")
    existing = set(quotes.values_list("vendor", "reference"))
    errors = []
    for row in rows:
        key = (row.values["vendor"], row.values["reference"])
        if not key[1]:
            continue
        if key in existing:
            errors.append(CsvRowError(row.line, "reference", "this vendor's quote exists"))
        elif seen.setdefault(key, row.line) != row.line:
            errors.append(CsvRowError(row.line, "reference", f"repeats line {seen[key]}"))
    return errors


@transaction.atomic
def quote_csv_import(
    *, text: str, user: OptionalActor, organisation: Organisation
) -> list[VendorQuote]:
    """Import vendor quotes of ``organisation``: all rows or none."""
    rows = _rows_parse(text, QUOTE_COLUMNS, quote_values_check, VendorQuote)
    duplicates = _quote_duplicates(rows, organisation)
    if duplicates:
        raise CsvImportError(duplicates)
    quotes = VendorQuote.objects.bulk_create(
        VendorQuote(**row.values, organisation=organisation, created_by=actor_user(user))
        for row in rows
    )
    for quote in quotes:  # bulk_create sets the ids on PostgreSQL and SQLite
        price_audit_record(
            actor=user,
            action="created",
            subject=quote,
            changes=price_audit_fields(quote, QUOTE_FIELDS),
            comment="imported from a CSV file",
        )
    return quotes
