"""Pages of the pricing app: read with selectors, write with services, render templates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lib.money import money_text, price_per_hour_text
from lib.text import nul_problem
from pricing import access, selectors, services
from pricing.api.serializers import OnPremCostOutput, onprem_cost_data
from pricing.errors import CsvImportError, PricingError, PricingNotAllowed
from pricing.forms import CsvUploadForm, OnPremProfileSaveForm, QuoteForm
from pricing.models import PRECISIONS, Accelerator, OnPremProfile, PriceBook, VendorQuote
from pricing.selectors import PriceRange

DISPLAY_CURRENCY = "USD"
#: Entries on one page of a price book.
ENTRIES_PER_PAGE = 100

View = Callable[..., HttpResponse]


def pricing_admin_required(view: View) -> View:
    """Signed-in pricing admins (of some organisation) and staff only: others get 403.

    Which records they may change is :mod:`pricing.access`'s to say, record by record.
    """

    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not access.may_edit_any(request.user):
            raise PermissionDenied("Only pricing admins may do this.")
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


def _is_pricing_admin(request: HttpRequest) -> bool:
    return access.may_edit_any(request.user)


def _book_or_404(request: HttpRequest, pk: int) -> PriceBook:
    """A book the user sees: another organisation's private book is a 404."""
    books = access.visible(PriceBook.objects.all(), request.user, field="organisation", public=True)
    return get_object_or_404(books, pk=pk)


# --- Catalog --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonRow:
    label: str
    cells: list[str]


def _number(value: float | None, unit: str = "") -> str:
    if value is None or value == 0:
        return "-"
    return f"{value:,.4g}{(' ' + unit) if unit else ''}"


def _range_text(price_range: PriceRange | None) -> str:
    if price_range is None or price_range.low is None or price_range.high is None:
        return "no published price"
    return f"{price_range.low:.2f} - {price_range.high:.2f} {price_range.currency}"


def _comparison(
    accelerators: list[Accelerator], ranges: dict[int, PriceRange]
) -> list[ComparisonRow]:
    """Spec rows with one cell per accelerator, for the side-by-side table."""

    def row(label: str, cell: Callable[[Accelerator], str]) -> ComparisonRow:
        return ComparisonRow(label, [cell(a) for a in accelerators])

    return [
        row("Vendor", lambda a: a.vendor),
        row("Memory", lambda a: _number(a.memory_gib, "GiB")),
        row("Memory bandwidth", lambda a: _number(a.memory_bandwidth_tbs, "TB/s")),
        *(
            row(
                f"Peak {p.upper()} (dense)",
                lambda a, p=p: _number(a.peak_tflops.get(p), "TFLOP/s"),  # type: ignore[misc]
            )
            for p in PRECISIONS
        ),
        row("Interconnect", lambda a: a.intra_node_interconnect or "-"),
        row("Intra-node bandwidth", lambda a: _number(a.intra_node_bandwidth_gbs, "GB/s")),
        row("Inter-node bandwidth", lambda a: _number(a.inter_node_bandwidth_gbps, "Gbit/s")),
        row("Devices per node", lambda a: str(a.devices_per_node)),
        row("TDP", lambda a: _number(a.tdp_w, "W")),
        row("Price per GPU-hour", lambda a: _range_text(ranges.get(a.pk))),
        row("Source", lambda a: a.source),
    ]


@login_required
@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    """Every accelerator with its specs and published price range; pick some to compare."""
    accelerators = list(selectors.accelerator_list())
    ranges = selectors.accelerator_price_ranges(viewer=request.user, currency=DISPLAY_CURRENCY)
    wanted = set(request.GET.getlist("compare"))
    compared = [a for a in accelerators if a.catalog_id in wanted]
    context = {
        "rows": [
            (a, ranges.get(a.pk), [a.peak_tflops.get(p) for p in PRECISIONS]) for a in accelerators
        ],
        "compared": compared,
        "comparison": _comparison(compared, ranges) if compared else [],
        "currency": DISPLAY_CURRENCY,
        "precisions": PRECISIONS,
    }
    return render(request, "pricing/catalog.html", context)


@login_required
@require_GET
def accelerator_detail(request: HttpRequest, catalog_id: str) -> HttpResponse:
    if nul_problem(catalog_id):  # no id holds one, and PostgreSQL refuses it in a query
        raise Http404("No accelerator has that id.")
    accelerator = get_object_or_404(Accelerator, catalog_id=catalog_id)
    ranges = selectors.accelerator_price_ranges(
        viewer=request.user,
        currency=DISPLAY_CURRENCY,
        accelerators=Accelerator.objects.filter(pk=accelerator.pk),
    )
    entries = selectors.price_entries_published(
        viewer=request.user, accelerator=accelerator
    ).order_by("price_per_accelerator_hour")
    context = {
        "accelerator": accelerator,
        "comparison": _comparison([accelerator], ranges),
        "price_range": ranges.get(accelerator.pk),
        "entries": entries,
        "quotes": selectors.quote_list(viewer=request.user).filter(accelerator=accelerator),
        "today": timezone.localdate(),
    }
    return render(request, "pricing/accelerator_detail.html", context)


# --- Price books ----------------------------------------------------------------------------


@login_required
@require_GET
def price_book_list(request: HttpRequest) -> HttpResponse:
    context = {
        "books": selectors.price_book_list(viewer=request.user),
        "is_admin": _is_pricing_admin(request),
    }
    return render(request, "pricing/price_book_list.html", context)


@login_required
@require_GET
def price_book_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A book and one page of its entries (a book may hold tens of thousands)."""
    book = get_object_or_404(selectors.price_book_list(viewer=request.user), pk=pk)
    entries = selectors.price_entry_list(viewer=request.user).filter(book=book)
    context = {
        "book": book,
        "page": Paginator(entries, ENTRIES_PER_PAGE).get_page(request.GET.get("page")),
        "is_admin": _is_pricing_admin(request),
        "may_change": access.may_change(request.user, book),
    }
    return render(request, "pricing/price_book_detail.html", context)


@require_POST
@pricing_admin_required
def price_book_copy(request: HttpRequest, pk: int) -> HttpResponse:
    book = _book_or_404(request, pk)
    try:
        organisation = access.copy_organisation(request.user, book)
        copy = services.price_book_copy(book=book, user=request.user, organisation=organisation)
    except PricingNotAllowed as error:
        raise PermissionDenied(error.message) from error
    except PricingError as error:  # no organisation to copy into; deleted while waiting
        messages.error(request, error.message)
        return redirect("pricing:price-book-list")
    messages.success(request, f"Copied to the new draft '{copy.name}'.")
    return redirect(copy)


@require_POST
@pricing_admin_required
def price_book_publish(request: HttpRequest, pk: int) -> HttpResponse:
    book = _book_or_404(request, pk)
    if not access.may_change(request.user, book):
        raise PermissionDenied("Only a pricing admin of its organisation may publish this book.")
    try:
        services.price_book_publish(book=book, user=request.user)
        messages.success(request, f"Published '{book.name}': it can no longer change.")
    except PricingError as error:
        messages.error(request, error.message)
    return redirect(book)


# --- Quotes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuoteRow:
    """A quote as the list shows it, its money in the currency's format."""

    quote: VendorQuote
    validity: str
    may_change: bool

    @property
    def price_text(self) -> str:
        return price_per_hour_text(self.quote.price_per_accelerator_hour, self.quote.currency)

    @property
    def commitment_text(self) -> str:
        total = self.quote.total_price
        return "" if total is None else money_text(total, self.quote.currency)


@login_required
@require_GET
def quote_list(request: HttpRequest) -> HttpResponse:
    today = timezone.localdate()
    listed = selectors.quote_list(viewer=request.user)
    mine = set(access.pricing_admin_organisations(request.user).values_list("pk", flat=True))
    quotes = [
        QuoteRow(quote, quote.validity_on(today), quote.organisation_id in mine) for quote in listed
    ]
    context = {"quotes": quotes, "today": today, "is_pricing_admin": _is_pricing_admin(request)}
    return render(request, "pricing/quote_list.html", context)


def _quote_or_404(request: HttpRequest, pk: int) -> VendorQuote:
    """A quote the user sees and may change: another organisation's is a 404, one the user
    only reads a 403."""
    quote = get_object_or_404(selectors.quote_list(viewer=request.user), pk=pk)
    if not access.may_change(request.user, quote):
        raise PermissionDenied("Only a pricing admin of its organisation may change this quote.")
    return quote


def _quote_form_page(request: HttpRequest, form: QuoteForm, quote: VendorQuote | None) -> Any:
    context = {"form": form, "quote": quote, "csv_columns": services.QUOTE_CSV_COLUMNS}
    return render(request, "pricing/quote_form.html", context, status=400 if form.errors else 200)


def _quote_save(request: HttpRequest, form: QuoteForm, quote: VendorQuote | None) -> VendorQuote:
    if quote is not None:
        return services.quote_update(quote=quote, user=request.user, **form.quote_changes())
    organisation = access.write_organisation(
        request.user, form.requested_organisation(), public_allowed=False
    )
    assert organisation is not None
    return services.quote_create(
        user=request.user, organisation=organisation, **form.quote_values()
    )


@require_http_methods(["GET", "POST"])
@pricing_admin_required
def quote_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Enter a quote, or change one, with the rules the API and the CSV import apply; a
    refused value is shown on its field."""
    quote = _quote_or_404(request, pk) if pk is not None else None
    form = QuoteForm(request.POST or None, instance=quote, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            saved = _quote_save(request, form, quote)
        except PricingError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Saved the quote from {saved.vendor}.")
            return redirect("pricing:quote-list")
    return _quote_form_page(request, form, quote)


@require_POST
@pricing_admin_required
def quote_expire(request: HttpRequest, pk: int) -> HttpResponse:
    """End a quote's validity today: it can no longer be chosen, and budgets on it are warned."""
    quote = _quote_or_404(request, pk)
    services.quote_expire(quote=quote, on=timezone.localdate(), user=request.user)
    messages.success(request, f"The quote from {quote.vendor} has expired as of today.")
    return redirect("pricing:quote-list")


# --- CSV import -----------------------------------------------------------------------------


def _csv_import(request: HttpRequest, form: CsvUploadForm) -> HttpResponse:
    text = services.csv_text_decode(form.cleaned_data["file"].read())
    requested = form.requested_organisation()
    if form.cleaned_data["kind"] == "quotes":
        organisation = access.write_organisation(request.user, requested, public_allowed=False)
        assert organisation is not None
        quotes = services.quote_csv_import(text=text, user=request.user, organisation=organisation)
        messages.success(request, f"Imported {len(quotes)} quotes.")
        return redirect("pricing:quote-list")
    target = form.import_target()
    if "book" in target:
        access.change_assert(request.user, target["book"])
    else:
        target["new_book"]["organisation"] = access.write_organisation(
            request.user, requested, public_allowed=True
        )
    result = services.price_book_csv_import(text=text, user=request.user, **target)
    messages.success(request, f"Imported {result.created} entries into '{result.book.name}'.")
    return redirect(result.book)


@require_http_methods(["GET", "POST"])
@pricing_admin_required
def csv_upload(request: HttpRequest) -> HttpResponse:
    """Upload a CSV of price-book entries or quotes; show every problem if it fails."""
    form = CsvUploadForm(request.POST or None, request.FILES or None, user=request.user)
    context: dict[str, Any] = {"form": form, "problems": [], "error": None}
    if request.method == "POST" and form.is_valid():
        try:
            return _csv_import(request, form)
        except CsvImportError as error:
            context.update(error=error.message, problems=error.errors)
        except PricingError as error:
            context["error"] = error.message
    return render(request, "pricing/csv_upload.html", context)


# --- On-prem --------------------------------------------------------------------------------

# (field, label, unit, step) of the calculator's inputs, in the order shown.
ONPREM_FIELDS = (
    ("server_price", "Server price", "per server", "1000"),
    ("gpus_per_server", "GPUs per server", "", "1"),
    ("network_share_percent", "Network share of cluster cost", "%", "0.1"),
    ("depreciation_years", "Depreciation", "years", "1"),
    ("cost_of_capital_percent", "Cost of capital", "% per year", "0.1"),
    ("power_per_gpu_w", "Power per GPU (TDP)", "W", "10"),
    ("server_power_overhead", "Server power overhead", "x TDP", "0.01"),
    ("average_load_percent", "Average load", "%", "1"),
    ("pue", "PUE", "", "0.01"),
    ("electricity_price_per_kwh", "Electricity price", "per kWh", "0.01"),
    ("colocation_price_per_kw_month", "Colocation price", "per kW-month", "10"),
    ("operations_share_percent", "Operations", "% of capital per year", "0.5"),
    ("utilisation_percent", "Expected utilisation", "%", "1"),
)


def _onprem_cost(profile: OnPremProfile | None) -> dict[str, Any] | None:
    if profile is None:
        return None
    result = selectors.onprem_profile_cost(profile=profile)
    return OnPremCostOutput(onprem_cost_data(result, profile.currency)).data


def _onprem_save_form(request: HttpRequest, profile: OnPremProfile | None) -> OnPremProfileSaveForm:
    """An empty save form for a pricing admin, carrying the profile's currency and SKU."""
    initial: dict[str, Any] = {"currency": getattr(profile, "currency", "USD")}
    if profile is not None and profile.accelerator_id is not None:
        initial["accelerator"] = profile.accelerator_id
    if profile is not None:
        initial["organisation"] = profile.organisation_id
    return OnPremProfileSaveForm(initial=initial, user=request.user)


def _onprem_errors(form: OnPremProfileSaveForm | None) -> list[tuple[str, list[str]]]:
    """The save form's errors as (label, messages), named as the calculator names its
    inputs: the figures travel in hidden inputs, so each error must say whose it is."""
    if form is None or not form.errors:
        return []
    labels = {name: str(field.label) for name, field in form.fields.items()}
    labels |= {name: label for name, label, _unit, _step in ONPREM_FIELDS}
    return [
        (labels.get(name, ""), [str(e) for e in errors]) for name, errors in form.errors.items()
    ]


def _onprem_page(
    request: HttpRequest, chosen: str, form: OnPremProfileSaveForm | None = None
) -> HttpResponse:
    """The calculator at the chosen profile (the first one by default); after a refused
    save, at the figures that were posted, marked out of date."""
    profiles = list(selectors.onprem_profile_list(viewer=request.user))
    profile = next((p for p in profiles if str(p.pk) == chosen), profiles[0] if profiles else None)
    refused = form is not None and form.is_bound
    if form is None and _is_pricing_admin(request):
        form = _onprem_save_form(request, profile)
    posted = form.data if form is not None and refused else {}
    errors = form.errors if form is not None and refused else {}
    fields = [
        (name, label, unit, step, posted.get(name, getattr(profile, name, "")), errors.get(name))
        for name, label, unit, step in ONPREM_FIELDS
    ]
    context = {
        "profiles": profiles,
        "profile": profile,
        "fields": fields,
        "cost": _onprem_cost(profile),
        "save_form": form,
        "save_errors": _onprem_errors(form),
        "stale": refused,
    }
    return render(request, "pricing/onprem.html", context)


@login_required
@require_GET
def onprem_calculator(request: HttpRequest) -> HttpResponse:
    """A profile's price per GPU-hour; editing a field recalculates it on the server.

    Pricing admins can also save the figures as a new profile.
    """
    return _onprem_page(request, request.GET.get("profile", ""))


@require_POST
@pricing_admin_required
def onprem_profile_save(request: HttpRequest) -> HttpResponse:
    """Save the calculator's figures as a new named profile, with the admin's rules."""
    form = OnPremProfileSaveForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            organisation = access.write_organisation(
                request.user, form.requested_organisation(), public_allowed=False
            )
            assert organisation is not None
            profile = services.onprem_profile_create(
                user=request.user, organisation=organisation, **form.cleaned_data
            )
        except PricingError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Saved the on-prem profile '{profile.name}'.")
            return redirect(f"{reverse('pricing:onprem')}?profile={profile.pk}")
    return _onprem_page(request, request.POST.get("profile", ""), form)
