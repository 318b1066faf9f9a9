"""Admin of the catalog: accelerators and providers."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from pricing import services
from pricing.admin.common import (
    _as_form_errors,
    _changes,
)
from pricing.models import (
    Accelerator,
    Provider,
)
from pricing.services.catalog import (
    SPEC_FIELDS,
    accelerator_custom_id_check,
    accelerator_specs_check,
)

# --- Accelerators and providers -------------------------------------------------------------


class AcceleratorForm(forms.ModelForm):
    class Meta:
        model = Accelerator
        fields = ["catalog_id", *SPEC_FIELDS]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.instance.pk and not self.instance.is_custom:
            raise ValidationError("Catalog SKUs change only in the estimator's catalog.")
        if not self.instance.pk and cleaned.get("catalog_id"):
            _as_form_errors(self, lambda: accelerator_custom_id_check(cleaned["catalog_id"]))
        specs = {name: cleaned[name] for name in SPEC_FIELDS if cleaned.get(name) is not None}
        _as_form_errors(self, lambda: accelerator_specs_check(specs))
        return cleaned


@admin.register(Accelerator)
class AcceleratorAdmin(admin.ModelAdmin):
    form = AcceleratorForm
    list_display = ["catalog_id", "name", "vendor", "memory_gib", "tdp_w", "is_custom"]
    list_filter = ["vendor", "is_custom"]
    search_fields = ["catalog_id", "name"]

    def has_change_permission(self, request: HttpRequest, obj: Accelerator | None = None) -> bool:
        if obj is not None and not obj.is_custom:
            return False  # catalog SKUs come from the estimator's catalog
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Accelerator | None = None) -> bool:
        if obj is not None and not obj.is_custom:
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.accelerator_custom_update(accelerator=obj, **_changes(form, SPEC_FIELDS))
            return
        values = {name: form.cleaned_data[name] for name in SPEC_FIELDS}
        created = services.accelerator_custom_create(
            user=request.user, catalog_id=form.cleaned_data["catalog_id"], **values
        )
        obj.pk, obj.is_custom = created.pk, True
        obj._state.adding = False


class ProviderForm(forms.ModelForm):
    class Meta:
        model = Provider
        fields = ["slug", "name", "kind", "website", "notes"]


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["name", "slug", "kind", "website"]
    list_filter = ["kind"]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.provider_update(provider=obj, **_changes(form, tuple(form.fields)))
            return
        created = services.provider_create(**form.cleaned_data)
        obj.pk = created.pk
        obj._state.adding = False
