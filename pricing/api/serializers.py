"""Input serializers parse and type-check requests; output serializers render records.

No business rule lives here: ranges, immutability and duplicates are the services' job.
Every input serializer derives from :class:`lib.inputs.StorableInput`, so text
PostgreSQL cannot store (a NUL, too long for its column) is a 400 naming the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from lib.inputs import StorableInput
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Organisation
from pricing.access import visible
from pricing.models import (
    PRICE_DIGITS,
    PRICE_PLACES,
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    PriceEntry,
    PricingType,
    Provider,
    VendorQuote,
)
from pricing.selectors import onprem_profile_cost
from pricing.tco import OnPremCost


def _price(*, required: bool = True, allow_null: bool = False) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=PRICE_DIGITS,
        decimal_places=PRICE_PLACES,
        required=required,
        allow_null=allow_null,
    )


# --- Accelerators and providers -------------------------------------------------------------


class AcceleratorOutput(serializers.ModelSerializer):
    peak_tflops = serializers.DictField(
        child=serializers.FloatField(), read_only=True, help_text="Dense peak [TFLOP/s]"
    )

    class Meta:
        model = Accelerator
        fields = [
            "catalog_id",
            "name",
            "vendor",
            "family",
            "memory_gib",
            "memory_bandwidth_tbs",
            "peak_tflops",
            "intra_node_interconnect",
            "intra_node_bandwidth_gbs",
            "inter_node_bandwidth_gbps",
            "devices_per_node",
            "tdp_w",
            "source",
            "notes",
            "is_custom",
            "synced_at",
        ]


class AcceleratorInput(StorableInput):
    storage_model = Accelerator

    catalog_id = serializers.CharField(max_length=64)
    name = serializers.CharField(max_length=200)
    vendor = serializers.CharField(max_length=100)
    family = serializers.CharField(max_length=64, default="generic")
    memory_gib = serializers.FloatField()
    memory_bandwidth_tbs = serializers.FloatField()
    peak_tflops_fp32 = serializers.FloatField(required=False, allow_null=True)
    peak_tflops_tf32 = serializers.FloatField(required=False, allow_null=True)
    peak_tflops_fp16 = serializers.FloatField(required=False, allow_null=True)
    peak_tflops_bf16 = serializers.FloatField(required=False, allow_null=True)
    peak_tflops_fp8 = serializers.FloatField(required=False, allow_null=True)
    intra_node_interconnect = serializers.CharField(max_length=200, required=False, default="")
    intra_node_bandwidth_gbs = serializers.FloatField(required=False, default=0)
    inter_node_bandwidth_gbps = serializers.FloatField(required=False, default=0)
    devices_per_node = serializers.IntegerField(min_value=1, max_value=10_000, default=8)
    tdp_w = serializers.FloatField(required=False, default=0)
    source = serializers.CharField(  # type: ignore[assignment]
        required=False, default="", allow_blank=True
    )
    notes = serializers.CharField(required=False, default="", allow_blank=True)


class AcceleratorUpdateInput(AcceleratorInput):
    catalog_id = None  # type: ignore[assignment]  # the id of a SKU never changes


class ProviderOutput(serializers.ModelSerializer):
    class Meta:
        model = Provider
        fields = ["slug", "name", "kind", "website", "notes"]


class ProviderInput(StorableInput):
    storage_model = Provider

    slug = serializers.SlugField(max_length=64)
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=Provider.Kind.choices)
    website = serializers.URLField(required=False, default="", allow_blank=True)
    notes = serializers.CharField(required=False, default="", allow_blank=True)


# --- Price books and entries ----------------------------------------------------------------


class PriceBookOutput(serializers.ModelSerializer):
    entry_count = serializers.SerializerMethodField()

    class Meta:
        model = PriceBook
        fields = [
            "id",
            "organisation",
            "name",
            "description",
            "currency",
            "source",
            "fetched_at",
            "dates_note",
            "status",
            "published_at",
            "copied_from",
            "entry_count",
            "created_at",
            "updated_at",
        ]

    def get_entry_count(self, book: PriceBook) -> int:
        count = getattr(book, "entry_count", None)
        return book.entries.count() if count is None else count


def _organisation() -> serializers.PrimaryKeyRelatedField:
    """The organisation a new record belongs to; left out, the one the user is pricing admin
    of (:func:`pricing.access.write_organisation` checks it)."""
    return serializers.PrimaryKeyRelatedField(
        queryset=Organisation.objects.all(), required=False, allow_null=True
    )


class VisibleBookField(serializers.PrimaryKeyRelatedField):
    """A price book the requesting user sees: any other id is as unknown as a missing one."""

    def __init__(self, **kwargs: Any) -> None:
        # Only the schema reads this queryset (for the id's type); lookups use get_queryset.
        kwargs["queryset"] = PriceBook.objects.none()
        super().__init__(**kwargs)

    def get_queryset(self) -> Any:
        return visible(
            PriceBook.objects.all(), self.context["request"].user, field="organisation", public=True
        )


class PriceBookInput(StorableInput):
    storage_model = PriceBook

    organisation = _organisation()
    name = serializers.CharField(max_length=200)
    currency = serializers.CharField(max_length=3)
    source = serializers.CharField()  # type: ignore[assignment]
    fetched_at = serializers.DateTimeField()
    description = serializers.CharField(required=False, default="", allow_blank=True)
    dates_note = serializers.CharField(required=False, default="", allow_blank=True)


class PriceBookCopyInput(StorableInput):
    storage_model = PriceBook

    name = serializers.CharField(max_length=200, required=False)
    organisation = _organisation()


class PriceEntryOutput(serializers.ModelSerializer):
    book_name = serializers.CharField(source="book.name", read_only=True)
    book_status = serializers.CharField(source="book.status", read_only=True)
    currency = serializers.CharField(source="book.currency", read_only=True)
    provider = serializers.CharField(source="provider.slug", read_only=True)
    provider_name = serializers.CharField(source="provider.name", read_only=True)
    accelerator = serializers.CharField(source="accelerator.catalog_id", read_only=True)

    class Meta:
        model = PriceEntry
        fields = [
            "id",
            "book",
            "book_name",
            "book_status",
            "provider",
            "provider_name",
            "region",
            "accelerator",
            "pricing_type",
            "price_per_accelerator_hour",
            "currency",
            "instance_type",
            "accelerators_per_instance",
            "price_per_instance_hour",
            "minimum_count",
            "minimum_term_months",
            "observed_on",
            "source",
            "data_flag",
        ]


class PriceEntryUpdateInput(StorableInput):
    storage_model = PriceEntry

    provider = serializers.SlugRelatedField(slug_field="slug", queryset=Provider.objects.all())
    region = serializers.CharField(max_length=64)
    accelerator = serializers.SlugRelatedField(
        slug_field="catalog_id", queryset=Accelerator.objects.all()
    )
    pricing_type = serializers.ChoiceField(choices=PricingType.choices)
    price_per_accelerator_hour = _price(required=False, allow_null=True)
    instance_type = serializers.CharField(max_length=100, required=False, allow_blank=True)
    accelerators_per_instance = serializers.IntegerField(
        required=False, allow_null=True, max_value=32767
    )
    price_per_instance_hour = _price(required=False, allow_null=True)
    minimum_count = serializers.IntegerField(required=False, allow_null=True)
    minimum_term_months = serializers.IntegerField(required=False, allow_null=True, max_value=32767)
    observed_on = serializers.DateField(required=False, allow_null=True)
    source = serializers.CharField(required=False, allow_blank=True)  # type: ignore[assignment]
    data_flag = serializers.CharField(required=False, allow_blank=True)


class PriceEntryInput(PriceEntryUpdateInput):
    book = VisibleBookField()


# --- Quotes ---------------------------------------------------------------------------------


class QuoteOutput(serializers.ModelSerializer):
    provider = serializers.CharField(source="provider.slug", read_only=True, allow_null=True)
    accelerator = serializers.CharField(source="accelerator.catalog_id", read_only=True)
    validity_today = serializers.SerializerMethodField(
        help_text="'valid', 'expired' or 'not_yet_valid' on today's date"
    )

    class Meta:
        model = VendorQuote
        fields = [
            "id",
            "organisation",
            "vendor",
            "reference",
            "provider",
            "accelerator",
            "accelerator_count",
            "price_basis",
            "price_per_accelerator_hour",
            "total_price",
            "term_months",
            "currency",
            "valid_from",
            "valid_until",
            "validity_today",
            "terms",
            "is_example",
        ]

    def get_validity_today(self, quote: VendorQuote) -> str:
        return quote.validity_on(timezone.localdate())


class QuoteInput(StorableInput):
    storage_model = VendorQuote

    organisation = _organisation()
    vendor = serializers.CharField(max_length=200)
    reference = serializers.CharField(max_length=100, required=False, allow_blank=True)
    provider = serializers.SlugRelatedField(
        slug_field="slug", queryset=Provider.objects.all(), required=False, allow_null=True
    )
    accelerator = serializers.SlugRelatedField(
        slug_field="catalog_id", queryset=Accelerator.objects.all()
    )
    accelerator_count = serializers.IntegerField()
    price_per_accelerator_hour = _price(required=False, allow_null=True)
    total_price = serializers.DecimalField(
        max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, required=False, allow_null=True
    )
    term_months = serializers.IntegerField(required=False, allow_null=True, max_value=32767)
    currency = serializers.CharField(max_length=3)
    valid_from = serializers.DateField()
    valid_until = serializers.DateField()
    terms = serializers.CharField(required=False, allow_blank=True)
    is_example = serializers.BooleanField(
        required=False, help_text="Demo data, not a real offer: budgets on it are warned"
    )


# --- On-prem --------------------------------------------------------------------------------


class OnPremInput(StorableInput):
    """The inputs of the cost model (see ``pricing.tco.OnPremInputs`` for units)."""

    server_price = serializers.DecimalField(max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES)
    gpus_per_server = serializers.IntegerField()
    network_share_percent = serializers.DecimalField(max_digits=7, decimal_places=2)
    depreciation_years = serializers.IntegerField()
    cost_of_capital_percent = serializers.DecimalField(max_digits=7, decimal_places=2)
    power_per_gpu_w = serializers.DecimalField(max_digits=8, decimal_places=1)
    server_power_overhead = serializers.DecimalField(max_digits=6, decimal_places=3)
    average_load_percent = serializers.DecimalField(max_digits=7, decimal_places=2)
    pue = serializers.DecimalField(max_digits=5, decimal_places=3)
    electricity_price_per_kwh = serializers.DecimalField(max_digits=10, decimal_places=5)
    colocation_price_per_kw_month = serializers.DecimalField(max_digits=12, decimal_places=2)
    operations_share_percent = serializers.DecimalField(max_digits=7, decimal_places=2)
    utilisation_percent = serializers.DecimalField(max_digits=7, decimal_places=2)
    currency = serializers.CharField(max_length=3, default="USD")


class OnPremProfileInput(OnPremInput):
    storage_model = OnPremProfile

    organisation = _organisation()
    name = serializers.CharField(max_length=200)
    accelerator = serializers.SlugRelatedField(
        slug_field="catalog_id",
        queryset=Accelerator.objects.all(),
        required=False,
        allow_null=True,
    )
    source = serializers.CharField(required=False, allow_blank=True)  # type: ignore[assignment]
    grid_gco2e_per_kwh = serializers.DecimalField(
        max_digits=7,
        decimal_places=1,
        required=False,
        allow_null=True,
        help_text="Carbon intensity of the cluster's electricity [gCO2e/kWh], 0 to 2000; optional",
    )


def onprem_cost_data(cost: OnPremCost, currency: str) -> dict[str, Any]:
    """What :class:`OnPremCostOutput` renders: the cost's figures and their currency."""
    return {"currency": currency, **dataclasses.asdict(cost)}


def _money(source: str | None = None, places: int = 4) -> serializers.DecimalField:
    """A read-only figure rounded for display to ``places`` decimals."""
    return serializers.DecimalField(
        max_digits=30, decimal_places=places, read_only=True, source=source
    )


class OnPremBreakdownPerHour(serializers.Serializer):
    capital = _money("capital_per_gpu_hour")
    power = _money("power_per_gpu_hour")
    colocation = _money("colocation_per_gpu_hour")
    operations = _money("operations_per_gpu_hour")


class OnPremBreakdownPerYear(serializers.Serializer):
    capital = _money("capital_per_gpu_year", 2)
    power = _money("power_per_gpu_year", 2)
    colocation = _money("colocation_per_gpu_year", 2)
    operations = _money("operations_per_gpu_year", 2)
    total = _money("total_per_gpu_year", 2)


class OnPremCostOutput(serializers.Serializer):
    """A price per GPU-hour and its breakdown (money rounded for display: 4 places per hour,
    2 per year)."""

    currency = serializers.CharField(read_only=True)
    price_per_gpu_hour = _money()
    per_gpu_hour = OnPremBreakdownPerHour(source="*", read_only=True)
    per_gpu_year = OnPremBreakdownPerYear(source="*", read_only=True)
    capital_per_gpu = _money(places=2)
    capital_recovery_factor = _money(places=6)
    paid_hours_per_year = _money(places=1)


class OnPremProfileOutput(serializers.ModelSerializer):
    accelerator = serializers.CharField(
        source="accelerator.catalog_id", read_only=True, allow_null=True
    )
    cost = serializers.SerializerMethodField()

    class Meta:
        model = OnPremProfile
        fields = [
            "id",
            "organisation",
            "name",
            "accelerator",
            "currency",
            "server_price",
            "gpus_per_server",
            "network_share_percent",
            "depreciation_years",
            "cost_of_capital_percent",
            "power_per_gpu_w",
            "server_power_overhead",
            "average_load_percent",
            "pue",
            "electricity_price_per_kwh",
            "colocation_price_per_kw_month",
            "operations_share_percent",
            "utilisation_percent",
            "grid_gco2e_per_kwh",
            "source",
            "cost",
        ]

    @extend_schema_field(OnPremCostOutput)
    def get_cost(self, profile: OnPremProfile) -> dict[str, Any]:
        cost = onprem_profile_cost(profile=profile)
        return dict(OnPremCostOutput(onprem_cost_data(cost, profile.currency)).data)


# --- Exchange rates -------------------------------------------------------------------------


class ExchangeRateOutput(serializers.ModelSerializer):
    class Meta:
        model = ExchangeRate
        fields = ["id", "base_currency", "quote_currency", "rate", "rate_date", "source"]


class ExchangeRateInput(StorableInput):
    storage_model = ExchangeRate

    base_currency = serializers.CharField(max_length=3)
    quote_currency = serializers.CharField(max_length=3)
    rate = _price()
    rate_date = serializers.DateField()
    source = serializers.CharField()  # type: ignore[assignment]


class ConversionQuery(StorableInput):
    amount = serializers.DecimalField(max_digits=24, decimal_places=10)
    from_currency = serializers.CharField(max_length=3)
    to_currency = serializers.CharField(max_length=3)
    on = serializers.DateField(required=False, help_text="Default: today")


class ConvertedAmountOutput(serializers.Serializer):
    amount = _money(places=10)
    currency = serializers.CharField(read_only=True)
    rate = _money(places=10)
    rate_date = serializers.DateField(read_only=True)
    rate_source = serializers.CharField(read_only=True)
    original_amount = _money(places=10)
    original_currency = serializers.CharField(read_only=True)
