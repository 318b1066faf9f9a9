"""CSV import: good files import whole; a bad file reports every problem and imports nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from organisations.demo import demo_organisation
from pricing.demo import DATA_DIR
from pricing.errors import CsvImportError, PricingError, PublishedBookImmutable
from pricing.models import Accelerator, PriceBook, PriceEntry, Provider, VendorQuote
from pricing.services import csv_text_decode, price_book_csv_import, quote_csv_import

pytestmark = pytest.mark.django_db

NEW_BOOK = {
    "name": "Imported",
    "currency": "USD",
    "source": "a test file",
    "fetched_at": datetime(2026, 2, 1, tzinfo=UTC),
}
HEADER = "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour,observed_on"
GOOD_ENTRIES = f"""{HEADER}
aws,us-east-1,H100-SXM,spot,USD,2.41,2026-01-15
Lambda,us-east-1,h100-sxm,On-demand,USD,2.99,
gcp,us-central1,A100-80GB-SXM,reserved_1y,USD,1.80,
"""
BAD_ENTRIES = f"""{HEADER}
aws,us-east-1,H100-SXM,spot,USD,2.41,2026-01-15
aws,us-east-1,H999-SXM,spot,USD,2.41,
aws,us-east-1,H100-SXM,on_demand,USD,-3.00,
aws,us-east-1,B200,on_demand,usd,5.00,
aws,us-east-1,B200,spot,USD,1.00,2026-02-30
acme,us-east-1,B200,reserved_1y,USD,3.00,
"""


def _row_counts() -> tuple[int, int, int]:
    return PriceBook.objects.count(), PriceEntry.objects.count(), VendorQuote.objects.count()


def _problems(error: CsvImportError) -> set[tuple[int, str]]:
    return {(problem.line, problem.column) for problem in error.errors}


def test_price_book_csv_import_good_file_into_a_new_draft(
    catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    result = price_book_csv_import(text=GOOD_ENTRIES, user=None, new_book=NEW_BOOK)
    assert result.created == 3
    assert result.book.status == PriceBook.Status.DRAFT
    reserved = result.book.entries.get(pricing_type="reserved_1y")
    assert reserved.minimum_term_months == 12
    lambda_price = result.book.entries.get(provider=providers["lambda"])
    assert lambda_price.price_per_accelerator_hour == Decimal("2.99")


def test_price_book_csv_import_bad_file_reports_every_row_and_imports_nothing(
    draft_book: PriceBook,
) -> None:
    before = _row_counts()
    with pytest.raises(CsvImportError) as failed:
        price_book_csv_import(text=BAD_ENTRIES, user=None, new_book=NEW_BOOK)
    reasons = {(p.line, p.column): p.reason for p in failed.value.errors}
    assert set(reasons) == {
        (3, "accelerator"),
        (4, "price_per_accelerator_hour"),
        (5, "currency"),
        (6, "observed_on"),
        (7, "provider"),
    }
    assert "unknown SKU 'H999-SXM'" in reasons[(3, "accelerator")]
    assert "negative price -3.00" in reasons[(4, "price_per_accelerator_hour")]
    assert "unknown currency 'usd'" in reasons[(5, "currency")]
    assert "bad date '2026-02-30'" in reasons[(6, "observed_on")]
    assert "unknown provider 'acme'" in reasons[(7, "provider")]
    assert _row_counts() == before  # not even the new book


def test_price_book_csv_import_reports_missing_and_unknown_columns(
    catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    text = "provider,region,accelerator,price,currency\naws,us-east-1,H100-SXM,2.0,USD\n"
    with pytest.raises(CsvImportError) as failed:
        price_book_csv_import(text=text, user=None, new_book=NEW_BOOK)
    reasons = {(p.line, p.column): p.reason for p in failed.value.errors}
    assert reasons == {(1, "price"): "unknown column", (1, "pricing_type"): "missing column"}


def test_price_book_csv_import_refuses_a_currency_other_than_the_books(
    draft_book: PriceBook,
) -> None:
    text = f"{HEADER}\naws,us-west-2,H100-SXM,spot,EUR,2.00,\n"
    with pytest.raises(CsvImportError) as failed:
        price_book_csv_import(text=text, user=None, book=draft_book)
    assert failed.value.errors[0].reason == "currency EUR differs from the book's currency USD"


def test_price_book_csv_import_reports_duplicates_of_the_book_and_the_file(
    draft_book: PriceBook,
) -> None:
    text = (
        f"{HEADER}\n"
        "lambda,us-east-1,H100-SXM,on_demand,USD,3.00,\n"
        "aws,us-west-2,H100-SXM,spot,USD,2.00,\n"
        "aws,us-west-2,H100-SXM,spot,USD,2.10,\n"
    )
    with pytest.raises(CsvImportError) as failed:
        price_book_csv_import(text=text, user=None, book=draft_book)
    reasons = [p.reason for p in failed.value.errors]
    assert _problems(failed.value) == {(2, "instance_type"), (4, "instance_type")}
    assert "an entry already in the book" in reasons[0]
    assert "as line 3" in reasons[1]
    assert draft_book.entries.count() == 2


def test_price_book_csv_import_into_a_published_book_is_refused(
    published_book: PriceBook,
) -> None:
    before = _row_counts()
    with pytest.raises(PublishedBookImmutable):
        price_book_csv_import(text=GOOD_ENTRIES, user=None, book=published_book)
    assert _row_counts() == before


def test_price_book_csv_import_counts_lines_of_multiline_cells(
    catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    text = (
        "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour,source\n"
        'aws,us-east-1,H100-SXM,spot,USD,2.41,"two\nlines"\n'
        "aws,us-east-1,H100-SXM,on_demand,USD,x,\n"
    )
    with pytest.raises(CsvImportError) as failed:
        price_book_csv_import(text=text, user=None, new_book=NEW_BOOK)
    assert _problems(failed.value) == {(4, "price_per_accelerator_hour")}
    assert failed.value.errors[0].reason == "bad number 'x'"


def test_price_book_csv_import_needs_rows(catalog: dict[str, Accelerator]) -> None:
    for text, reason in (("", "the file is empty"), (f"{HEADER}\n", "has a header but no rows")):
        with pytest.raises(CsvImportError) as failed:
            price_book_csv_import(text=text, user=None, new_book=NEW_BOOK)
        assert reason in failed.value.errors[0].reason


def test_price_book_csv_import_refuses_a_bad_new_book(catalog: dict[str, Accelerator]) -> None:
    with pytest.raises(PricingError) as refused:
        price_book_csv_import(text=GOOD_ENTRIES, user=None, new_book=NEW_BOOK | {"currency": "$"})
    assert refused.value.field == "currency"
    assert PriceBook.objects.count() == 0


def test_price_book_csv_import_loads_the_example_snapshot(
    catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    Provider.objects.all().delete()
    from pricing.demo import pricing_demo_load

    pricing_demo_load()
    book = PriceBook.objects.get(name__startswith="Public list-price snapshot")
    text = (DATA_DIR / "public_list_prices_snapshot.csv").read_text(encoding="utf-8")
    assert book.entries.count() == text.count("\n") - 1
    p5 = book.entries.get(instance_type="p5.48xlarge", pricing_type="on_demand")
    assert p5.price_per_accelerator_hour == Decimal("6.88")  # $55.04 / 8
    gb200 = book.entries.get(provider__slug="spheron", accelerator__catalog_id="GB200")
    assert gb200.price_per_accelerator_hour == Decimal("4.54")  # $9.08 per 2-GPU superchip


QUOTE_HEADER = (
    "vendor,accelerator,accelerator_count,currency,valid_from,valid_until,"
    "price_per_accelerator_hour,total_price,term_months,reference"
)


def test_quote_csv_import_good_file(catalog: dict[str, Accelerator]) -> None:
    text = (
        f"{QUOTE_HEADER}\n"
        "Acme,H100-SXM,64,USD,2026-01-01,2026-06-30,2.25,,,Q-1\n"
        "Acme,B200,128,EUR,2026-01-01,2026-06-30,,2242560,12,Q-2\n"
    )
    quotes = quote_csv_import(text=text, user=None, organisation=demo_organisation())
    assert len(quotes) == 2
    derived = VendorQuote.objects.get(reference="Q-2")
    assert derived.price_per_accelerator_hour == Decimal("2.00")  # 2,242,560 / (128 x 12 x 730)


def test_quote_csv_import_bad_file_reports_every_row_and_imports_nothing(
    catalog: dict[str, Accelerator],
) -> None:
    text = (
        f"{QUOTE_HEADER}\n"
        "Acme,H100-SXM,64,USD,2026-01-01,2026-06-30,2.25,,,Q-1\n"
        "Acme,H100-SXM,64,USD,01/02/2026,2026-06-30,2.25,,,Q-2\n"
        "Acme,H100-SXM,64,USD,2026-01-01,2026-06-30,-2.25,,,Q-3\n"
        "Acme,TPU-v9,64,USD,2026-01-01,2026-06-30,2.25,,,Q-4\n"
        "Acme,H100-SXM,64,XXX,2026-01-01,2026-06-30,2.25,,,Q-5\n"
    )
    with pytest.raises(CsvImportError) as failed:
        quote_csv_import(text=text, user=None, organisation=demo_organisation())
    assert _problems(failed.value) == {
        (3, "valid_from"),
        (4, "price_per_accelerator_hour"),
        (5, "accelerator"),
        (6, "currency"),
    }
    assert VendorQuote.objects.count() == 0


def test_csv_text_decode_refuses_a_file_that_is_not_utf8() -> None:
    with pytest.raises(CsvImportError, match="1 problem"):
        csv_text_decode("provider,région\n".encode("latin-1"))
    assert csv_text_decode("\ufeffa,b\n".encode()) == "a,b\n"


@pytest.mark.parametrize(
    ("row", "column", "reason"),
    [
        ("aws,us-east\x00-1,H100-SXM,spot,USD,2.41,", "region", "Null characters"),
        ("aws\x00,us-east-1,H100-SXM,spot,USD,2.41,", "provider", "Null characters"),
        ("aws,us-east-1,H100-SXM,spot,USD,2.41\x00,", "price_per_accelerator_hour", "Null"),
        (f"aws,{'r' * 65},H100-SXM,spot,USD,2.41,", "region", "no more than 64 characters"),
    ],
)
def test_price_book_csv_import_text_the_database_cannot_store_is_a_problem(
    catalog: dict[str, Accelerator],
    providers: dict[str, Provider],
    row: str,
    column: str,
    reason: str,
) -> None:
    before = _row_counts()
    with pytest.raises(CsvImportError) as raised:
        price_book_csv_import(text=f"{HEADER}\n{row}\n", user=None, new_book=NEW_BOOK)
    [problem] = raised.value.errors
    assert (problem.line, problem.column) == (2, column)
    assert reason in problem.reason
    assert _row_counts() == before


def test_quote_csv_import_text_over_its_column_is_a_problem(
    catalog: dict[str, Accelerator],
) -> None:
    text = (
        "vendor,accelerator,accelerator_count,currency,valid_from,valid_until,"
        "price_per_accelerator_hour,reference\n"
        f"Acme,H100-SXM,8,USD,2026-01-01,2026-12-31,2.00,{'Q' * 101}\n"
    )
    with pytest.raises(CsvImportError) as raised:
        quote_csv_import(text=text, user=None, organisation=demo_organisation())
    assert [(p.line, p.column) for p in raised.value.errors] == [(2, "reference")]
    assert not VendorQuote.objects.exists()
