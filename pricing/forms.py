from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from lib.actors import Actor
from organisations.models import Organisation
from pricing.access import UNSET, pricing_admin_organisations, visible
from pricing.errors import PricingError
from pricing.models import OnPremProfile, PriceBook, VendorQuote
from pricing.services.onprem import GRID_FIELD, PROFILE_FIELDS
from pricing.services.quotes import QUOTE_FIELDS, quote_values_check

MAX_UPLOAD_BYTES = 5 * 1024 * 1024
#: When prices were fetched, written and read as ISO whatever the locale (``03/04/2026`` is
#: April in one locale and March in another); a bare date means midnight.
FETCHED_AT_FORMAT = "%Y-%m-%d %H:%M"
FETCHED_AT_INPUT_FORMATS = (FETCHED_AT_FORMAT, "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


def service_errors_as_form_errors(form: forms.BaseForm, check: Callable[[], Any]) -> None:
    """Run a service check; show a ``PricingError`` on its field, or on the form."""
    try:
        check()
    except PricingError as error:
        field = error.field if error.field in form.fields else None
        form.add_error(field, ValidationError(error.message))


def _organisation_field() -> forms.ModelChoiceField:
    return forms.ModelChoiceField(
        queryset=Organisation.objects.none(),  # the user's, set by organisation_field_limit
        required=False,
        empty_label="- the one I am pricing admin of -",
        help_text="Whose prices these are: only its members see them.",
    )


def organisation_field_limit(form: forms.BaseForm, user: Actor) -> None:
    """Offer the organisations ``user`` is pricing admin of; no choice when there is at
    most one (the write then takes that one, see ``pricing.access``)."""
    field = form.fields["organisation"]
    assert isinstance(field, forms.ModelChoiceField)
    field.queryset = pricing_admin_organisations(user)
    if field.queryset.count() < 2:
        del form.fields["organisation"]


class CsvUploadForm(forms.Form):
    KINDS = [("price-book", "Price-book entries"), ("quotes", "Vendor quotes")]

    kind = forms.ChoiceField(choices=KINDS, widget=forms.RadioSelect, initial="price-book")
    file = forms.FileField(help_text="UTF-8 CSV with a header line; at most 5 MB.")
    book = forms.ModelChoiceField(
        queryset=PriceBook.objects.filter(status=PriceBook.Status.DRAFT),
        required=False,
        empty_label="- a new draft book -",
        help_text="Import into this draft, or leave empty and describe a new draft below.",
    )
    name = forms.CharField(max_length=200, required=False, label="New book name")
    currency = forms.CharField(max_length=3, initial="USD", required=False)
    source = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    fetched_at = forms.DateTimeField(
        required=False,
        label="Fetched at",
        help_text="When the prices were collected: yyyy-mm-dd hh:mm.",
        input_formats=FETCHED_AT_INPUT_FORMATS,
        widget=forms.DateTimeInput(
            format=FETCHED_AT_FORMAT, attrs={"placeholder": "yyyy-mm-dd hh:mm"}
        ),
    )
    organisation = _organisation_field()

    def __init__(self, *args: Any, user: Actor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        organisation_field_limit(self, user)
        book = self.fields["book"]
        assert isinstance(book, forms.ModelChoiceField)
        drafts = PriceBook.objects.filter(status=PriceBook.Status.DRAFT)
        # Drafts of the user's organisations; public drafts for staff (the import checks).
        book.queryset = visible(drafts, user, field="organisation", public=True)

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("The file is larger than 5 MB.")
        return upload

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("kind") == "price-book" and not cleaned.get("book"):
            for name in ("name", "currency", "source", "fetched_at"):
                if not cleaned.get(name) and name not in self.errors:
                    self.add_error(name, "Needed for a new draft book.")
        return cleaned

    def import_target(self) -> dict[str, Any]:
        """The ``book`` or ``new_book`` argument of ``price_book_csv_import``."""
        if self.cleaned_data["book"]:
            return {"book": self.cleaned_data["book"]}
        keys = ("name", "currency", "source", "fetched_at")
        return {"new_book": {key: self.cleaned_data[key] for key in keys}}

    def requested_organisation(self) -> Any:
        """The organisation picked, or ``pricing.access.UNSET`` when none was."""
        return self.cleaned_data.get("organisation") or UNSET


#: The save form's fields typed on the form itself; the others are the calculator's figures.
_TYPED_HERE = ("name", "source", GRID_FIELD)


class OnPremProfileSaveForm(forms.ModelForm):
    """The calculator's figures saved as a new profile under a name.

    The figures travel as hidden inputs copied from the calculator; the model's fields parse
    them (digits and decimal places as the admin does) and ``onprem_profile_create`` applies
    the rules.
    """

    class Meta:
        model = OnPremProfile
        fields = list(PROFILE_FIELDS)
        widgets = {
            name: forms.HiddenInput for name in PROFILE_FIELDS if name not in _TYPED_HERE
        } | {
            "source": forms.Textarea(attrs={"rows": 2}),
            GRID_FIELD: forms.NumberInput(attrs={"step": "0.1", "min": "0", "max": "2000"}),
        }
        labels = {"name": "Profile name", GRID_FIELD: "Grid carbon intensity (gCO2e/kWh)"}
        help_texts = {
            "source": "Where the figures come from: a quote, an invoice, an estimate.",
            GRID_FIELD: (
                "Optional, 0 to 2000: the annual average carbon intensity of the cluster's "
                "electricity (its grid's, or the supplier's figure)."
            ),
        }

    organisation = _organisation_field()

    def __init__(self, *args: Any, user: Actor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        organisation_field_limit(self, user)

    def requested_organisation(self) -> Any:
        """The organisation picked, or ``pricing.access.UNSET`` when none was."""
        return self.cleaned_data.pop("organisation", None) or UNSET


#: The quote's fields a form edits: all but the price basis, which the service derives.
QUOTE_FORM_FIELDS = [name for name in QUOTE_FIELDS if name != "price_basis"]


class QuoteChecks(forms.ModelForm):
    """A vendor quote's form, checked by the service's own rules (``quote_values_check``, as
    the API and the CSV import are): the admin's form and the quote page's share it."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = {name: cleaned.get(name) for name in QUOTE_FIELDS}
        if values.get("total_price") is not None and (
            "price_per_accelerator_hour" not in self.changed_data
        ):
            values["price_per_accelerator_hour"] = None  # derived from the total again
        service_errors_as_form_errors(self, lambda: quote_values_check(values))
        if not self.errors:
            cleaned["price_per_accelerator_hour"] = values["price_per_accelerator_hour"]
        return cleaned


class QuoteForm(QuoteChecks):
    """A quote as a pricing admin enters it on the quotes page: a price per accelerator-hour,
    or a total for a term (a commitment), with its validity."""

    class Meta:
        model = VendorQuote
        fields = QUOTE_FORM_FIELDS
        widgets = {
            "valid_from": forms.DateInput(attrs={"type": "date"}),
            "valid_until": forms.DateInput(attrs={"type": "date"}),
            "terms": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {
            "accelerator_count": "Accelerators",
            "price_per_accelerator_hour": "Price per accelerator-hour",
            "total_price": "Total for the term (the commitment)",
            "term_months": "Term (months)",
            "is_example": "An example, not a real offer",
        }
        help_texts = {
            "price_per_accelerator_hour": (
                "Leave empty when you give a total for the term: it is derived as "
                "total / (accelerators x months x 730 h)."
            ),
            "total_price": (
                "What the vendor bills for the whole term, owed however little of it is "
                "used; needs the term."
            ),
            "is_example": "Budgets on an example quote are warned.",
        }

    organisation = _organisation_field()

    def __init__(self, *args: Any, user: Actor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        price = self.fields["price_per_accelerator_hour"]
        price.required = False
        if self.instance.pk is not None:
            del self.fields["organisation"]  # a quote never moves to another organisation
        else:
            organisation_field_limit(self, user)

    def requested_organisation(self) -> Any:
        """The organisation picked, or ``pricing.access.UNSET`` when none was."""
        return self.cleaned_data.pop("organisation", None) or UNSET

    def quote_values(self) -> dict[str, Any]:
        """The values for ``quote_create``."""
        return {name: self.cleaned_data.get(name) for name in QUOTE_FIELDS}

    def quote_changes(self) -> dict[str, Any]:
        """The changed values for ``quote_update`` (which derives the price from a total)."""
        changed = [name for name in self.changed_data if name in QUOTE_FIELDS]
        return {name: self.cleaned_data[name] for name in changed}
