"""Capacity planning for the web page: "N tokens by date D within budget B, on what?".

:func:`capacity_options` turns the chosen price sources into priced cluster options (the
cheapest price per accelerator of a price book, each valid vendor quote, each on-prem
profile), converted into the plan's currency. :func:`capacity_plan` runs the estimator's
:func:`~estimator.core.capacity.plan_capacity` on them.

Read-only: nothing here writes to the database.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from estimator.core import ClusterOption, ScenarioError, load_catalog, plan_capacity
from estimator.core.capacity import meets_limits, pareto_frontier
from estimator.core.presets import preset_scenario
from planner.prices import PriceObject, price_describe
from pricing import selectors as pricing_selectors
from pricing.access import Viewer
from pricing.errors import PricingError
from pricing.models import PriceBook, PriceEntry, PricingType

#: Stop searching further accelerators after this long, so the page answers in time. [s]
TIME_BUDGET_S = 20.0
#: The most options searched in one request (each is one layout search per cluster size).
MAX_OPTIONS = 30


@dataclass(frozen=True)
class PricedOption:
    """One way to buy compute, priced in the plan's currency, with where the price came from."""

    key: str
    source: str
    label: str
    accelerator: str
    price_per_gpu_hour: Decimal
    original_price: Decimal
    original_currency: str
    max_gpus: int
    rate_note: str = ""

    @property
    def search_key(self) -> tuple[str, int]:
        # Options differing only in price share one layout search.
        return self.accelerator, self.max_gpus


@dataclass
class PricedOptions:
    options: list[PricedOption] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def deadline_days(deadline: date, *, today: date) -> int:
    """Whole days from ``today`` to ``deadline``: the time a plan's training may take. [days]"""
    return (deadline - today).days


def _option(price: PriceObject, *, currency: str, max_gpus: int, on: date) -> PricedOption:
    """``price`` as an option priced in ``currency`` (raises PricingError without a rate)."""
    described = price_describe(price)
    original = described.price_per_gpu_hour
    converted, note = _converted(original, described.currency, currency, on)
    return PricedOption(
        key=described.key,
        source=described.kind,
        label=described.name,
        accelerator=described.accelerator,
        price_per_gpu_hour=converted,
        original_price=original,
        original_currency=described.currency,
        max_gpus=max_gpus,
        rate_note=note,
    )


def _converted(amount: Decimal, from_currency: str, currency: str, on: date) -> tuple[Decimal, str]:
    """``amount`` in ``currency`` and a note naming the rate (raises PricingError)."""
    result = pricing_selectors.money_convert(
        amount=amount, from_currency=from_currency, to_currency=currency, on=on
    )
    if from_currency == currency:
        return amount, ""
    return result.amount, f"{from_currency}→{currency} {result.rate} ({result.rate_date})"


def _book_entries(book: PriceBook, include_spot: bool, viewer: Viewer) -> list[PriceEntry]:
    entries = pricing_selectors.price_entries_published(viewer=viewer)
    entries = entries.filter(book=book, data_flag="")
    if not include_spot:
        entries = entries.exclude(pricing_type=PricingType.SPOT)
    return list(entries.order_by("price_per_accelerator_hour", "pk"))


def _cheapest_per_accelerator(
    entries: Iterable[PriceEntry], max_gpus: int, built: PricedOptions
) -> list[PriceEntry]:
    cheapest: dict[str, PriceEntry] = {}
    for entry in entries:  # ascending price: the first usable entry per accelerator wins
        catalog_id = entry.accelerator.catalog_id
        if catalog_id in cheapest:
            continue
        if entry.minimum_count and entry.minimum_count > max_gpus:
            built.skipped.append(
                f"{catalog_id} at {entry.provider.name}: sold from {entry.minimum_count} GPUs"
            )
            continue
        cheapest[catalog_id] = entry
    return list(cheapest.values())


def _book_options(
    book: PriceBook,
    *,
    include_spot: bool,
    currency: str,
    max_gpus: int,
    on: date,
    viewer: Viewer,
) -> PricedOptions:
    built = PricedOptions()
    catalog = load_catalog()
    entries = _book_entries(book, include_spot, viewer)
    for entry in _cheapest_per_accelerator(entries, max_gpus, built):
        catalog_id = entry.accelerator.catalog_id
        if catalog_id not in catalog:
            built.skipped.append(f"{catalog_id}: not in the estimator's catalog")
            continue
        try:
            built.options.append(_option(entry, currency=currency, max_gpus=max_gpus, on=on))
        except PricingError as error:
            built.skipped.append(f"{catalog_id} from {book.name}: {error.message}")
    return built


def _quote_options(*, currency: str, max_gpus: int, on: date, viewer: Viewer) -> PricedOptions:
    built = PricedOptions()
    catalog = load_catalog()
    quotes = pricing_selectors.quote_list(viewer=viewer)
    for quote in pricing_selectors.quotes_selectable(on=on, quotes=quotes):
        catalog_id = quote.accelerator.catalog_id
        if catalog_id not in catalog:
            built.skipped.append(f"quote {quote.reference}: {catalog_id} not in the catalog")
            continue
        limit = min(quote.accelerator_count, max_gpus)
        try:
            built.options.append(_option(quote, currency=currency, max_gpus=limit, on=on))
        except PricingError as error:
            built.skipped.append(f"quote {quote.reference}: {error.message}")
    return built


def _onprem_options(*, currency: str, max_gpus: int, on: date, viewer: Viewer) -> PricedOptions:
    built = PricedOptions()
    catalog = load_catalog()
    for profile in pricing_selectors.onprem_profile_list(viewer=viewer):
        if price_describe(profile).accelerator not in catalog:  # "" when it names none
            built.skipped.append(f"on-prem '{profile.name}': no catalog accelerator")
            continue
        try:
            built.options.append(_option(profile, currency=currency, max_gpus=max_gpus, on=on))
        except PricingError as error:
            built.skipped.append(f"on-prem '{profile.name}': {error.message}")
    return built


def capacity_options(
    *,
    book: PriceBook | None,
    include_quotes: bool,
    include_onprem: bool,
    currency: str,
    max_gpus: int,
    on: date,
    viewer: Viewer,
    include_spot: bool = False,
) -> PricedOptions:
    """Priced options from the chosen sources; why any price was left out is in ``skipped``.

    Only prices ``viewer`` sees are options: public books' entries, and the books, quotes
    and on-prem profiles of the viewer's organisations (:mod:`pricing.access`).

    A price book gives its cheapest unflagged published price per accelerator (spot prices
    only when asked), each vendor quote valid on ``on`` is capped at the accelerators it
    covers, each on-prem profile costs what its cost of ownership says. Accelerators the
    estimator's catalog lacks cannot be estimated and are skipped.
    """
    built = PricedOptions()
    parts = []
    if book is not None:
        parts.append(
            _book_options(
                book,
                include_spot=include_spot,
                currency=currency,
                max_gpus=max_gpus,
                on=on,
                viewer=viewer,
            )
        )
    if include_quotes:
        parts.append(_quote_options(currency=currency, max_gpus=max_gpus, on=on, viewer=viewer))
    if include_onprem:
        parts.append(_onprem_options(currency=currency, max_gpus=max_gpus, on=on, viewer=viewer))
    for part in parts:
        built.options += part.options
        built.skipped += part.skipped
    return built


def capacity_scenario(
    *, preset_id: str = "", spec: Mapping[str, Any] | None = None, tokens: float | None = None
) -> dict[str, Any]:
    """The model and training to plan for: a preset's, or an existing scenario's.

    The cluster and layout are placeholders: the capacity search replaces both.
    """
    if spec is not None:
        scenario = copy.deepcopy(dict(spec))
        scenario.pop("cluster", None)
        scenario["parallelism"] = "auto"
    else:
        scenario = preset_scenario(preset_id, accelerator="H100-SXM", num_gpus=8)
    if tokens is not None:
        scenario["training"] = {**scenario["training"], "tokens": tokens}
    return scenario


@dataclass
class CapacityPlan:
    """What the page shows: options meeting both limits, the frontier, and the chart's points."""

    feasible: list[dict[str, Any]]
    frontier: list[dict[str, Any]]
    points: list[dict[str, Any]]
    options: list[PricedOption]
    skipped: list[str]
    points_evaluated: int
    seconds: float
    truncated: bool = False


def _priced(points: Iterable[Mapping[str, Any]], option: PricedOption) -> list[dict[str, Any]]:
    price = float(option.price_per_gpu_hour)
    return [
        {
            **point,
            "cost": point["gpu_hours"] * price,
            "price_per_gpu_hour": price,
            "option": option,
        }
        for point in points
    ]


def _searched(
    scenario: Mapping[str, Any], key: tuple[str, int], deadline_days: float
) -> dict[str, Any]:
    # Priced at 1 per GPU-hour: cost is then GPU-hours, and each option rescales it.
    accelerator, max_gpus = key
    return plan_capacity(
        scenario, [ClusterOption(accelerator, 1.0, max_gpus)], deadline_days=deadline_days
    )


def capacity_plan(
    scenario: Mapping[str, Any],
    options: list[PricedOption],
    *,
    deadline_days: float,
    budget: float | None,
    skipped: Iterable[str] = (),
) -> CapacityPlan:
    """Search every option's cluster sizes; keep those meeting the deadline and the budget.

    Options sharing an accelerator and a size limit share one search, since the price only
    scales the cost. Feasible points come cheapest first, the frontier fastest first.
    """
    began = time.perf_counter()
    groups: dict[tuple[str, int], list[PricedOption]] = defaultdict(list)
    for option in options[:MAX_OPTIONS]:
        groups[option.search_key].append(option)
    notes, feasible, frontier_points = list(skipped), [], []
    evaluated, truncated = 0, len(options) > MAX_OPTIONS
    for key, members in groups.items():
        if time.perf_counter() - began > TIME_BUDGET_S:
            truncated = True
            notes.append(f"{key[0]} (up to {key[1]:,} GPUs): not searched, out of time")
            continue
        try:
            found = _searched(scenario, key, deadline_days)
        except ScenarioError as error:
            notes.append(f"{key[0]}: {error.key}: {error.reason}")
            continue
        evaluated += found["points_evaluated"]
        for option in members:
            on_time = _priced(found["feasible"], option)
            feasible += [
                p for p in on_time if meets_limits(p, deadline_days=deadline_days, budget=budget)
            ]
            frontier_points += _priced(found["frontier"], option)
    feasible.sort(key=lambda p: (p["cost"], p["training_days"]))
    return CapacityPlan(
        feasible=feasible,
        frontier=pareto_frontier(frontier_points),
        points=_chart_points(frontier_points, feasible),
        options=options,
        skipped=notes,
        points_evaluated=evaluated,
        seconds=time.perf_counter() - began,
        truncated=truncated,
    )


def _chart_points(*groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, int]] = set()
    points = []
    for group in groups:
        for point in group:
            mark = (point["option"].key, point["num_gpus"])
            if mark not in seen:
                seen.add(mark)
                points.append(point)
    return points
