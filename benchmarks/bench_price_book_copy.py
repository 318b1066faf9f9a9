"""Time copying a price book of 20,000 entries to a new draft (``price_book_copy``).

    DATABASE_URL=postgres://... python benchmarks/bench_price_book_copy.py [--repeat 3]

Runs in a throwaway test database (``<name>_bench``, dropped afterwards) on the configured
database, SQLite in memory without ``DATABASE_URL``. Target (issue 17): well under 1 s for
20,000 entries on PostgreSQL; it took 24 s when each entry fetched its provider and
accelerator one query at a time.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainplan.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from pricing.models import Accelerator, PriceBook, PriceEntry, PricingType, Provider  # noqa: E402
from pricing.services import accelerator_catalog_sync, price_book_copy  # noqa: E402

TARGET_S = 1.0
ENTRY_COLUMNS = (
    "provider_id", "region", "accelerator_id", "pricing_type", "price_per_accelerator_hour",
    "instance_type", "accelerators_per_instance", "price_per_instance_hour", "minimum_count",
    "minimum_term_months", "observed_on", "source", "data_flag",
)  # fmt: skip


def book_with_entries(count: int) -> PriceBook:
    """A published book of ``count`` distinct entries (providers x regions x SKUs x types)."""
    accelerator_catalog_sync()
    providers = Provider.objects.bulk_create(
        Provider(slug=f"p{i}", name=f"Provider {i}", kind="cloud") for i in range(40)
    )
    accelerators = list(Accelerator.objects.all())
    book = PriceBook.objects.create(
        name="Benchmark", currency="USD", source="generated", fetched_at=timezone.now()
    )
    keys = itertools.product(providers, range(40), accelerators, PricingType.values)
    PriceEntry.objects.bulk_create(
        (
            PriceEntry(
                book=book,
                provider=provider,
                region=f"region-{region}",
                accelerator=accelerator,
                pricing_type=pricing_type,
                price_per_accelerator_hour=Decimal("2.5") + region,
                instance_type="8x",
                accelerators_per_instance=8,
                price_per_instance_hour=(Decimal("2.5") + region) * 8,
                minimum_term_months=12,
                source="generated",
                data_flag="",
            )
            for provider, region, accelerator, pricing_type in itertools.islice(keys, count)
        ),
        batch_size=2000,
    )
    book.status = PriceBook.Status.PUBLISHED
    book.save(update_fields=["status"])
    return book


def entry_rows(book: PriceBook) -> list[tuple[object, ...]]:
    return sorted(book.entries.values_list(*ENTRY_COLUMNS), key=repr)


def time_copies(book: PriceBook, repeat: int) -> tuple[float, PriceBook]:
    samples, copy = [], book
    for index in range(repeat):
        start = time.perf_counter()
        copy = price_book_copy(book=book, user=None, name=f"Copy {index}")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if connection.vendor != "sqlite":
        connection.settings_dict["TEST"]["NAME"] = f"{connection.settings_dict['NAME']}_bench"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        book = book_with_entries(args.entries)
        seconds, copy = time_copies(book, args.repeat)
        assert copy.copied_from_id == book.pk
        assert copy.status == PriceBook.Status.DRAFT
        assert entry_rows(copy) == entry_rows(book), "the copy's entries differ"
        print(
            f"price_book_copy: {copy.entries.count():,} entries in {seconds:.3f} s "
            f"(median of {args.repeat}, target < {TARGET_S:g} s) on {connection.vendor}"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
