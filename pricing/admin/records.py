"""Admin of organisations' records: vendor quotes, on-prem profiles, the price audit
trail, and exchange rates."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from lib.money import decimal_trimmed
from pricing import services
from pricing.admin.common import (
    OrganisationScopedAdmin,
    TrimmedDecimals,
    _as_form_errors,
    _changes,
    amount_text,
    per_hour_text,
)
from pricing.forms import QUOTE_FORM_FIELDS, QuoteChecks
from pricing.models import (
    ExchangeRate,
    OnPremProfile,
    PriceAuditEvent,
    VendorQuote,
)
from pricing.services.onprem import PROFILE_FIELDS, onprem_inputs_from
from pricing.services.quotes import QUOTE_FIELDS
from pricing.services.rates import exchange_rate_values_check
from pricing.tco import onprem_inputs_check

# --- Quotes, on-prem profiles, exchange rates -----------------------------------------------


class VendorQuoteForm(QuoteChecks):
    class Meta:
        model = VendorQuote
        fields = ["organisation", *QUOTE_FORM_FIELDS]


@admin.register(VendorQuote)
class VendorQuoteAdmin(OrganisationScopedAdmin):
    form = VendorQuoteForm
    list_display = [
        "vendor",
        "organisation",
        "accelerator",
        "accelerator_count",
        "price_per_hour",
        "commitment",
        "valid_from",
        "valid_until",
        "is_example",
    ]
    list_filter = ["is_example", "currency"]
    list_select_related = ["accelerator", "organisation"]

    @admin.display(description="Per accelerator-hour", ordering="price_per_accelerator_hour")
    def price_per_hour(self, quote: VendorQuote) -> str:
        return per_hour_text(quote.price_per_accelerator_hour, quote.currency)

    @admin.display(description="Commitment", ordering="total_price")
    def commitment(self, quote: VendorQuote) -> str:
        if quote.total_price is None:
            return "-"
        return f"{amount_text(quote.total_price, quote.currency)} for {quote.term_months} months"

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.quote_update(quote=obj, user=request.user, **_changes(form, QUOTE_FIELDS))
            return
        values = {name: form.cleaned_data.get(name) for name in QUOTE_FIELDS}
        organisation = self.organisation_of(request, form, public_allowed=False)
        created = services.quote_create(user=request.user, organisation=organisation, **values)
        obj.pk = created.pk
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.quote_delete(quote=obj, user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[VendorQuote]) -> None:
        for quote in queryset:
            services.quote_delete(quote=quote, user=request.user)


class OnPremProfileForm(forms.ModelForm):
    class Meta:
        model = OnPremProfile
        fields = ["organisation", *PROFILE_FIELDS]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.errors:
            _as_form_errors(self, lambda: onprem_inputs_check(onprem_inputs_from(cleaned)))
        return cleaned


@admin.register(OnPremProfile)
class OnPremProfileAdmin(OrganisationScopedAdmin):
    form = OnPremProfileForm
    list_display = [
        "name",
        "organisation",
        "accelerator",
        "server_price_text",
        "utilisation_percent",
    ]
    list_select_related = ["accelerator", "organisation"]

    @admin.display(description="Server price", ordering="server_price")
    def server_price_text(self, profile: OnPremProfile) -> str:
        return amount_text(profile.server_price, profile.currency)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.onprem_profile_update(
                profile=obj, user=request.user, **_changes(form, PROFILE_FIELDS)
            )
            return
        values = {name: form.cleaned_data[name] for name in PROFILE_FIELDS}
        organisation = self.organisation_of(request, form, public_allowed=False)
        created = services.onprem_profile_create(
            user=request.user, organisation=organisation, **values
        )
        obj.pk = created.pk
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.onprem_profile_delete(profile=obj, user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[OnPremProfile]) -> None:
        for profile in queryset:
            services.onprem_profile_delete(profile=profile, user=request.user)


@admin.register(PriceAuditEvent)
class PriceAuditEventAdmin(OrganisationScopedAdmin):
    """The trail of price changes, read-only: each organisation sees its own (and the public
    books'); nobody adds, edits or deletes a row here."""

    public_allowed = True
    list_display = ["created_at", "actor", "action", "subject_label", "organisation"]
    list_filter = ["subject_type", "action"]
    list_select_related = ["actor", "organisation"]
    search_fields = ["subject_label", "comment"]
    readonly_fields = [
        "created_at", "organisation", "actor", "action", "subject_type", "subject_id",
        "subject_label", "changes", "comment",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ExchangeRateForm(forms.ModelForm):
    class Meta:
        model = ExchangeRate
        fields = ["base_currency", "quote_currency", "rate", "rate_date", "source"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.errors:
            _as_form_errors(self, lambda: exchange_rate_values_check(**cleaned))
        return cleaned


@admin.register(ExchangeRate)
class ExchangeRateAdmin(TrimmedDecimals, admin.ModelAdmin):
    """Rates are added, never edited: converted figures name the rate they used."""

    form = ExchangeRateForm
    list_display = ["base_currency", "quote_currency", "rate_text", "rate_date", "source"]
    list_filter = ["base_currency", "quote_currency"]

    @admin.display(description="Rate", ordering="rate")
    def rate_text(self, rate: ExchangeRate) -> str:
        return f"{decimal_trimmed(rate.rate)} {rate.quote_currency} per {rate.base_currency}"

    def has_change_permission(self, request: HttpRequest, obj: ExchangeRate | None = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        created = services.exchange_rate_create(**form.cleaned_data)
        obj.pk = created.pk
        obj._state.adding = False
