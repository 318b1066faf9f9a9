"""The price choices of the scenario form: price-book entries, vendor quotes, on-prem."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.utils import timezone

from planner.models import Scenario
from pricing import selectors as pricing_selectors
from pricing.models import OnPremProfile, PriceEntry, VendorQuote

PriceObject = PriceEntry | VendorQuote | OnPremProfile


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


def _money(amount: Decimal, currency: str) -> str:
    """``3.43088125`` as ``3.4309 USD/GPU-h``, ``2.9500`` as ``2.95 USD/GPU-h``."""
    text = f"{amount:,.4f}"
    return f"{text[:-2] if text.endswith('00') else text} {currency}/GPU-h"


def price_choices(*, current: PriceObject | None = None) -> dict[str, list[PriceChoice]]:
    """Published price-book entries, quotes valid today and on-prem profiles, by group."""
    today = timezone.localdate()
    entries = pricing_selectors.price_entries_published().order_by(
        "accelerator__catalog_id", "price_per_accelerator_hour"
    )
    groups: dict[str, list[PriceChoice]] = {"Price books": [], "Vendor quotes": [], "On-prem": []}
    for entry in entries:
        flag = " — flagged: " + entry.data_flag.split(":")[0] if entry.data_flag else ""
        label = (
            f"{_money(entry.price_per_accelerator_hour, entry.book.currency)} · "
            f"{entry.provider.name} {entry.region}, {entry.get_pricing_type_display()} "
            f"[{entry.accelerator.catalog_id}]{flag}"
        )
        groups["Price books"].append(
            PriceChoice(f"price_entry:{entry.pk}", label, entry.accelerator.catalog_id, entry)
        )
    quotes = list(pricing_selectors.quotes_selectable(on=today))
    if isinstance(current, VendorQuote) and current not in quotes:
        quotes.append(current)
    for quote in quotes:
        state = "" if quote.validity_on(today) == "valid" else " — not valid today"
        label = (
            f"{_money(quote.price_per_accelerator_hour, quote.currency)} · "
            f"{quote.reference or quote.vendor[:40]} (up to {quote.accelerator_count} GPUs, "
            f"until {quote.valid_until:%Y-%m-%d}) [{quote.accelerator.catalog_id}]{state}"
        )
        groups["Vendor quotes"].append(
            PriceChoice(f"vendor_quote:{quote.pk}", label, quote.accelerator.catalog_id, quote)
        )
    for profile in pricing_selectors.onprem_profile_list():
        cost = pricing_selectors.onprem_profile_cost(profile=profile).price_per_gpu_hour
        accelerator = profile.accelerator.catalog_id if profile.accelerator else ""
        label = f"{_money(cost, profile.currency)} · {profile.name} [{accelerator or 'any'}]"
        groups["On-prem"].append(
            PriceChoice(f"onprem_profile:{profile.pk}", label, accelerator, profile)
        )
    return groups


def price_value(scenario: Scenario) -> str:
    price = scenario.price_entry or scenario.vendor_quote or scenario.onprem_profile
    return f"{scenario.price_source}:{price.pk}" if price is not None else ""
