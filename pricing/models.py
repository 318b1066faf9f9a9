"""What hardware exists and what it costs: accelerators, providers, price books, quotes,
on-prem cost profiles and exchange rates.

Models hold data and read-only helpers; every write goes through :mod:`pricing.services`,
which also enforces the rules (a published price book never changes, for one).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse

from lib.appendonly import AppendOnlyModel
from lib.money import MONEY_DIGITS, MONEY_PLACES

# Prices per hour and rates keep 10 decimals (an instance price / 8 or /16 stays exact);
# totals are money to the cent; shares are percentages with 2 decimals.
PRICE_DIGITS, PRICE_PLACES = 20, 10
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


class Accelerator(models.Model):
    """An accelerator SKU: from the estimator's catalog, or custom (added by a pricing admin).

    Catalog SKUs are written by ``accelerator_catalog_sync`` only; custom ones are never
    touched by it.
    """

    catalog_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    vendor = models.CharField(max_length=100)
    family = models.CharField(max_length=64, default="generic")
    memory_gib = models.FloatField(help_text="Device memory [GiB]")
    memory_bandwidth_tbs = models.FloatField(help_text="Peak memory bandwidth [TB/s]")
    peak_tflops_fp32 = models.FloatField(null=True, blank=True)
    peak_tflops_tf32 = models.FloatField(null=True, blank=True)
    peak_tflops_fp16 = models.FloatField(null=True, blank=True)
    peak_tflops_bf16 = models.FloatField(null=True, blank=True)
    peak_tflops_fp8 = models.FloatField(null=True, blank=True)
    intra_node_interconnect = models.CharField(max_length=200, blank=True)
    intra_node_bandwidth_gbs = models.FloatField(
        default=0, help_text="Per device, one direction [GB/s]"
    )
    inter_node_bandwidth_gbps = models.FloatField(default=0, help_text="Per device [Gbit/s]")
    devices_per_node = models.PositiveSmallIntegerField(default=8)
    tdp_w = models.FloatField(default=0, help_text="Board power, 0 when unknown [W]")
    source = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    is_custom = models.BooleanField(default=False)
    synced_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["vendor", "catalog_id"]

    def __str__(self) -> str:
        return self.catalog_id

    def get_absolute_url(self) -> str:
        return reverse("pricing:accelerator-detail", args=[self.catalog_id])

    @property
    def peak_tflops(self) -> dict[str, float]:
        """Dense peak per precision; a precision the chip lacks is absent. [TFLOP/s]"""
        values = {p: getattr(self, f"peak_tflops_{p}") for p in PRECISIONS}
        return {p: v for p, v in values.items() if v is not None}


class Provider(models.Model):
    class Kind(models.TextChoices):
        CLOUD = "cloud", "Cloud"
        GPU_CLOUD = "gpu_cloud", "GPU cloud"
        ONPREM = "onprem", "On-prem"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    website = models.URLField(blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return self.name


class PriceBook(models.Model):
    """A named, dated set of prices in one currency. Published books never change.

    A book of an organisation is seen by its members only; a book without one (a public
    list-price book) is seen by everyone and changed by staff only.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"

    organisation = models.ForeignKey(
        "organisations.Organisation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="price_books",
        help_text="The organisation whose private book this is; empty: public, for everyone",
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    currency = models.CharField(max_length=3)
    source = models.TextField(help_text="Where the prices come from")
    fetched_at = models.DateTimeField(help_text="When the prices were collected")
    dates_note = models.TextField(
        blank=True, help_text="What is uncertain about the dates, if anything"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    copied_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="copies"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-fetched_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_status_display().lower()})"

    def get_absolute_url(self) -> str:
        return reverse("pricing:price-book-detail", args=[self.pk])

    @property
    def is_public(self) -> bool:
        return self.organisation_id is None

    @property
    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED


class PricingType(models.TextChoices):
    ON_DEMAND = "on_demand", "On-demand"
    SPOT = "spot", "Spot"
    RESERVED_1Y = "reserved_1y", "Reserved 1 year"
    RESERVED_3Y = "reserved_3y", "Reserved 3 years"
    COMMITTED = "committed", "Committed contract"


class PriceEntry(models.Model):
    """The price of one accelerator-hour at a provider, region and pricing type."""

    book = models.ForeignKey(PriceBook, on_delete=models.CASCADE, related_name="entries")
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="entries")
    region = models.CharField(max_length=64)
    accelerator = models.ForeignKey(Accelerator, on_delete=models.PROTECT, related_name="entries")
    pricing_type = models.CharField(max_length=16, choices=PricingType.choices)
    price_per_accelerator_hour = models.DecimalField(
        max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES
    )
    instance_type = models.CharField(max_length=100, blank=True)
    accelerators_per_instance = models.PositiveSmallIntegerField(null=True, blank=True)
    price_per_instance_hour = models.DecimalField(
        max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES, null=True, blank=True
    )
    minimum_count = models.PositiveIntegerField(
        null=True, blank=True, help_text="Fewest accelerators the price applies to"
    )
    minimum_term_months = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Shortest commitment the price applies to [months]"
    )
    observed_on = models.DateField(null=True, blank=True, help_text="When this price was seen")
    source = models.TextField(blank=True)
    data_flag = models.TextField(blank=True, help_text="A known problem with this figure")

    class Meta:
        ordering = ["accelerator__catalog_id", "provider__name", "region", "pricing_type"]
        verbose_name_plural = "price entries"
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_accelerator_hour__gt=0), name="price_entry_price_positive"
            ),
            models.UniqueConstraint(
                fields=[
                    "book",
                    "provider",
                    "region",
                    "accelerator",
                    "pricing_type",
                    "instance_type",
                ],
                name="price_entry_unique_in_book",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.accelerator} at {self.provider} {self.region} ({self.pricing_type})"


class VendorQuote(models.Model):
    """A vendor's offer for a number of accelerators of one SKU, valid between two dates.

    Negotiated, so seen by the members of its organisation only."""

    class PriceBasis(models.TextChoices):
        HOURLY = "hourly", "Per accelerator-hour"
        TERM_TOTAL = "term_total", "Total for the term"

    organisation = models.ForeignKey(
        "organisations.Organisation", on_delete=models.PROTECT, related_name="vendor_quotes"
    )
    vendor = models.CharField(max_length=200)
    reference = models.CharField(max_length=100, blank=True, help_text="The vendor's quote number")
    provider = models.ForeignKey(
        Provider, null=True, blank=True, on_delete=models.PROTECT, related_name="quotes"
    )
    accelerator = models.ForeignKey(Accelerator, on_delete=models.PROTECT, related_name="quotes")
    accelerator_count = models.PositiveIntegerField()
    price_basis = models.CharField(max_length=16, choices=PriceBasis.choices)
    price_per_accelerator_hour = models.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=PRICE_PLACES,
        help_text="Quoted, or derived from the total for the term",
    )
    total_price = models.DecimalField(
        max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, null=True, blank=True
    )
    term_months = models.PositiveSmallIntegerField(null=True, blank=True)
    currency = models.CharField(max_length=3)
    valid_from = models.DateField()
    valid_until = models.DateField()
    terms = models.TextField(blank=True)
    is_example = models.BooleanField(default=False, help_text="Demo data, not a real offer")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-valid_until", "vendor"]
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_accelerator_hour__gt=0), name="quote_price_positive"
            ),
            models.CheckConstraint(
                condition=Q(valid_until__gte=F("valid_from")), name="quote_valid_dates_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.vendor}: {self.accelerator_count} x {self.accelerator}"

    def validity_on(self, on: date) -> str:
        """'valid', 'expired' or 'not_yet_valid' on the given date."""
        if on > self.valid_until:
            return "expired"
        if on < self.valid_from:
            return "not_yet_valid"
        return "valid"


class OnPremProfile(models.Model):
    """The cost inputs of a cluster an organisation owns; :mod:`pricing.tco` turns them into
    a price. Seen by the members of its organisation only."""

    organisation = models.ForeignKey(
        "organisations.Organisation", on_delete=models.PROTECT, related_name="onprem_profiles"
    )
    name = models.CharField(max_length=200)
    accelerator = models.ForeignKey(
        Accelerator, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    currency = models.CharField(max_length=3, default="USD")
    server_price = models.DecimalField(
        max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, help_text="One server with its GPUs"
    )
    gpus_per_server = models.PositiveSmallIntegerField(default=8)
    network_share_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="Of total cluster cost [%]"
    )
    depreciation_years = models.PositiveSmallIntegerField(default=4)
    cost_of_capital_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="Per year [%]"
    )
    power_per_gpu_w = models.DecimalField(max_digits=8, decimal_places=1, help_text="TDP [W]")
    server_power_overhead = models.DecimalField(
        max_digits=6, decimal_places=3, help_text="Server power per GPU as a multiple of TDP"
    )
    average_load_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="Of provisioned power [%]"
    )
    pue = models.DecimalField(max_digits=5, decimal_places=3)
    electricity_price_per_kwh = models.DecimalField(max_digits=10, decimal_places=5)
    colocation_price_per_kw_month = models.DecimalField(max_digits=12, decimal_places=2)
    operations_share_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="Of capital per year [%]"
    )
    utilisation_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="Hours of paid work [%]"
    )
    grid_gco2e_per_kwh = models.DecimalField(
        "grid carbon intensity",
        max_digits=7,
        decimal_places=1,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(2000))],
        help_text=(
            "Carbon intensity of the electricity the cluster draws [gCO2e/kWh], 0 to 2000: "
            "the annual average of its grid (location-based), or the supplier's figure. "
            "Leave empty when unknown: no carbon figure is then given."
        ),
    )
    source = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "on-prem profile"
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "name"], name="onprem_profile_unique_name"
            )
        ]

    def __str__(self) -> str:
        return self.name


class ExchangeRate(models.Model):
    """One unit of ``base_currency`` is worth ``rate`` units of ``quote_currency`` from
    ``rate_date`` until the next rate."""

    base_currency = models.CharField(max_length=3)
    quote_currency = models.CharField(max_length=3)
    rate = models.DecimalField(max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES)
    rate_date = models.DateField()
    source = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["base_currency", "quote_currency", "-rate_date"]
        constraints = [
            models.UniqueConstraint(
                fields=["base_currency", "quote_currency", "rate_date"], name="exchange_rate_unique"
            ),
            models.CheckConstraint(condition=Q(rate__gt=0), name="exchange_rate_positive"),
        ]

    def __str__(self) -> str:
        return f"1 {self.base_currency} = {self.rate} {self.quote_currency} on {self.rate_date}"


class PriceAuditEvent(AppendOnlyModel):
    """Who changed a price, when, and what it was before and after (append-only).

    A price book created, edited, published, copied or deleted, a price entry, a vendor
    quote or an on-prem profile added, edited or deleted. The subject is named by kind, id
    and label rather than a foreign key, so its history outlives it. ``organisation`` is the
    subject's (none for a public book), so each organisation reads only its own trail.
    """

    class Subject(models.TextChoices):
        PRICE_BOOK = "price_book", "Price book"
        PRICE_ENTRY = "price_entry", "Price entry"
        VENDOR_QUOTE = "vendor_quote", "Vendor quote"
        ONPREM_PROFILE = "onprem_profile", "On-prem profile"

    organisation = models.ForeignKey(
        "organisations.Organisation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="price_audit_events",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(max_length=40)
    subject_type = models.CharField(max_length=20, choices=Subject.choices)
    subject_id = models.BigIntegerField()
    subject_label = models.CharField(max_length=300)
    changes = models.JSONField(default=dict, blank=True, help_text="{field: [before, after]}")
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["subject_type", "subject_id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor}: {self.action} {self.subject_label}"


class UsagePrice(models.Model):
    """A price for what a run uses besides accelerator-hours: storage per GB-month, or
    egress per GB, at a provider and region, in its book's currency.

    A GB is what the provider bills as one: AWS, Google Cloud and Azure bill 2^30 bytes
    (:mod:`planner.scenarios.bill` sizes everything so). ``tier`` names the storage class or volume
    tier the price is for ("S3 Standard, first 50 TB/month"): the same provider and region
    may have several.
    """

    class Kind(models.TextChoices):
        STORAGE = "storage", "Storage (per GB-month)"
        EGRESS = "egress", "Egress (per GB)"

    book = models.ForeignKey(PriceBook, on_delete=models.CASCADE, related_name="usage_prices")
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="usage_prices")
    region = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    tier = models.CharField(
        max_length=100,
        blank=True,
        help_text="Storage class or volume tier, e.g. 'S3 Standard, first 50 TB/month'",
    )
    price = models.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=PRICE_PLACES,
        help_text="Per GB-month (storage) or per GB (egress), in the book's currency",
    )
    observed_on = models.DateField(null=True, blank=True, help_text="When this price was seen")
    source = models.TextField(blank=True)

    class Meta:
        ordering = ["kind", "provider__name", "region", "tier"]
        constraints = [
            models.CheckConstraint(condition=Q(price__gte=0), name="usage_price_not_negative"),
            models.UniqueConstraint(
                fields=["book", "provider", "region", "kind", "tier"],
                name="usage_price_unique_in_book",
            ),
        ]

    def __str__(self) -> str:
        tier = f" {self.tier}" if self.tier else ""
        return f"{self.get_kind_display()}: {self.provider} {self.region}{tier}"

    @property
    def unit(self) -> str:
        """What the price is per: 'GB-month' or 'GB'."""
        return "GB-month" if self.kind == self.Kind.STORAGE else "GB"
