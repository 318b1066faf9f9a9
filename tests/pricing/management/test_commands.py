from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from estimator.core.catalog import load_catalog
from organisations.models import Organisation
from pricing.models import Accelerator, PriceBook, PriceEntry, Provider, VendorQuote

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_sync_catalog_command_creates_every_catalog_sku() -> None:
    assert f"{len(load_catalog())} created" in _run("sync_catalog")
    assert "0 created" in _run("sync_catalog")
    assert Accelerator.objects.count() == len(load_catalog())


def test_import_pricing_csv_command_imports_a_good_file(
    tmp_path: Path, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    path = tmp_path / "prices.csv"
    path.write_text(
        "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour\n"
        "aws,us-east-1,H100-SXM,spot,USD,2.41\n"
    )
    output = _run(
        "import_pricing_csv",
        "price-book",
        str(path),
        "--name=March",
        "--source=a list",
        "--fetched-at=2026-03-01",
    )
    assert "Imported 1 entries" in output
    assert PriceBook.objects.get(name="March").entries.count() == 1


QUOTES_CSV = (
    "vendor,accelerator,accelerator_count,currency,valid_from,valid_until,"
    "price_per_accelerator_hour,total_price,term_months,reference\n"
    "Acme,H100-SXM,64,USD,2026-01-01,2026-06-30,2.25,,,Q-1\n"
)


def test_import_pricing_csv_command_imports_quotes_into_the_named_organisation(
    tmp_path: Path, catalog: dict[str, Accelerator], organisation: Organisation
) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text(QUOTES_CSV)
    with pytest.raises(CommandError, match="--organisation is required"):
        _run("import_pricing_csv", "quotes", str(path))
    with pytest.raises(CommandError, match="--organisation: no organisation named 'Nobody'"):
        _run("import_pricing_csv", "quotes", str(path), "--organisation=Nobody")
    assert "Imported 1 quotes" in _run(
        "import_pricing_csv", "quotes", str(path), f"--organisation={organisation.name}"
    )
    assert VendorQuote.objects.get(reference="Q-1").organisation == organisation


def test_import_pricing_csv_command_reports_problems_and_imports_nothing(
    tmp_path: Path, draft_book: PriceBook
) -> None:
    path = tmp_path / "prices.csv"
    path.write_text(
        "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour\n"
        "aws,us-west-2,H100-SXM,spot,USD,2.41\n"
        "nobody,us-west-2,H100-SXM,spot,USD,2.41\n"
    )
    before = PriceEntry.objects.count()
    with pytest.raises(CommandError) as failed:
        _run("import_pricing_csv", "price-book", str(path), f"--book={draft_book.pk}")
    assert "line 3, column provider: unknown provider 'nobody'" in str(failed.value)
    assert PriceEntry.objects.count() == before


def test_load_demo_prints_the_pricing_lines() -> None:
    output = _run("load_demo")
    assert "Accelerator catalog:" in output
    assert "Public list-price snapshot (example)" in output
    assert "maya / maya-demo-pass" in output
