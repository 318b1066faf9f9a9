"""What every pricing admin shares: running the services' checks as form errors, and
listing and changing records by organisation (:class:`OrganisationScopedAdmin`)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from lib.money import decimal_trimmed, money_text, price_per_hour_text, unit_price_text
from pricing import access
from pricing.forms import service_errors_as_form_errors as _as_form_errors
from pricing.models import (
    PriceBook,
)
from pricing.services.books import (
    ENTRY_FIELDS,
    price_entry_values_check,
)


class TrimmedDecimalInput(forms.NumberInput):
    """A stored price as a person types it: ``2.10``, not ``2.1000000000``."""

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, Decimal):
            return decimal_trimmed(value)
        return super().format_value(value)


class TrimmedDecimals(admin.options.BaseModelAdmin):
    """Decimal inputs without the column's trailing zeros (prices keep 10 decimals)."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.DecimalField):
            kwargs["widget"] = TrimmedDecimalInput(attrs={"step": "any"})
        return super().formfield_for_dbfield(db_field, request, **kwargs)


def per_hour_text(amount: Decimal | None, currency: str) -> str:
    """A price per accelerator-hour as the admin lists it: ``2.10 USD/GPU-h``."""
    return "-" if amount is None else price_per_hour_text(amount, currency)


def amount_text(amount: Decimal | None, currency: str) -> str:
    """An amount as the admin lists it: ``4,709,376 USD``."""
    return "-" if amount is None else money_text(amount, currency)


def usage_price_text(amount: Decimal | None, currency: str, unit: str) -> str:
    """A storage or egress price as the admin lists it: ``0.023 USD/GB-month``."""
    return "-" if amount is None else unit_price_text(amount, currency, unit)


def _changes(form: forms.ModelForm, allowed: tuple[str, ...]) -> dict[str, Any]:
    return {name: form.cleaned_data[name] for name in form.changed_data if name in allowed}


def _entry_clean(form: forms.ModelForm, cleaned: dict[str, Any]) -> None:
    """Run the entry checks and keep what they fill in (a derived price, a reserved term)."""
    values = {name: cleaned.get(name) for name in ENTRY_FIELDS}
    _as_form_errors(form, lambda: price_entry_values_check(values))
    cleaned.update({name: value for name, value in values.items() if name in form.fields})


def _book_is_published(book: PriceBook | None) -> bool:
    if book is None or book.pk is None:
        return False
    return PriceBook.objects.filter(pk=book.pk, status=PriceBook.Status.PUBLISHED).exists()


# --- Organisations' records -----------------------------------------------------------------


class OrganisationScopedAdmin(TrimmedDecimals, admin.ModelAdmin):
    """Lists the records of the user's organisations (and public ones where
    ``public_allowed``); a record the user may not change is read-only; a new record's
    organisation is one the user is pricing admin of, and never changes afterwards."""

    organisation_field = "organisation"
    public_allowed = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        records = super().get_queryset(request)
        return access.visible(
            records, request.user, field=self.organisation_field, public=self.public_allowed
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = obj is None or access.may_change(request.user, obj)
        return allowed and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = obj is None or access.may_change(request.user, obj)
        return allowed and super().has_delete_permission(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and self.organisation_field == "organisation":
            fields.append("organisation")
        return fields

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "organisation":
            kwargs["queryset"] = access.pricing_admin_organisations(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @staticmethod
    def organisation_of(request: HttpRequest, form: Any, *, public_allowed: bool) -> Any:
        """The new record's organisation, checked as the API checks it."""
        requested = form.cleaned_data.get("organisation")
        if requested is None and not public_allowed:
            requested = access.UNSET
        return access.write_organisation(request.user, requested, public_allowed=public_allowed)
