"""The price choices of the scenario form: price-book entries, vendor quotes, on-prem."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from organisations.models import Organisation
from planner.scenarios.models import PriceSource, Scenario
from planner.scenarios.prices import PriceObject, price_describe, price_key
from pricing import selectors as pricing_selectors
from pricing.models import OnPremProfile, PriceBook, PriceEntry, VendorQuote


class OptionAttrsSelect(forms.Select):
    """A select whose options carry data attributes (the page filters prices by accelerator)."""

    def __init__(self, *args: Any, option_attrs: Mapping[str, dict[str, str]], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.option_attrs = option_attrs

    def create_option(self, name: str, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, *args, **kwargs)
        option["attrs"].update(self.option_attrs.get(str(value), {}))
        return option


@dataclass(frozen=True)
class PriceChoice:
    value: str
    label: str
    accelerator: str
    price: PriceObject


#: The groups of the price list, by price source.
GROUPS = {
    PriceSource.PRICE_ENTRY: "Price books",
    PriceSource.VENDOR_QUOTE: "Vendor quotes",
    PriceSource.ONPREM_PROFILE: "On-prem",
}


def _choice(price: PriceObject, on: date) -> PriceChoice:
    described = price_describe(price)
    return PriceChoice(described.key, described.choice_label(on), described.accelerator, price)


def _organisation_prices(
    organisation: Organisation | None, today: date
) -> tuple[QuerySet[PriceEntry], list[VendorQuote], QuerySet[OnPremProfile]]:
    """What ``organisation`` may price with: entries of public books and of its own
    published books, its quotes valid today, its on-prem profiles (public entries only
    without an organisation)."""
    if organisation is None:
        entries = PriceEntry.objects.filter(
            book__status=PriceBook.Status.PUBLISHED, book__organisation__isnull=True
        ).select_related("book", "provider", "accelerator")
        return entries, [], OnPremProfile.objects.none()
    entries = pricing_selectors.price_entries_published(viewer=organisation)
    own_quotes = pricing_selectors.quote_list(viewer=organisation)
    quotes = list(pricing_selectors.quotes_selectable(on=today, quotes=own_quotes))
    return entries, quotes, pricing_selectors.onprem_profile_list(viewer=organisation)


def price_choices(
    *, organisation: Organisation | None, current: PriceObject | None = None
) -> dict[str, list[PriceChoice]]:
    """Published price-book entries, quotes valid today and on-prem profiles that
    ``organisation`` may use, by group."""
    today = timezone.localdate()
    entries, quotes, profiles = _organisation_prices(organisation, today)
    entries = entries.order_by("accelerator__catalog_id", "price_per_accelerator_hour")
    ours = organisation is not None and getattr(current, "organisation_id", None) == organisation.pk
    if isinstance(current, VendorQuote) and ours and current not in quotes:
        quotes.append(current)
    return {
        GROUPS[PriceSource.PRICE_ENTRY]: [_choice(entry, today) for entry in entries],
        GROUPS[PriceSource.VENDOR_QUOTE]: [_choice(quote, today) for quote in quotes],
        GROUPS[PriceSource.ONPREM_PROFILE]: [_choice(profile, today) for profile in profiles],
    }


def price_value(scenario: Scenario) -> str:
    """The price list's value for the price ``scenario`` is costed at."""
    price = scenario.price
    return price_key(price) if price is not None else ""
