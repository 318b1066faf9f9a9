"""A scenario's price: a price-book entry, a vendor quote or an on-prem profile.

The one place that says which source a price record belongs to, the key a form or the
capacity page names it by (``price_entry:12``), how it is described (its labels, accelerator,
currency and price per GPU-hour, or per chip-hour for a TPU), what a run copies of it when
it starts (:func:`price_snapshot`, with the prices of the whole bill's other lines:
:func:`price_usage`) and what a budget snapshot freezes of it. The scenario form, the
scenario services and views, the capacity planner and the API all call these.

It lives in the planner, not in ``pricing``: the three sources and their keys are the
planner's vocabulary (:class:`~planner.scenarios.models.PriceSource`, the scenario's price
fields), and ``pricing`` never imports the planner.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from functools import cached_property
from typing import Any, ClassVar

from django.db.models import QuerySet

from lib.money import money_text
from lib.money import price_per_hour_text as money_per_gpu_hour
from organisations.models import Organisation
from planner.scenarios.budget_figures import HOURS_PER_MONTH, commitment_minimum
from planner.scenarios.models import PriceSource, Scenario
from pricing.access import record_organisation_id
from pricing.grid import grid_intensity
from pricing.models import OnPremProfile, PriceEntry, UsagePrice, VendorQuote
from pricing.selectors import onprem_profile_cost

PriceObject = PriceEntry | VendorQuote | OnPremProfile

#: Each price source, which is also the name of the scenario field that holds its record.
PRICE_MODELS: dict[str, type[PriceObject]] = {
    PriceSource.PRICE_ENTRY.value: PriceEntry,
    PriceSource.VENDOR_QUOTE.value: VendorQuote,
    PriceSource.ONPREM_PROFILE.value: OnPremProfile,
}
#: What describing a record reads beside it, so that a list of them costs one query.
RELATED = {
    PriceSource.PRICE_ENTRY.value: ("book", "provider", "accelerator"),
    PriceSource.VENDOR_QUOTE.value: ("accelerator",),
    PriceSource.ONPREM_PROFILE.value: ("accelerator",),
}


def price_source_of(price: PriceObject) -> str:
    """The :class:`~planner.scenarios.models.PriceSource` value of a price record."""
    for source, model in PRICE_MODELS.items():
        if isinstance(price, model):
            return source
    raise TypeError(f"not a price record: {price!r}")


def price_key(price: PriceObject) -> str:
    """The key a choice list names ``price`` by: ``<source>:<id>``, e.g. ``price_entry:12``."""
    return f"{price_source_of(price)}:{price.pk}"


def price_key_parse(key: str) -> tuple[str, int]:
    """The source and id of a :func:`price_key`; ValueError when ``key`` is not one."""
    source, _, pk = key.partition(":")
    if source not in PRICE_MODELS or not pk.isdigit():
        raise ValueError(f"not a price key: {key!r}")
    return source, int(pk)


def price_queryset(source: str) -> QuerySet[Any]:
    """The records of price source ``source``, with what describing them reads."""
    return PRICE_MODELS[source]._default_manager.select_related(*RELATED[source])


def price_available_to(price: PriceObject, organisation: Organisation) -> bool:
    """Whether ``organisation`` may price its scenarios with ``price``: an entry of a public
    book or of its own, its own quotes and on-prem profiles."""
    owner = record_organisation_id(price)
    return owner is None or owner == organisation.pk


def price_get(source: Any, pk: Any) -> PriceObject | None:
    """The record ``pk`` of price source ``source``; None when either names nothing."""
    if source not in PRICE_MODELS or not isinstance(pk, int):
        return None
    price: PriceObject | None = price_queryset(source).filter(pk=pk).first()
    return price


def prices_get(keys: Iterable[tuple[Any, Any]]) -> dict[tuple[str, int], PriceObject]:
    """The records named by ``(source, pk)`` pairs, one query per price source; pairs that
    name nothing are left out (as :func:`price_get` returns None for them)."""
    wanted: dict[str, set[int]] = {}
    for source, pk in keys:
        if source in PRICE_MODELS and isinstance(pk, int):
            wanted.setdefault(source, set()).add(pk)
    return {
        (source, record.pk): record
        for source, pks in wanted.items()
        for record in price_queryset(source).filter(pk__in=pks)
    }


#: Families whose makers sell and price them per chip, not per GPU (Google TPU, AWS Trainium).
CHIP_FAMILIES = frozenset({"google-tpu", "aws-trainium"})
#: Families that are GPUs, by the prefix of their family in the catalog.
GPU_FAMILY_PREFIXES = ("nvidia-", "amd-")


def device_word(family: str | None) -> str:
    """What one accelerator of ``family`` is called: ``GPU``, ``chip`` or ``accelerator``.

    ``None`` (an on-prem profile for any accelerator) is a GPU: the on-prem cost model prices
    GPU servers. A family the catalog does not know (a custom SKU's ``generic``, Gaudi) is
    neither, so it reads ``accelerator``.
    """
    if family is None or family.startswith(GPU_FAMILY_PREFIXES):
        return "GPU"
    return "chip" if family in CHIP_FAMILIES else "accelerator"


class PriceDescription[P: (PriceEntry, VendorQuote, OnPremProfile)](ABC):
    """How a price record is named and what it costs; :func:`price_describe` makes one.

    Every attribute is read when asked for, so a description touches only the relations the
    caller uses (a scenario list loads the entry's book and provider, not its accelerator).
    """

    #: The :class:`~planner.scenarios.models.PriceSource` value.
    source: ClassVar[str]
    #: What kind of price it is, as a column of options shows it ("Vendor quote").
    kind: ClassVar[str]

    def __init__(self, price: P) -> None:
        self.price: P = price

    @property
    def key(self) -> str:
        return price_key(self.price)

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name, shown beside :attr:`kind`."""

    @property
    @abstractmethod
    def label(self) -> str:
        """A name that stands alone, as a run's price and a scenario's page show it."""

    @property
    @abstractmethod
    def accelerator(self) -> str:
        """The catalog id of the accelerator priced, ``""`` when the record names none."""

    @property
    @abstractmethod
    def currency(self) -> str: ...

    @property
    def device(self) -> str:
        """What one accelerator priced is called (:func:`device_word`): ``GPU`` or ``chip``."""
        accelerator = self.price.accelerator
        return device_word(accelerator.family if accelerator else None)

    @property
    @abstractmethod
    def price_per_gpu_hour(self) -> Decimal:
        """What one accelerator costs for one hour. [currency / h]"""

    def choice_label(self, on: date) -> str:
        """The text of the record in the scenario form's price list, on day ``on``."""
        money = money_per_gpu_hour(self.price_per_gpu_hour, self.currency, self.device)
        return f"{money} · {self._choice_detail(on)}"

    @abstractmethod
    def _choice_detail(self, on: date) -> str: ...


class _EntryDescription(PriceDescription[PriceEntry]):
    source = PriceSource.PRICE_ENTRY.value
    kind = "Price book"

    @property
    def name(self) -> str:
        # The instance type tells apart two entries of one provider, region and pricing type
        # (AWS sells H100s by the 8-GPU p5.48xlarge and the one-GPU p5.4xlarge).
        entry = self.price
        instance = f", {entry.instance_type}" if entry.instance_type else ""
        return f"{entry.provider.name} {entry.region}, {entry.get_pricing_type_display()}{instance}"

    label = name

    @property
    def accelerator(self) -> str:
        return self.price.accelerator.catalog_id

    @property
    def currency(self) -> str:
        return self.price.book.currency

    @property
    def price_per_gpu_hour(self) -> Decimal:
        return self.price.price_per_accelerator_hour

    def _choice_detail(self, on: date) -> str:
        flag = self.price.data_flag
        flagged = " — flagged: " + flag.split(":")[0] if flag else ""
        term = self.price.minimum_term_months
        committed = (
            f" — commitment: every {self.device} for {term} months, owed in full however "
            "short the run"
            if term
            else ""
        )
        return f"{self.name} [{self.accelerator}]{committed}{flagged}"


class _QuoteDescription(PriceDescription[VendorQuote]):
    source = PriceSource.VENDOR_QUOTE.value
    kind = "Vendor quote"

    @property
    def name(self) -> str:
        return f"{self.price.vendor} {self.price.reference}".strip()

    @property
    def label(self) -> str:
        return f"{self.price.vendor} quote {self.price.reference}".strip()

    @property
    def accelerator(self) -> str:
        return self.price.accelerator.catalog_id

    @property
    def currency(self) -> str:
        return self.price.currency

    @property
    def price_per_gpu_hour(self) -> Decimal:
        return self.price.price_per_accelerator_hour

    def choice_label(self, on: date) -> str:
        """A quote for a term reads as the commitment it is, its hourly rate as what it costs
        only when every committed hour is used: ``4,709,376 USD commitment: 256 GPUs x 12
        months = 2,242,560 GPU-h, owed in full (2.10 USD/GPU-h only if all used) · ...``."""
        quote = self.price
        spend = commitment_minimum(
            quote.price_per_accelerator_hour, quote.accelerator_count, quote.term_months
        )
        if spend is None:
            return super().choice_label(on)
        hours = quote.accelerator_count * (quote.term_months or 0) * HOURS_PER_MONTH
        rate = money_per_gpu_hour(self.price_per_gpu_hour, self.currency, self.device)
        return (
            f"{money_text(spend, self.currency)} commitment: {quote.accelerator_count:,} "
            f"{self.device}s x {quote.term_months} months = {hours:,} {self.device}-h, owed in "
            f"full however short the run ({rate} only if all used) · {self._choice_detail(on)}"
        )

    def _choice_detail(self, on: date) -> str:
        quote = self.price
        state = "" if quote.validity_on(on) == "valid" else " — not valid today"
        return (
            f"{quote.reference or quote.vendor[:40]} (up to {quote.accelerator_count} "
            f"{self.device}s, "
            f"until {quote.valid_until:%Y-%m-%d}) [{self.accelerator}]{state}"
        )


class _OnPremDescription(PriceDescription[OnPremProfile]):
    source = PriceSource.ONPREM_PROFILE.value
    kind = "On-prem"

    @property
    def name(self) -> str:
        return self.price.name

    @property
    def label(self) -> str:
        return f"on-prem profile '{self.price.name}'"

    @property
    def accelerator(self) -> str:
        accelerator = self.price.accelerator
        return accelerator.catalog_id if accelerator else ""

    @property
    def currency(self) -> str:
        return self.price.currency

    @cached_property
    def price_per_gpu_hour(self) -> Decimal:
        # To the hundredth of a cent, as a run copies it: the cost model's figure is longer.
        cost = onprem_profile_cost(profile=self.price).price_per_gpu_hour
        return cost.quantize(Decimal("0.0001"))

    def _choice_detail(self, on: date) -> str:
        return f"{self.price.name} [{self.accelerator or 'any'}]"


def price_describe(price: PriceObject) -> PriceDescription[Any]:
    """The description of a price-book entry, vendor quote or on-prem profile."""
    if isinstance(price, PriceEntry):
        return _EntryDescription(price)
    if isinstance(price, VendorQuote):
        return _QuoteDescription(price)
    return _OnPremDescription(price)


def price_record(price: PriceObject) -> dict[str, Any]:
    """The record as a budget snapshot freezes it: its fields as they stand now, JSON-safe."""
    if isinstance(price, PriceEntry):
        return _entry_record(price)
    if isinstance(price, VendorQuote):
        return _quote_record(price)
    return _onprem_record(price)


def _entry_record(entry: PriceEntry) -> dict[str, Any]:
    book = entry.book
    return {
        "book": {"id": book.pk, "name": book.name, "status": book.status,
                 "currency": book.currency, "source": book.source,
                 "fetched_at": book.fetched_at.isoformat()},
        "provider": entry.provider.name, "region": entry.region,
        "accelerator": entry.accelerator.catalog_id, "pricing_type": entry.pricing_type,
        "price_per_accelerator_hour": str(entry.price_per_accelerator_hour),
        "instance_type": entry.instance_type, "source": entry.source,
        "data_flag": entry.data_flag,
    }  # fmt: skip


def _quote_record(quote: VendorQuote) -> dict[str, Any]:
    total = quote.total_price
    return {
        "vendor": quote.vendor, "reference": quote.reference,
        "accelerator": quote.accelerator.catalog_id, "count": quote.accelerator_count,
        "price_per_accelerator_hour": str(quote.price_per_accelerator_hour),
        "total_price": str(total) if total is not None else None,
        "term_months": quote.term_months, "currency": quote.currency,
        "valid_from": quote.valid_from.isoformat(),
        "valid_until": quote.valid_until.isoformat(), "terms": quote.terms,
    }  # fmt: skip


def _onprem_record(profile: OnPremProfile) -> dict[str, Any]:
    # Every input of the cost model; timestamps left out. A relation is kept as its id
    # (``attname``), since a snapshot is JSON; the accelerator as its catalog id.
    fields = [f for f in OnPremProfile._meta.concrete_fields if f.name != "id"]
    record = {f.name: _as_text(getattr(profile, f.attname)) for f in fields if "_at" not in f.name}
    return record | {"accelerator": profile.accelerator.catalog_id if profile.accelerator else None}


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


def _commitment(
    price: Decimal, accelerators: int, term_months: int | None, what: str
) -> dict[str, Any]:
    """The least a committed price costs: every accelerator of it for its whole term."""
    spend = commitment_minimum(price, accelerators, term_months)
    if spend is None:
        return {"minimum_spend": None, "commitment": ""}
    return {
        "minimum_spend": str(spend),
        "commitment": f"{what} for {term_months} months ({HOURS_PER_MONTH} h a month)",
        "committed_accelerators": accelerators,
        "term_months": term_months,
    }


def price_snapshot(scenario: Scenario) -> dict[str, Any]:
    """The price a run of ``scenario`` uses, copied with where it came from."""
    price = scenario.price
    assert price is not None  # the model's check constraint guarantees one source
    described = price_describe(price)
    pricing_type = {"pricing_type": price.pricing_type} if isinstance(price, PriceEntry) else {}
    return {
        "source": described.source,
        "id": price.pk,
        "label": described.label,
        **pricing_type,
        "price_per_gpu_hour": str(described.price_per_gpu_hour),
        "currency": described.currency,
        "provider": _provider_name(price),
        **_snapshot_origin(price),
        **_snapshot_commitment(price, scenario.num_gpus),
    }


def _usage_price(entry: PriceEntry, kind: str) -> dict[str, Any] | None:
    """The book's storage or egress price at the entry's provider: its region's if the book
    has one, else the provider's cheapest; None when the book has none."""
    prices = UsagePrice.objects.filter(
        book_id=entry.book_id, provider_id=entry.provider_id, kind=kind
    )
    chosen = (
        prices.filter(region=entry.region).order_by("price").first()
        or prices.order_by("price").first()
    )
    if chosen is None:
        return None
    tier = f", {chosen.tier}" if chosen.tier else ""
    return {
        "price": str(chosen.price),
        "label": f"{entry.provider.name} {chosen.region}{tier}",
        "source": chosen.source,
    }


def price_usage(price: PriceObject) -> dict[str, Any]:
    """What the whole bill's other lines are priced at (``planner/scenarios/bill.py``): the
    storage and egress prices of a price-book entry's book and provider, an on-prem profile's
    electricity tariff, in the price's currency; and the grid's carbon intensity (the region's,
    from ``pricing/data/grid_intensity.csv``, or the on-prem profile's)."""
    if isinstance(price, PriceEntry):
        grid = grid_intensity(price.provider.slug, price.region)
        return {
            "storage_per_gb_month": _usage_price(price, UsagePrice.Kind.STORAGE),
            "egress_per_gb": _usage_price(price, UsagePrice.Kind.EGRESS),
            "grid_gco2e_per_kwh": None
            if grid is None
            else {"value": str(grid.gco2e_per_kwh), "year": grid.year, "source": grid.source},
        }
    if isinstance(price, OnPremProfile):
        stated = price.grid_gco2e_per_kwh
        return {
            "energy_per_kwh": str(price.electricity_price_per_kwh),
            "grid_gco2e_per_kwh": None
            if stated is None
            else {"value": str(stated), "source": f"on-prem profile '{price.name}'"},
        }
    return {}


def _snapshot_commitment(price: PriceObject, num_gpus: int) -> dict[str, Any]:
    """The least a committed price costs; nothing for an on-prem profile."""
    if isinstance(price, PriceEntry):
        return _commitment(
            price.price_per_accelerator_hour,
            num_gpus,
            price.minimum_term_months,
            f"{price.get_pricing_type_display()}: {num_gpus} accelerators",
        )
    if isinstance(price, VendorQuote):
        return _commitment(
            price.price_per_accelerator_hour,
            price.accelerator_count,
            price.term_months,
            f"the quote's {price.accelerator_count} accelerators",
        )
    return {}


def _provider_name(price: PriceObject) -> str:
    """Who bills the run: the provider, the quote's vendor, the on-prem profile."""
    if isinstance(price, PriceEntry):
        return price.provider.name
    if isinstance(price, VendorQuote):
        return price.provider.name if price.provider is not None else price.vendor
    return f"on-prem profile '{price.name}'"


def _snapshot_origin(price: PriceObject) -> dict[str, Any]:
    """Where the figure was read: the book, the quote's validity, the cost model."""
    if isinstance(price, PriceEntry):
        book = price.book
        return {
            "reference": f"price book '{book.name}' (fetched {book.fetched_at:%Y-%m-%d})",
            "book_id": price.book_id,
            "details": price.source,
        }
    if isinstance(price, VendorQuote):
        return {
            "reference": f"valid {price.valid_from} to {price.valid_until}",
            "details": price.terms,
        }
    return {
        "reference": "cost of ownership (capital, power, colocation, operations)",
        "details": price.source,
    }
