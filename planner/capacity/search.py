"""Capacity planning: "N tokens by date D within budget B, on what?" (no database writes).

The work of a plan, in the order it happens:

1. :func:`capacity_options` reads the chosen price sources into priced options (a price
   book's cheapest unflagged entry per accelerator and deal, each valid vendor quote, each
   on-prem profile), with the rate into the plan's currency and the commitment each carries.
2. :func:`plan_chunks` splits the searches the options need into chunks: one search per
   accelerator and capacity kind (spot or not) over every cluster size any of its options
   offers, cut into pieces of at most :data:`SIZES_PER_CHUNK` sizes. Options that differ only
   in price share a search, since the price only scales the cost.
3. :func:`chunk_compute` runs one chunk (the estimator's
   :func:`~estimator.core.capacity.capacity_points`): the Celery task of a chunk calls it.
4. :func:`plan_merge` prices every point of every chunk for every option that offers its
   size, exactly as a run of that option is priced
   (:func:`planner.scenarios.budget_figures.cost_of`, with a committed price's minimum spend),
   gives each its deadline verdict and chance in time from its Monte Carlo days
   (:func:`estimator.core.deadline.deadline_check`), and keeps the options that meet the
   deadline and the budget and the cost-versus-days frontier.

:func:`capacity_plan` does 2-4 in one process; a saved plan
(:mod:`planner.capacity.services`) does 3 on the workers, a task per chunk, and 4 in a
final task, with the same result.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from estimator.core import ScenarioError, load_catalog
from estimator.core.capacity import (
    capacity_points,
    cluster_sizes,
    ideal_gpu_hours,
    pareto_frontier,
)
from estimator.core.deadline import deadline_check
from estimator.core.presets import preset_scenario
from planner.capacity.pruning import Priced, Pruner, SearchSize
from planner.scenarios.budget_figures import commitment_minimum, cost_of, money
from planner.scenarios.prices import PriceObject, price_describe
from pricing import selectors as pricing_selectors
from pricing.access import Viewer
from pricing.errors import PricingError
from pricing.models import PriceBook, PriceEntry, PricingType, VendorQuote

#: The most cluster sizes one chunk searches: a chunk takes a fraction of a second to a few
#: seconds, short enough that a killed worker loses little and long enough that the
#: broker's round trip is small beside it.
SIZES_PER_CHUNK = 6
SPOT = "spot"


@dataclass(frozen=True)
class PricedOption:
    """One way to buy compute, priced in the plan's currency, with where the price came from.

    ``original_price`` is in ``original_currency`` (the record's own); ``rate`` converts it
    into the plan's currency (1 when they are the same). A committed price (a price-book entry
    with a minimum term, a vendor quote for a term) costs at least ``original_price x
    committed accelerators x term_months x 730 h``: the quote's whole count
    (``committed_gpus``), or the cluster's size for a book entry.
    """

    key: str
    source: str
    label: str
    accelerator: str
    price_per_gpu_hour: Decimal
    original_price: Decimal
    original_currency: str
    max_gpus: int
    rate: Decimal = Decimal(1)
    rate_note: str = ""
    min_gpus: int = 1
    pricing_type: str = ""
    term_months: int | None = None
    committed_gpus: int | None = None

    @property
    def capacity(self) -> str:
        """``spot`` when the price is a spot price: the run is then preempted (runs do too)."""
        return SPOT if self.pricing_type == PricingType.SPOT else ""

    @property
    def search_key(self) -> tuple[str, str]:
        return self.accelerator, self.capacity

    def sizes(self, node_size: int) -> list[int]:
        """The cluster sizes this option offers: the ladder up to ``max_gpus``, from
        ``min_gpus`` (a price sold from a minimum count)."""
        return [size for size in cluster_sizes(self.max_gpus, node_size) if size >= self.min_gpus]

    def minimum_spend(self, num_gpus: int) -> Decimal | None:
        """What the commitment costs however short the run, in the original currency."""
        committed = self.committed_gpus if self.committed_gpus is not None else num_gpus
        return commitment_minimum(self.original_price, committed, self.term_months)

    def cost(self, gpu_hours: float, num_gpus: int) -> tuple[Decimal, Decimal]:
        """What a run of ``gpu_hours`` on ``num_gpus`` costs: in the original currency (as the
        run's budget says) and converted into the plan's (rounded to the cent)."""
        original = cost_of(gpu_hours, self.original_price, self.minimum_spend(num_gpus))
        return original, original if self.rate == 1 else money(original * self.rate)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("price_per_gpu_hour", "original_price", "rate"):
            data[name] = str(data[name])
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PricedOption:
        values = dict(data)
        for name in ("price_per_gpu_hour", "original_price", "rate"):
            values[name] = Decimal(values[name])
        return cls(**values)


@dataclass
class PricedOptions:
    options: list[PricedOption] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def deadline_days(deadline: date, *, today: date) -> int:
    """Whole days from ``today`` to ``deadline``: the time a plan's training may take. [days]"""
    return (deadline - today).days


def _commitment(price: PriceObject, max_gpus: int) -> dict[str, Any]:
    """The option's sizes and commitment, as
    :func:`planner.scenarios.prices.price_snapshot` sets a run's minimum spend and
    :func:`price_source_check` limits its size."""
    if isinstance(price, PriceEntry):
        return {
            "min_gpus": price.minimum_count or 1,
            "pricing_type": price.pricing_type,
            "term_months": price.minimum_term_months or None,
        }
    if isinstance(price, VendorQuote):
        return {
            "term_months": price.term_months or None,
            "committed_gpus": price.accelerator_count if price.term_months else None,
        }
    return {}


def _option(price: PriceObject, *, currency: str, max_gpus: int, on: date) -> PricedOption:
    """``price`` as an option priced in ``currency`` (raises PricingError without a rate)."""
    described = price_describe(price)
    original = described.price_per_gpu_hour
    converted, rate, note = _converted(original, described.currency, currency, on)
    return PricedOption(
        key=described.key,
        source=described.kind,
        label=described.name,
        accelerator=described.accelerator,
        price_per_gpu_hour=converted,
        original_price=original,
        original_currency=described.currency,
        max_gpus=max_gpus,
        rate=rate,
        rate_note=note,
        **_commitment(price, max_gpus),
    )


def _converted(
    amount: Decimal, from_currency: str, currency: str, on: date
) -> tuple[Decimal, Decimal, str]:
    """``amount`` in ``currency``, the rate, and a note naming it (raises PricingError)."""
    if from_currency == currency:
        return amount, Decimal(1), ""
    result = pricing_selectors.money_convert(
        amount=amount, from_currency=from_currency, to_currency=currency, on=on
    )
    return (
        result.amount,
        result.rate,
        f"{from_currency}→{currency} {result.rate} ({result.rate_date})",
    )


def _book_entries(book: PriceBook, include_spot: bool, viewer: Viewer) -> list[PriceEntry]:
    entries = pricing_selectors.price_entries_published(viewer=viewer)
    entries = entries.filter(book=book, data_flag="")
    if not include_spot:
        entries = entries.exclude(pricing_type=PricingType.SPOT)
    return list(entries.order_by("price_per_accelerator_hour", "pk"))


def _cheapest_per_deal(
    entries: Iterable[PriceEntry], max_gpus: int, built: PricedOptions
) -> list[PriceEntry]:
    """The cheapest usable entry per accelerator, pricing type and term: an on-demand price
    and a three-year commitment are different deals, each the best of its kind."""
    cheapest: dict[tuple[str, str, int], PriceEntry] = {}
    for entry in entries:  # ascending price: the first usable entry per deal wins
        deal = (entry.accelerator.catalog_id, entry.pricing_type, entry.minimum_term_months or 0)
        if deal in cheapest:
            continue
        if entry.minimum_count and entry.minimum_count > max_gpus:
            built.skipped.append(
                f"{deal[0]} at {entry.provider.name}: sold from {entry.minimum_count} GPUs"
            )
            continue
        cheapest[deal] = entry
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
    for entry in _cheapest_per_deal(entries, max_gpus, built):
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
    for quote in pricing_selectors.quotes_selectable(on=on, quotes=quotes).order_by("pk"):
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
    for profile in pricing_selectors.onprem_profile_list(viewer=viewer).order_by("pk"):
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

    A price book gives its cheapest unflagged published price per accelerator and deal
    (pricing type and term; spot prices only when asked), each vendor quote valid on ``on``
    is capped at the accelerators it covers, each on-prem profile costs what its cost of
    ownership says. Accelerators the estimator's catalog lacks cannot be estimated and are
    skipped.
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

    Without a cluster, and with the layout left to the search: each chunk sets both.
    """
    if spec is not None:
        scenario = copy.deepcopy(dict(spec))
    else:
        scenario = preset_scenario(preset_id, accelerator="H100-SXM", num_gpus=8)
    scenario.pop("cluster", None)
    scenario["parallelism"] = "auto"
    if tokens is not None:
        scenario["training"] = {**scenario["training"], "tokens": tokens}
    return scenario


def search_scenario(scenario: Mapping[str, Any], capacity: str) -> dict[str, Any]:
    """The scenario a chunk searches: on spot capacity its whole run is preempted, as a run
    at a spot price is (:func:`planner.scenarios.services.runs.with_capacity`)."""
    if capacity != SPOT:
        return dict(scenario)
    run = dict(scenario.get("run") or {})
    run.setdefault("capacity", SPOT)
    return {**scenario, "run": run}


def node_size(accelerator: str, cluster: Mapping[str, Any] | None = None) -> int:
    """Accelerators per node: the cluster's own ``gpus_per_node``, else the catalog's."""
    stated = (cluster or {}).get("gpus_per_node")
    return int(stated) if stated else load_catalog()[accelerator].devices_per_node


def plan_chunks(
    options: Iterable[PricedOption], *, sizes_per_chunk: int = SIZES_PER_CHUNK
) -> list[dict[str, Any]]:
    """The searches ``options`` need, cut into chunks of at most ``sizes_per_chunk`` sizes.

    Each chunk is ``{"accelerator", "capacity", "sizes"}``. A search's sizes are dealt out
    in turn (the first chunk takes sizes 0, n, 2n, ...), so every chunk holds small and large
    clusters alike and the chunks take about as long as each other. The searches whose
    options are cheapest per device-hour come first: the workers take chunks in this order,
    and the points those find rule out the most sizes of later chunks
    (:mod:`planner.capacity.pruning`).
    """
    options = list(options)
    wanted: dict[tuple[str, str], set[int]] = defaultdict(set)
    for option in options:
        wanted[option.search_key].update(option.sizes(node_size(option.accelerator)))
    cheapest = _cheapest_price(options)
    chunks = []
    for accelerator, capacity in sorted(wanted, key=lambda key: (cheapest[key], key)):
        ordered = sorted(wanted[(accelerator, capacity)])
        count = max(1, -(-len(ordered) // sizes_per_chunk))
        for first in range(count):
            chunks.append(
                {"accelerator": accelerator, "capacity": capacity, "sizes": ordered[first::count]}
            )
    return [chunk for chunk in chunks if chunk["sizes"]]


def chunk_compute(
    scenario: Mapping[str, Any], chunk: Mapping[str, Any], pruner: Pruner | None = None
) -> dict[str, Any]:
    """Search one chunk: its points and misses, or the estimator's refusal as ``error``.

    With a ``pruner`` (:mod:`planner.capacity.pruning`) the sizes that cannot change the
    plan are not searched but listed in ``skipped``. The sizes that may meet both limits go
    first (they are searched anyway), then the others, each group largest first: fast
    points are the ones that rule slow sizes out.
    """
    searched = search_scenario(scenario, chunk["capacity"])
    try:
        floor = _floor(searched, chunk) if pruner is not None else None
        if pruner is None or floor is None:
            found = capacity_points(searched, chunk["accelerator"], chunk["sizes"])
        else:
            found = _pruned_points(searched, chunk, pruner, floor)
    except ScenarioError as error:
        return {**chunk, "points": [], "misses": [], "error": f"{error.key}: {error.reason}"}
    return {**chunk, **found}


def _floor(scenario: Mapping[str, Any], chunk: Mapping[str, Any]) -> float | None:
    """The accelerator's floor of GPU-hours; None when the estimator refuses it (the chunk
    is then searched in full, so the refusal reaches the plan's notes as before)."""
    cluster = {"accelerator": chunk["accelerator"], "num_gpus": max(chunk["sizes"])}
    try:
        return ideal_gpu_hours(scenario, cluster)
    except ScenarioError:
        return None


def _pruned_points(
    scenario: Mapping[str, Any], chunk: Mapping[str, Any], pruner: Pruner, floor: float
) -> dict[str, Any]:
    accelerator, capacity = chunk["accelerator"], chunk["capacity"]
    points: dict[int, dict[str, Any]] = {}
    misses, skipped = [], []
    first = [s for s in chunk["sizes"] if pruner.may_meet(accelerator, capacity, s, floor)]
    rest = sorted(set(chunk["sizes"]) - set(first), reverse=True)
    for size in [*sorted(first, reverse=True), *rest]:
        if not pruner.can_matter(accelerator, capacity, size, floor):
            skipped.append(size)
            continue
        found = capacity_points(scenario, accelerator, [size])
        misses += found["misses"]
        for point in found["points"]:
            points[size] = point
            pruner.learn(accelerator, capacity, point)
    order = list(chunk["sizes"])
    return {
        "points": [points[size] for size in order if size in points],
        "misses": [size for size in order if size in misses],
        "skipped": [size for size in order if size in skipped],
    }


def plan_pruner(
    options: Iterable[PricedOption], *, deadline_days: float, budget: Decimal | None
) -> Pruner:
    """A :class:`~planner.capacity.pruning.Pruner` for a plan's options and limits."""
    offers: dict[SearchSize, list[Priced]] = defaultdict(list)
    for option in options:
        for size in option.sizes(node_size(option.accelerator)):
            offers[(*option.search_key, size)].append(option)
    return Pruner(offers, deadline_days, budget)


def meets(point: Mapping[str, Any], *, deadline_days: float, budget: Decimal | None) -> bool:
    """On time and within budget; a point exactly on a limit meets it."""
    return point["training_days"] <= deadline_days and (
        budget is None or Decimal(point["cost"]) <= budget
    )


def point_deadline(point: Mapping[str, Any], deadline_days: float) -> dict[str, Any] | None:
    """The point's deadline check as JSON; None for a point searched before points carried
    their Monte Carlo days."""
    spread = point.get("training_days_spread")
    if spread is None:
        return None
    quantiles = point.get("training_days_quantiles")
    return deadline_check(spread, deadline_days, quantiles).as_dict()


def _priced(
    point: Mapping[str, Any], option: PricedOption, index: int, deadline_days: float
) -> dict[str, Any]:
    original, cost = option.cost(point["gpu_hours"], point["num_gpus"])
    minimum = option.minimum_spend(point["num_gpus"])
    return {
        **point,
        "deadline": point_deadline(point, deadline_days),
        "option": index,
        "option_key": option.key,
        "price_per_gpu_hour": str(option.price_per_gpu_hour),
        "cost": cost,
        "cost_original": str(original),
        "original_currency": option.original_currency,
        "minimum_spend": None if minimum is None else str(minimum),
        "commitment_binds": minimum is not None and original == money(minimum),
    }


def _serialised(point: Mapping[str, Any]) -> dict[str, Any]:
    # The quantiles have given the point its verdict; the plan keeps the spread, not the grid.
    kept = {key: value for key, value in point.items() if key != "training_days_quantiles"}
    return {**kept, "cost": str(point["cost"])}


def plan_merge(
    options: list[PricedOption],
    chunk_results: Iterable[Mapping[str, Any]],
    *,
    deadline_days: float,
    budget: Decimal | None,
) -> dict[str, Any]:
    """Price every searched point for every option that offers its size; JSON-ready.

    Returns ``feasible`` (meeting both limits, cheapest first, then fastest), ``frontier``
    (no other point both cheaper and faster, fastest first), ``points`` (the chart's: the
    frontier and the feasible points, each option and size once), ``notes`` (accelerators
    the estimator refused) and ``points_evaluated``. A point's ``option`` is its index in
    ``options``; money is decimal text in the plan's currency.
    """
    found: dict[tuple[str, str, int], dict[str, Any]] = {}
    notes: list[str] = []
    evaluated = skipped = 0
    for result in sorted(chunk_results, key=lambda r: (r["accelerator"], r["capacity"])):
        if result.get("error"):
            note = f"{result['accelerator']}: {result['error']}"
            notes += [] if note in notes else [note]
        evaluated += len(result["points"]) + len(result["misses"])
        skipped += len(result.get("skipped", []))
        for point in result["points"]:
            found[(result["accelerator"], result["capacity"], point["num_gpus"])] = point
    priced = []
    for index, option in enumerate(options):
        for size in option.sizes(node_size(option.accelerator)):
            point = found.get((*option.search_key, size))
            if point is not None:
                priced.append(_priced(point, option, index, deadline_days))
    feasible = sorted(
        (p for p in priced if meets(p, deadline_days=deadline_days, budget=budget)),
        key=lambda p: (p["cost"], p["training_days"], p["option"], p["num_gpus"]),
    )
    frontier = pareto_frontier(priced)
    return {
        "feasible": [_serialised(p) for p in feasible],
        "frontier": [_serialised(p) for p in frontier],
        "points": [_serialised(p) for p in _chart_points(frontier, feasible)],
        "notes": notes,
        "points_evaluated": evaluated,
        "points_skipped": skipped,
    }


def _chart_points(*groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[int, int]] = set()
    points = []
    for group in groups:
        for point in group:
            mark = (point["option"], point["num_gpus"])
            if mark not in seen:
                seen.add(mark)
                points.append(point)
    return points


def capacity_plan(
    scenario: Mapping[str, Any],
    options: list[PricedOption],
    *,
    deadline_days: float,
    budget: Decimal | None,
    exhaustive: bool = False,
) -> dict[str, Any]:
    """A whole plan in this process: every chunk, then :func:`plan_merge`. A saved plan runs
    the same chunks on the workers; this is what it must equal.

    Unless ``exhaustive``, sizes that cannot change the result are skipped
    (:mod:`planner.capacity.pruning`), in :func:`plan_chunks`' order. The result equals the
    exhaustive plan's but for ``points_evaluated`` and ``points_skipped``.
    """
    chunks = plan_chunks(options)
    if exhaustive:
        results = [chunk_compute(scenario, chunk) for chunk in chunks]
    else:
        pruner = plan_pruner(options, deadline_days=deadline_days, budget=budget)
        parts = _in_two_passes(scenario, chunks, pruner)
        results = [chunk_compute(scenario, part, pruner) for part in parts]
    return plan_merge(options, results, deadline_days=deadline_days, budget=budget)


def _in_two_passes(
    scenario: Mapping[str, Any], chunks: list[dict[str, Any]], pruner: Pruner
) -> list[dict[str, Any]]:
    """Every chunk's sizes that may meet both limits, then the rest of every chunk: by the
    second pass, each point that had to be searched anyway can rule a size out."""
    first, then = [], []
    for chunk in chunks:
        floor = _floor(search_scenario(scenario, chunk["capacity"]), chunk)
        key = (chunk["accelerator"], chunk["capacity"])
        early = [s for s in chunk["sizes"] if floor is None or pruner.may_meet(*key, s, floor)]
        first.append({**chunk, "sizes": early})
        then.append({**chunk, "sizes": [s for s in chunk["sizes"] if s not in early]})
    return [part for part in first + then if part["sizes"]]


def _cheapest_price(options: Iterable[PricedOption]) -> dict[tuple[str, str], Decimal]:
    cheapest: dict[tuple[str, str], Decimal] = {}
    for option in options:
        price = option.price_per_gpu_hour
        cheapest[option.search_key] = min(price, cheapest.get(option.search_key, price))
    return cheapest
