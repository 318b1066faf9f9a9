"""Admin of price books, their entries and usage prices (storage, egress)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from lib.updates import audit_value
from pricing import access, services
from pricing.admin.common import (
    OrganisationScopedAdmin,
    TrimmedDecimals,
    _as_form_errors,
    _book_is_published,
    _changes,
    _entry_clean,
    per_hour_text,
    usage_price_text,
)
from pricing.errors import PricingError
from pricing.models import (
    PriceBook,
    PriceEntry,
    UsagePrice,
)
from pricing.services.audit import price_audit_fields, price_audit_record
from pricing.services.books import (
    BOOK_FIELDS,
    ENTRY_FIELDS,
    price_book_values_check,
)
from pricing.services.usage import (
    USAGE_FIELDS,
    usage_price_create,
    usage_price_delete,
    usage_price_update,
    usage_price_values_check,
)

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


class PriceEntryInline(TrimmedDecimals, admin.TabularInline):
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

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A published book's entries are read-only: show the price as money, not 10 decimals.
        fields = list(super().get_fields(request, obj))
        if not _book_is_published(obj):
            return fields
        price = "price_per_accelerator_hour"
        return ["price_per_hour" if name == price else name for name in fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "price_per_hour"] if _book_is_published(obj) else fields

    @admin.display(description="Per accelerator-hour")
    def price_per_hour(self, entry: PriceEntry) -> str:
        return per_hour_text(entry.price_per_accelerator_hour, entry.book.currency)

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
        "price_per_hour",
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

    @admin.display(description="Per accelerator-hour", ordering="price_per_accelerator_hour")
    def price_per_hour(self, entry: PriceEntry) -> str:
        return per_hour_text(entry.price_per_accelerator_hour, entry.book.currency)

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
    list_display = ["kind", "provider", "region", "tier", "price_text", "book", "observed_on"]
    # Only the books of the listed prices: another organisation's book name is no filter.
    list_filter = [("book", admin.RelatedOnlyFieldListFilter), "kind", "provider"]
    list_select_related = ["provider", "book"]

    @admin.display(description="Price", ordering="price")
    def price_text(self, usage: UsagePrice) -> str:
        return usage_price_text(usage.price, usage.book.currency, usage.unit)

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
