"""Django admin for the pricing models.

Published price books and their entries are read-only here (no change, delete or add
permission), and every admin form runs the services' checks, so the admin cannot write what
the API refuses. Writes of books, entries, usage prices, quotes and profiles go through the
services.

Books, entries, usage prices (storage, egress), quotes and profiles are listed for the
organisations the user belongs to (public books too; a superuser sees all), and change only
for whom :mod:`pricing.access` says may change them (a usage price: whoever may change its
book).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from lib.updates import audit_value
from pricing import access, services
from pricing.errors import PricingError
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceAuditEvent,
    PriceBook,
    PriceEntry,
    Provider,
    UsagePrice,
    VendorQuote,
)
from pricing.services.audit import price_audit_fields, price_audit_record
from pricing.services.books import (
    BOOK_FIELDS,
    ENTRY_FIELDS,
    price_book_values_check,
    price_entry_values_check,
)
from pricing.services.catalog import (
    SPEC_FIELDS,
    accelerator_custom_id_check,
    accelerator_specs_check,
)
from pricing.services.onprem import PROFILE_FIELDS, onprem_inputs_from
from pricing.services.quotes import QUOTE_FIELDS, quote_values_check
from pricing.services.rates import exchange_rate_values_check
from pricing.services.usage import (
    USAGE_FIELDS,
    usage_price_create,
    usage_price_delete,
    usage_price_update,
    usage_price_values_check,
)
from pricing.tco import onprem_inputs_check


def _as_form_errors(form: forms.ModelForm, check: Callable[[], Any]) -> None:
    """Run a service check; show a ``PricingError`` on its field, or on the form."""
    try:
        check()
    except PricingError as error:
        field = error.field if error.field in form.fields else None
        form.add_error(field, ValidationError(error.message))


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


# --- Organisations' records -----------------------------------------------------------------


class OrganisationScopedAdmin(admin.ModelAdmin):
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


# --- Price books and entries ----------------------------------------------------------------


class PriceBookForm(forms.ModelForm):
    class Meta:
        model = PriceBook
        fields = ["organisation", *BOOK_FIELDS]
        help_texts = {"organisation": "Empty: a public book, which every organisation sees."}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.instance.pk:
            _as_form_errors(self, lambda: services.price_book_assert_draft(self._stored()))
        values = {name: cleaned[name] for name in BOOK_FIELDS if cleaned.get(name) is not None}
        _as_form_errors(self, lambda: price_book_values_check(values))
        return cleaned

    def _stored(self) -> PriceBook:
        return PriceBook.objects.get(pk=self.instance.pk)


class PriceEntryInlineForm(forms.ModelForm):
    class Meta:
        model = PriceEntry
        fields = list(ENTRY_FIELDS)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.errors and not cleaned.get("DELETE"):
            _entry_clean(self, cleaned)
        return cleaned


class PriceEntryInline(admin.TabularInline):
    model = PriceEntry
    form = PriceEntryInlineForm
    extra = 0
    fields = [
        "provider",
        "region",
        "accelerator",
        "pricing_type",
        "price_per_accelerator_hour",
        "instance_type",
        "minimum_term_months",
        "data_flag",
    ]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not _book_is_published(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not _book_is_published(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not _book_is_published(obj) and super().has_delete_permission(request, obj)


@admin.register(PriceBook)
class PriceBookAdmin(OrganisationScopedAdmin):
    public_allowed = True
    form = PriceBookForm
    inlines = [PriceEntryInline]
    list_display = ["name", "organisation", "status", "currency", "fetched_at", "published_at"]
    list_filter = ["status", "currency"]
    list_select_related = ["organisation"]
    readonly_fields = ["status", "published_at", "published_by", "copied_from", "created_by"]
    actions = ["publish_selected", "copy_selected"]

    def has_change_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _book_is_published(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PriceBook | None = None) -> bool:
        return not _book_is_published(obj) and super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # A published book is listed as protected, so the bulk action shows the confirmation
        # page explaining why instead of a bare 403 caused by its read-only entries.
        deletable, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        published = [
            f"{book} (published: copy it into a new draft instead)"
            for book in objs
            if book.status == PriceBook.Status.PUBLISHED
        ]
        if published:
            return deletable, model_count, set(), [*protected, *published]
        return deletable, model_count, perms_needed, protected

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PriceBook]) -> None:
        for book in queryset:
            try:
                services.price_book_delete(book=book, user=request.user)
            except PricingError as error:
                messages.error(request, error.message)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.price_book_update(book=obj, user=request.user, **_changes(form, BOOK_FIELDS))
            return
        values = {name: form.cleaned_data[name] for name in BOOK_FIELDS}
        organisation = self.organisation_of(request, form, public_allowed=True)
        created = services.price_book_create(user=request.user, organisation=organisation, **values)
        obj.pk = created.pk
        obj._state.adding = False

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        services.price_book_assert_draft(PriceBook.objects.get(pk=form.instance.pk))
        deleted = [
            (each.instance, price_audit_fields(each.instance, ENTRY_FIELDS))
            for each in formset.deleted_forms
            if each.instance.pk
        ]
        edited = {
            each.instance.pk: {
                name: [audit_value(each.initial.get(name)), audit_value(each.cleaned_data[name])]
                for name in each.changed_data
                if name in ENTRY_FIELDS
            }
            for each in formset.forms
            if each.instance.pk and each.has_changed() and each not in formset.deleted_forms
        }
        for entry, values in deleted:  # the trail names the entry before the row goes
            price_audit_record(actor=request.user, action="deleted", subject=entry, changes=values)
        super().save_formset(request, form, formset, change)
        for entry in formset.new_objects:
            price_audit_record(
                actor=request.user,
                action="created",
                subject=entry,
                changes=price_audit_fields(entry, ENTRY_FIELDS),
            )
        for entry, _fields in formset.changed_objects:
            price_audit_record(
                actor=request.user, action="edited", subject=entry, changes=edited.get(entry.pk)
            )

    @admin.action(description="Publish the selected drafts")
    def publish_selected(self, request: HttpRequest, queryset: QuerySet[PriceBook]) -> None:
        for book in queryset:
            try:
                services.price_book_publish(book=book, user=request.user)
                messages.success(request, f"Published '{book.name}'.")
            except PricingError as error:
                messages.error(request, error.message)

    @admin.action(description="Copy the selected books to new drafts")
    def copy_selected(self, request: HttpRequest, queryset: QuerySet[PriceBook]) -> None:
        for book in queryset:
            try:
                organisation = access.copy_organisation(request.user, book)
                copy = services.price_book_copy(
                    book=book, user=request.user, organisation=organisation
                )
            except PricingError as error:
                messages.error(request, f"'{book.name}': {error.message}")
            else:
                messages.success(request, f"Copied '{book.name}' to draft '{copy.name}'.")


class DraftBookForm(forms.ModelForm):
    """A form of a record that belongs to a price book: only draft books are choices."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "book" in self.fields:
            field = self.fields["book"]
            assert isinstance(field, forms.ModelChoiceField)
            # Narrows the admin's choice (the user's drafts), never widens it.
            books = field.queryset if field.queryset is not None else PriceBook.objects.all()
            field.queryset = books.filter(status=PriceBook.Status.DRAFT)


class PriceEntryForm(DraftBookForm):
    class Meta:
        model = PriceEntry
        fields = ["book", *ENTRY_FIELDS]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        book = cleaned.get("book")
        if book is not None:
            _as_form_errors(self, lambda: services.price_book_assert_draft(book))
        if not self.errors:
            _entry_clean(self, cleaned)
        return cleaned


@admin.register(PriceEntry)
class PriceEntryAdmin(OrganisationScopedAdmin):
    organisation_field = "book__organisation"
    public_allowed = True
    form = PriceEntryForm
    list_display = [
        "accelerator",
        "provider",
        "region",
        "pricing_type",
        "price_per_accelerator_hour",
        "book",
        "data_flag",
    ]
    # Only the books of the listed entries: another organisation's book name is no filter.
    list_filter = [
        ("book", admin.RelatedOnlyFieldListFilter),
        "pricing_type",
        "provider",
        "accelerator",
    ]
    list_select_related = ["accelerator", "provider", "book"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "book":  # the drafts the user may add entries to
            drafts = PriceBook.objects.filter(status=PriceBook.Status.DRAFT)
            mine = drafts.filter(organisation__in=access.pricing_admin_organisations(request.user))
            public = drafts.filter(organisation__isnull=True)
            kwargs["queryset"] = mine | public if access.is_staff(request.user) else mine
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request: HttpRequest, obj: PriceEntry | None = None) -> bool:
        published = obj is not None and _book_is_published(obj.book)
        return not published and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PriceEntry | None = None) -> bool:
        published = obj is not None and _book_is_published(obj.book)
        return not published and super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PriceEntry]) -> None:
        for entry in queryset:
            try:
                services.price_entry_delete(entry=entry, user=request.user)
            except PricingError as error:
                messages.error(request, error.message)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            services.price_entry_update(
                entry=obj, user=request.user, **_changes(form, ENTRY_FIELDS)
            )
            return
        values = {name: form.cleaned_data[name] for name in ENTRY_FIELDS}
        created = services.price_entry_create(
            book=form.cleaned_data["book"], user=request.user, **values
        )
        obj.pk = created.pk
        obj._state.adding = False


class UsagePriceForm(DraftBookForm):
    class Meta:
        model = UsagePrice
        fields = ["book", *USAGE_FIELDS]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        book = cleaned.get("book") or (self.instance.book if self.instance.pk else None)
        if book is not None:
            _as_form_errors(self, lambda: services.price_book_assert_draft(book))
        if not self.errors:
            values = {name: cleaned.get(name) for name in USAGE_FIELDS}
            _as_form_errors(self, lambda: usage_price_values_check(values))
            cleaned.update({name: value for name, value in values.items() if name in self.fields})
        return cleaned


@admin.register(UsagePrice)
class UsagePriceAdmin(OrganisationScopedAdmin):
    """Storage (per GB-month) and egress (per GB) prices, scoped by their book as entries
    are; who may change one is who may change its book."""

    organisation_field = "book__organisation"
    public_allowed = True
    form = UsagePriceForm
    list_display = ["kind", "provider", "region", "tier", "price", "book", "observed_on"]
    # Only the books of the listed prices: another organisation's book name is no filter.
    list_filter = [("book", admin.RelatedOnlyFieldListFilter), "kind", "provider"]
    list_select_related = ["provider", "book"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "book":  # the drafts the user may add prices to
            drafts = PriceBook.objects.filter(status=PriceBook.Status.DRAFT)
            mine = drafts.filter(organisation__in=access.pricing_admin_organisations(request.user))
            public = drafts.filter(organisation__isnull=True)
            kwargs["queryset"] = mine | public if access.is_staff(request.user) else mine
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "book"] if obj is not None else fields  # a price never changes book

    @staticmethod
    def _may_change(request: HttpRequest, obj: UsagePrice | None) -> bool:
        if obj is None:
            return True
        return access.may_change(request.user, obj.book) and not _book_is_published(obj.book)

    def has_change_permission(self, request: HttpRequest, obj: UsagePrice | None = None) -> bool:
        return self._may_change(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: UsagePrice | None = None) -> bool:
        return self._may_change(request, obj) and super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        usage_price_delete(usage=obj, user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[UsagePrice]) -> None:
        for usage in queryset.select_related("book"):
            if not self._may_change(request, usage):
                messages.error(request, f"'{usage}': you may not change its book.")
                continue
            try:
                usage_price_delete(usage=usage, user=request.user)
            except PricingError as error:
                messages.error(request, error.message)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            usage_price_update(usage=obj, user=request.user, **_changes(form, USAGE_FIELDS))
            return
        values = {name: form.cleaned_data[name] for name in USAGE_FIELDS}
        created = usage_price_create(book=form.cleaned_data["book"], user=request.user, **values)
        obj.pk = created.pk
        obj._state.adding = False


# --- Quotes, on-prem profiles, exchange rates -----------------------------------------------


class VendorQuoteForm(forms.ModelForm):
    class Meta:
        model = VendorQuote
        fields = ["organisation", *(name for name in QUOTE_FIELDS if name != "price_basis")]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = {name: cleaned.get(name) for name in QUOTE_FIELDS}
        _as_form_errors(self, lambda: quote_values_check(values))
        return cleaned


@admin.register(VendorQuote)
class VendorQuoteAdmin(OrganisationScopedAdmin):
    form = VendorQuoteForm
    list_display = [
        "vendor",
        "organisation",
        "accelerator",
        "accelerator_count",
        "price_per_accelerator_hour",
        "currency",
        "valid_from",
        "valid_until",
        "is_example",
    ]
    list_filter = ["is_example", "currency"]
    list_select_related = ["accelerator", "organisation"]

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
        "currency",
        "server_price",
        "utilisation_percent",
    ]
    list_select_related = ["accelerator", "organisation"]

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
class ExchangeRateAdmin(admin.ModelAdmin):
    """Rates are added, never edited: converted figures name the rate they used."""

    form = ExchangeRateForm
    list_display = ["base_currency", "quote_currency", "rate", "rate_date", "source"]
    list_filter = ["base_currency", "quote_currency"]

    def has_change_permission(self, request: HttpRequest, obj: ExchangeRate | None = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        created = services.exchange_rate_create(**form.cleaned_data)
        obj.pk = created.pk
        obj._state.adding = False
