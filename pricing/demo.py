"""Demo data for the pricing app, so a new user sees real numbers at once.

Idempotent: running it again adds nothing twice. Everything here is labelled as what it is:
a public list-price snapshot with uncertain dates (with storage and egress list prices of
AWS, GCP and Azure), approximate exchange rates, the reference
worked example of an on-prem cluster, and an example (not real) vendor quote. The book is
public; the profile and the quote belong to the demo organisation.
"""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.contrib.auth.models import Group, Permission
from django.db import transaction
from django.utils import timezone

from organisations.demo import demo_organisation
from organisations.models import Role
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    Provider,
    VendorQuote,
)
from pricing.services import (
    accelerator_catalog_sync,
    exchange_rate_create,
    onprem_profile_create,
    price_book_csv_import,
    price_book_publish,
    provider_create,
    quote_create,
)
from pricing.services.usage import usage_price_create

DATA_DIR = Path(__file__).resolve().parent / "data"
EXAMPLE_BOOK_NAME = "Public list-price snapshot (example)"
EXAMPLE_BOOK = {
    "name": EXAMPLE_BOOK_NAME,
    "currency": "USD",
    "fetched_at": datetime(2026, 3, 17, tzinfo=UTC),
    "source": (
        "Public on-demand and spot list prices: skypilot-org/skypilot-catalog (AWS, GCP, "
        "Azure, OCI, Lambda, Nebius, DigitalOcean, RunPod) and spheron.network (a "
        "marketplace), via the reference file prices.csv; each entry names its source. "
        "Instance price / accelerator count = price per accelerator-hour."
    ),
    "description": (
        "A public list-price snapshot: example seed data, not live prices and not a "
        "negotiated rate. Check a price at its source before relying on it."
    ),
    "dates_note": (
        "Uncertain: collected between late 2025 and March 2026 from undated catalog copies; "
        "Azure rows are older (~2024). fetched_at is the latest date named in the sources "
        "(2026-03-17). Entries with a known data problem carry a data flag."
    ),
}
_RECHECK = "public list price as of 2025, to re-check at the source before relying on it"
#: Storage (per GB-month) and egress (per GB) list prices of the example book, in USD:
#: (provider slug, region, kind, tier, price, source). The clouds bill a GB as 2^30 bytes.
EXAMPLE_USAGE_PRICES = (
    (
        "aws",
        "us-east-1",
        "storage",
        "S3 Standard, first 50 TB/month",
        Decimal("0.023"),
        "https://aws.amazon.com/s3/pricing/ : S3 Standard, US East (N. Virginia), first 50 "
        f"TB/month, $0.023 per GB-month (AWS's GB-month examples count 2^30 bytes); {_RECHECK}",
    ),
    (
        "aws",
        "us-east-1",
        "egress",
        "Data transfer out to the internet, up to 10 TB/month",
        Decimal("0.09"),
        "https://aws.amazon.com/ec2/pricing/on-demand/ (Data Transfer): out from US East to "
        "the internet, up to 10 TB/month, $0.09 per GB after the first 100 GB/month free "
        f"across AWS; {_RECHECK}",
    ),
    (
        "gcp",
        "us-central1",
        "storage",
        "Cloud Storage Standard, regional",
        Decimal("0.020"),
        "https://cloud.google.com/storage/pricing : Standard storage, us-central1, "
        "$0.000027397 per GiB-hour = $0.020 per GiB-month (730 h); "
        f"{_RECHECK}",
    ),
    (
        "gcp",
        "us-central1",
        "egress",
        "Premium Tier internet egress, first 1 TiB/month",
        Decimal("0.12"),
        "https://cloud.google.com/vpc/network-pricing : Premium Tier internet egress from "
        "North America to North America, 0-1 TiB/month, $0.12 per GiB (1-10 TiB: $0.11); "
        f"{_RECHECK}",
    ),
    (
        "azure",
        "eastus",
        "storage",
        "Blob Storage hot tier, LRS, first 50 TB/month",
        Decimal("0.018"),
        "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/ : block blob, hot "
        f"access tier, LRS, East US, first 50 TB/month, about $0.018 per GB-month; {_RECHECK}",
    ),
    (
        "azure",
        "eastus",
        "egress",
        "Internet egress (Microsoft global network), first 10 TB/month",
        Decimal("0.087"),
        "https://azure.microsoft.com/en-us/pricing/details/bandwidth/ : internet egress routed "
        "over the Microsoft global network from North America, first 10 TB/month after the "
        f"first 100 GB free, $0.087 per GB (ISP transit routing: $0.04); {_RECHECK}",
    ),
)
DEMO_RATE_SOURCE = (
    "Demo rate: approximate and rounded, for trying TrainPlan only. Replace it with your "
    "treasury's or a central bank's reference rate before comparing real prices."
)
DEMO_RATES = (
    ("EUR", "USD", Decimal("1.04"), date(2025, 1, 2)),
    ("EUR", "USD", Decimal("1.17"), date(2026, 1, 2)),
    ("GBP", "USD", Decimal("1.25"), date(2025, 1, 2)),
    ("GBP", "USD", Decimal("1.34"), date(2026, 1, 2)),
)
WORKED_EXAMPLE_NAME = "Reference worked example: 8 x H100 node"
WORKED_EXAMPLE = {
    "currency": "USD",
    "server_price": Decimal(270000),
    "gpus_per_server": 8,
    "network_share_percent": Decimal(19),
    "depreciation_years": 4,
    "cost_of_capital_percent": Decimal(8),
    "power_per_gpu_w": Decimal(700),
    "server_power_overhead": Decimal("1.82"),
    "average_load_percent": Decimal(75),
    "pue": Decimal("1.25"),
    "electricity_price_per_kwh": Decimal("0.08"),
    "colocation_price_per_kw_month": Decimal(200),
    "operations_share_percent": Decimal(5),
    "utilisation_percent": Decimal(80),
    "source": (
        "Public estimates (Epoch AI and others) collected in the reference README: an 8 x "
        "H100 node at $270,000, networking 19 % of cluster cost, 4 years at 8 %, 700 W x "
        "1.82 server overhead, 75 % load, PUE 1.25, $0.08/kWh, $200 per kW-month, "
        "operations 5 % of capital, 80 % utilisation -> about $2.65 per GPU-hour."
    ),
}
EXAMPLE_QUOTE_REFERENCE = "EXAMPLE-0001"
#: H100s the example quote covers; the demo project sizes all its scenarios to match.
EXAMPLE_QUOTE_COUNT = 256


def _providers_load() -> list[str]:
    created = []
    with (DATA_DIR / "providers.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if not Provider.objects.filter(slug=row["slug"]).exists():
                provider_create(**row)
                created.append(row["name"])
    return [f"Providers: {len(created)} created, {Provider.objects.count()} in all."]


def _example_book_load() -> list[str]:
    if PriceBook.objects.filter(name=EXAMPLE_BOOK_NAME).exists():
        return [f"Price book '{EXAMPLE_BOOK_NAME}': present."]
    text = (DATA_DIR / "public_list_prices_snapshot.csv").read_text(encoding="utf-8")
    imported = price_book_csv_import(text=text, user=None, new_book=EXAMPLE_BOOK)
    usage = _example_usage_prices_add(imported.book)
    price_book_publish(book=imported.book, user=None)
    flagged = imported.book.entries.exclude(data_flag="").count()
    return [
        f"Price book '{EXAMPLE_BOOK_NAME}': published with {imported.created} entries "
        f"({flagged} flagged with a data problem).",
        f"Price book '{EXAMPLE_BOOK_NAME}': {usage} storage and egress prices (AWS, GCP, Azure).",
    ]


def _example_usage_prices_add(book: PriceBook) -> int:
    """The storage and egress list prices of :data:`EXAMPLE_USAGE_PRICES`, added to the
    example book while it is still a draft (a published book never changes)."""
    for slug, region, kind, tier, price, source in EXAMPLE_USAGE_PRICES:
        usage_price_create(
            book=book,
            user=None,
            provider=Provider.objects.get(slug=slug),
            region=region,
            kind=kind,
            tier=tier,
            price=price,
            source=source,
        )
    return len(EXAMPLE_USAGE_PRICES)


def _rates_load() -> list[str]:
    created = 0
    for base, quote, rate, rate_date in DEMO_RATES:
        exists = ExchangeRate.objects.filter(
            base_currency=base, quote_currency=quote, rate_date=rate_date
        ).exists()
        if not exists:
            exchange_rate_create(
                base_currency=base,
                quote_currency=quote,
                rate=rate,
                rate_date=rate_date,
                source=DEMO_RATE_SOURCE,
            )
            created += 1
    return [f"Exchange rates: {created} demo rates created (approximate, labelled as such)."]


def _onprem_load() -> list[str]:
    if OnPremProfile.objects.filter(name=WORKED_EXAMPLE_NAME).exists():
        return [f"On-prem profile '{WORKED_EXAMPLE_NAME}': present."]
    onprem_profile_create(
        user=None,
        organisation=demo_organisation(),
        name=WORKED_EXAMPLE_NAME,
        accelerator=Accelerator.objects.filter(catalog_id="H100-SXM").first(),
        **WORKED_EXAMPLE,
    )
    return [f"On-prem profile '{WORKED_EXAMPLE_NAME}': created."]


def _quote_load() -> list[str]:
    if VendorQuote.objects.filter(reference=EXAMPLE_QUOTE_REFERENCE).exists():
        return [f"Vendor quote {EXAMPLE_QUOTE_REFERENCE}: present."]
    today = timezone.localdate()
    until = today + timedelta(days=180)
    quote_create(
        user=None,
        organisation=demo_organisation(),
        vendor="Example Compute Ltd (EXAMPLE - not a real offer)",
        reference=EXAMPLE_QUOTE_REFERENCE,
        accelerator=Accelerator.objects.get(catalog_id="H100-SXM"),
        accelerator_count=EXAMPLE_QUOTE_COUNT,
        total_price=Decimal("4709376.00"),
        term_months=12,
        currency="USD",
        valid_from=today,
        valid_until=until,
        terms=(
            f"EXAMPLE for the demo: {EXAMPLE_QUOTE_COUNT} x H100 SXM for 12 months as one "
            "reserved cluster with InfiniBand, storage and support; billed monthly. Not a real "
            "offer."
        ),
        is_example=True,
    )
    return [f"Vendor quote {EXAMPLE_QUOTE_REFERENCE}: created (an example, valid until {until})."]


def pricing_admin_permissions_grant() -> list[str]:
    """The admin site's model permissions for the ``pricing_admin`` group; which records a
    member may change there is their membership's to say (:mod:`pricing.access`)."""
    name = Role.PRICING_ADMIN.value
    group, _ = Group.objects.get_or_create(name=name)
    permissions = Permission.objects.filter(content_type__app_label="pricing")
    group.permissions.add(*permissions)
    return [f"Group '{name}': holds the {permissions.count()} pricing model permissions."]


@transaction.atomic
def pricing_demo_load() -> list[str]:
    """Load the pricing demo data; return one line per step for the command to print."""
    lines = accelerator_catalog_sync().lines()
    for step in (
        _providers_load,
        _example_book_load,
        _rates_load,
        _onprem_load,
        _quote_load,
        pricing_admin_permissions_grant,
    ):
        lines += step()
    return lines
