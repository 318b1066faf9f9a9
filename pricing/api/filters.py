from __future__ import annotations

from datetime import date

import django_filters
from django.db.models import QuerySet

from pricing.models import (
    Accelerator,
    ExchangeRate,
    PriceBook,
    PriceEntry,
    PricingType,
    Provider,
    VendorQuote,
)
from pricing.selectors import quotes_selectable


class AcceleratorFilter(django_filters.FilterSet):
    vendor = django_filters.CharFilter(lookup_expr="iexact")
    family = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = Accelerator
        fields = ["vendor", "family", "is_custom"]


class ProviderFilter(django_filters.FilterSet):
    class Meta:
        model = Provider
        fields = ["kind"]


class PriceBookFilter(django_filters.FilterSet):
    currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = PriceBook
        fields = ["status", "currency"]


class PriceEntryFilter(django_filters.FilterSet):
    accelerator = django_filters.CharFilter(
        field_name="accelerator__catalog_id", lookup_expr="iexact", help_text="Catalog id"
    )
    provider = django_filters.CharFilter(
        field_name="provider__slug", lookup_expr="iexact", help_text="Provider slug"
    )
    provider_kind = django_filters.ChoiceFilter(
        field_name="provider__kind", choices=Provider.Kind.choices
    )
    region = django_filters.CharFilter(lookup_expr="iexact")
    pricing_type = django_filters.ChoiceFilter(choices=PricingType.choices)
    book_status = django_filters.ChoiceFilter(
        field_name="book__status", choices=PriceBook.Status.choices
    )
    currency = django_filters.CharFilter(field_name="book__currency", lookup_expr="iexact")
    flagged = django_filters.BooleanFilter(method="filter_flagged", help_text="Has a data flag")
    # A number, not a choice of every book: another organisation's book id is no error.
    book = django_filters.NumberFilter(field_name="book_id", help_text="Price book id")

    class Meta:
        model = PriceEntry
        fields = ["book"]

    def filter_flagged(
        self, queryset: QuerySet[PriceEntry], name: str, value: bool
    ) -> QuerySet[PriceEntry]:
        return queryset.exclude(data_flag="") if value else queryset.filter(data_flag="")


class QuoteFilter(django_filters.FilterSet):
    accelerator = django_filters.CharFilter(
        field_name="accelerator__catalog_id", lookup_expr="iexact"
    )
    vendor = django_filters.CharFilter(lookup_expr="icontains")
    selectable_on = django_filters.DateFilter(
        method="filter_selectable_on", help_text="Only quotes valid on this date"
    )

    class Meta:
        model = VendorQuote
        fields = ["currency", "is_example"]

    def filter_selectable_on(
        self, queryset: QuerySet[VendorQuote], name: str, value: date
    ) -> QuerySet[VendorQuote]:
        return quotes_selectable(on=value, quotes=queryset)


class ExchangeRateFilter(django_filters.FilterSet):
    base_currency = django_filters.CharFilter(lookup_expr="iexact")
    quote_currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = ExchangeRate
        fields = ["base_currency", "quote_currency"]
