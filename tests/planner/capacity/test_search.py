"""Capacity planning: the priced options built from the demo price data, and how a plan
prices them (in one process: :func:`planner.capacity.search.capacity_plan`)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from estimator.core import estimate, load_catalog
from estimator.core.deadline import finish_probability
from organisations.demo import demo_organisation
from planner.capacity.search import (
    PricedOption,
    capacity_options,
    capacity_plan,
    capacity_scenario,
    chunk_compute,
    deadline_days,
    plan_chunks,
    plan_merge,
    point_deadline,
)
from planner.scenarios.budget_figures import commitment_minimum
from planner.scenarios.prices import price_describe, price_get, price_key_parse
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import Accelerator, PriceBook, PriceEntry, PricingType
from pricing.selectors import money_convert, onprem_profile_cost
from pricing.services import quote_create
from tests.planner.conftest import example_quote, onprem_profile

pytestmark = pytest.mark.django_db

TOKENS = 2e12  # Llama 3 8B on 2 T tokens: days to weeks on a few hundred GPUs


@pytest.fixture
def book(prices: None) -> PriceBook:
    return PriceBook.objects.get(name=EXAMPLE_BOOK_NAME)


def _options(book: PriceBook | None, **changes: Any) -> Any:
    arguments = {
        "book": book,
        "include_quotes": False,
        "include_onprem": False,
        "currency": "USD",
        "max_gpus": 512,
        "on": timezone.localdate(),
        "viewer": demo_organisation(),
        **changes,
    }
    return capacity_options(**arguments)


Deal = tuple[str, str, int]


def _cheapest_listed(book: PriceBook, *, spot: bool) -> dict[Deal, Decimal]:
    entries = PriceEntry.objects.filter(book=book, data_flag="")
    if not spot:
        entries = entries.exclude(pricing_type=PricingType.SPOT)
    catalog = load_catalog()
    cheapest: dict[Deal, Decimal] = {}
    for entry in entries.select_related("accelerator"):
        catalog_id = entry.accelerator.catalog_id
        if catalog_id in catalog:
            deal = (catalog_id, entry.pricing_type, entry.minimum_term_months or 0)
            price = entry.price_per_accelerator_hour
            cheapest[deal] = min(price, cheapest.get(deal, price))
    return cheapest


def _deals(options: list[PricedOption]) -> dict[Deal, Decimal]:
    return {
        (o.accelerator, o.pricing_type, o.term_months or 0): o.price_per_gpu_hour for o in options
    }


def test_a_book_gives_its_cheapest_unflagged_price_per_accelerator_and_deal(
    book: PriceBook,
) -> None:
    built = _options(book)
    deals = _deals(built.options)
    assert len(deals) == len(built.options)  # one option per accelerator and deal
    assert deals == _cheapest_listed(book, spot=False)
    prices = {
        o.accelerator: o.price_per_gpu_hour
        for o in built.options
        if o.pricing_type == PricingType.ON_DEMAND
    }
    assert {option.max_gpus for option in built.options} == {512}
    assert all(option.source == "Price book" for option in built.options)
    # The cheapest unflagged on-demand H100 in the demo book is Nebius at 2.95 USD.
    assert prices["H100-SXM"] == Decimal("2.95")


def test_spot_prices_count_only_when_asked(book: PriceBook) -> None:
    options = _options(book, include_spot=True).options
    assert _deals(options) == _cheapest_listed(book, spot=True)
    spot = [o for o in options if o.accelerator == "H100-SXM" and o.capacity == "spot"]
    assert spot
    assert spot[0].price_per_gpu_hour < Decimal("2.95")


def test_a_quote_is_capped_at_the_accelerators_it_covers(prices: None) -> None:
    quote = example_quote()
    for limit, expected in ((1024, quote.accelerator_count), (64, 64)):
        [option] = _options(None, include_quotes=True, max_gpus=limit).options
        assert (option.accelerator, option.max_gpus) == ("H100-SXM", expected)
        assert option.price_per_gpu_hour == quote.price_per_accelerator_hour
        assert option.source == "Vendor quote"


def test_an_onprem_profile_costs_its_cost_of_ownership(prices: None) -> None:
    profile = onprem_profile()
    [option] = _options(None, include_onprem=True).options
    expected = onprem_profile_cost(profile=profile).price_per_gpu_hour.quantize(Decimal("0.0001"))
    assert (option.accelerator, option.price_per_gpu_hour) == ("H100-SXM", expected)


def test_each_option_is_named_as_its_price_record_describes_it(book: PriceBook) -> None:
    built = _options(book, include_quotes=True, include_onprem=True)
    kinds = {option.source for option in built.options}
    assert kinds == {"Price book", "Vendor quote", "On-prem"}
    for option in built.options:
        record = price_get(*price_key_parse(option.key))
        assert record is not None
        described = price_describe(record)
        assert (option.source, option.label) == (described.kind, described.name)
        assert option.accelerator == described.accelerator
        assert option.original_price == described.price_per_gpu_hour
        assert option.original_currency == described.currency


def test_deadline_days_counts_whole_days_from_today() -> None:
    today = date(2025, 2, 1)
    assert deadline_days(date(2025, 3, 1), today=today) == 28
    assert deadline_days(date(2025, 2, 2), today=today) == 1
    assert deadline_days(today, today=today) == 0


def test_prices_in_another_currency_are_converted_with_the_rate_named(prices: None) -> None:
    today = timezone.localdate()
    quote_create(
        user=None,
        organisation=demo_organisation(),
        vendor="Euro Compute GmbH",
        reference="EU-1",
        accelerator=Accelerator.objects.get(catalog_id="A100-80GB-SXM"),
        accelerator_count=128,
        price_per_accelerator_hour=Decimal("2.00"),
        currency="EUR",
        valid_from=today,
        valid_until=today + timedelta(days=30),
    )
    options = {o.label: o for o in _options(None, include_quotes=True).options}
    euro = options["Euro Compute GmbH EU-1"]
    rate = money_convert(amount=Decimal(1), from_currency="EUR", to_currency="USD", on=today)
    assert euro.price_per_gpu_hour == Decimal("2.00") * rate.rate
    assert (euro.original_price, euro.original_currency) == (Decimal("2.00"), "EUR")
    assert euro.rate_note.startswith("EUR→USD")


def test_accelerators_the_estimator_lacks_are_skipped_with_a_reason(prices: None) -> None:
    custom = Accelerator.objects.create(
        catalog_id="ACME-X1", name="Acme X1", vendor="Acme", memory_gib=64,
        memory_bandwidth_tbs=2.0, peak_tflops_bf16=400, is_custom=True,
    )  # fmt: skip
    profile = onprem_profile()
    profile.accelerator = custom
    profile.save()
    built = _options(None, include_onprem=True)
    assert built.options == []
    assert built.skipped == [f"on-prem '{profile.name}': no catalog accelerator"]


def _plan(
    book: PriceBook | None, *, days: float = 12, budget: Decimal | None = None, **kw: Any
) -> tuple[list[PricedOption], dict[str, Any], dict[str, Any]]:
    built = _options(book, **kw)
    scenario = capacity_scenario(preset_id="llama3-8b", tokens=TOKENS)
    return (
        built.options,
        scenario,
        capacity_plan(scenario, built.options, deadline_days=days, budget=budget),
    )


def test_the_plan_meets_the_deadline_and_reproduces_with_the_estimator(book: PriceBook) -> None:
    options, scenario, plan = _plan(book)
    assert plan["feasible"]
    assert all(point["training_days"] <= 12 for point in plan["feasible"])
    costs = [Decimal(point["cost"]) for point in plan["feasible"]]
    assert costs == sorted(costs)
    # The cheapest point is what the estimator itself says about that cluster and layout.
    best = plan["feasible"][0]
    spec = {
        **scenario,
        "cluster": {"accelerator": best["accelerator"], "num_gpus": best["num_gpus"]},
        "parallelism": best["parallelism"],
    }
    again = estimate(spec)
    assert again["training_days"] == pytest.approx(best["training_days"], rel=1e-9)
    price = options[best["option"]].price_per_gpu_hour
    hand = (Decimal(repr(again["gpu_hours"])) * price).quantize(Decimal("0.01"))
    assert Decimal(best["cost"]) == hand
    # The frontier: faster points cost more.
    frontier = plan["frontier"]
    assert [p["training_days"] for p in frontier] == sorted(p["training_days"] for p in frontier)
    frontier_costs = [Decimal(p["cost"]) for p in frontier]
    assert frontier_costs == sorted(frontier_costs, reverse=True)


def test_chunks_of_any_size_in_any_order_merge_to_the_same_plan(book: PriceBook) -> None:
    options, scenario, _ = _plan(book, max_gpus=256, budget=Decimal("400000"))
    whole = capacity_plan(
        scenario, options, deadline_days=12, budget=Decimal("400000"), exhaustive=True
    )
    for per_chunk in (1, 4, 1000):
        chunks = plan_chunks(options, sizes_per_chunk=per_chunk)
        assert all(len(chunk["sizes"]) <= per_chunk for chunk in chunks)
        results = [chunk_compute(scenario, chunk) for chunk in reversed(chunks)]
        merged = plan_merge(options, results, deadline_days=12, budget=Decimal("400000"))
        assert merged == whole


def test_a_chunk_holds_small_and_large_clusters_alike(book: PriceBook) -> None:
    options = _options(book, max_gpus=4096).options
    for chunk in plan_chunks(options, sizes_per_chunk=6):
        sizes = chunk["sizes"]
        assert sizes == sorted(sizes)
        assert len(sizes) <= 6
    h100 = [c for c in plan_chunks(options) if c["accelerator"] == "H100-SXM"]
    smallest = {min(c["sizes"]) for c in h100}
    assert len(h100) > 1
    assert max(smallest) < 64


def test_a_committed_quote_costs_at_least_its_minimum_spend_at_every_size(
    prices: None,
) -> None:
    """The demo's 12-month quote for 256 H100s: however few GPUs a plan uses of it, the
    commitment is paid whole (2.10 USD x 256 x 12 x 730 h = 4,709,376 USD), as a run of it
    is charged (``docs/planning.md``)."""
    quote = example_quote()
    options, _, plan = _plan(None, include_quotes=True, days=10_000)
    [option] = options
    minimum = commitment_minimum(
        quote.price_per_accelerator_hour, quote.accelerator_count, quote.term_months
    )
    assert minimum == Decimal("4709376.00")
    assert plan["feasible"]
    for point in plan["feasible"]:
        by_hours = (Decimal(repr(point["gpu_hours"])) * option.original_price).quantize(
            Decimal("0.01")
        )
        assert Decimal(point["cost"]) == max(by_hours, minimum)
        assert point["commitment_binds"] == (by_hours < minimum)
    assert min(Decimal(p["cost"]) for p in plan["feasible"]) == minimum


def test_an_entry_sold_from_a_minimum_count_offers_no_smaller_cluster() -> None:
    reserved = PricedOption(
        key="price_entry:1", source="Price book", label="x", accelerator="H100-SXM",
        price_per_gpu_hour=Decimal("2.00"), original_price=Decimal("2.00"),
        original_currency="USD", max_gpus=1024, min_gpus=64,
        pricing_type=PricingType.RESERVED_1Y, term_months=12,
    )  # fmt: skip
    assert min(reserved.sizes(8)) == 64
    assert max(reserved.sizes(8)) == 1024
    # A book entry's commitment covers the cluster bought: it grows with the size.
    assert reserved.minimum_spend(128) == Decimal("2.00") * 128 * 12 * 730
    original, converted = reserved.cost(gpu_hours=1000.0, num_gpus=128)
    assert original == converted == Decimal("2242560.00")
    assert reserved.from_json(reserved.as_json()) == reserved


def test_options_in_another_currency_cost_the_converted_run_cost(prices: None) -> None:
    option = PricedOption(
        key="vendor_quote:9", source="Vendor quote", label="x", accelerator="H100-SXM",
        price_per_gpu_hour=Decimal("2.20"), original_price=Decimal("2.00"),
        original_currency="EUR", max_gpus=64, rate=Decimal("1.1"),
    )  # fmt: skip
    original, converted = option.cost(gpu_hours=1234.567, num_gpus=64)
    assert original == Decimal("2469.13")  # 2,469.134 EUR, rounded as the run rounds it
    assert converted == Decimal("2716.04")  # then converted and rounded to the cent


def test_spot_options_search_runs_that_are_preempted(book: PriceBook) -> None:
    scenario = capacity_scenario(preset_id="llama3-8b", tokens=TOKENS)
    steady = chunk_compute(scenario, {"accelerator": "H100-SXM", "capacity": "", "sizes": [64]})
    spot = chunk_compute(scenario, {"accelerator": "H100-SXM", "capacity": "spot", "sizes": [64]})
    assert spot["points"][0]["gpu_hours"] > steady["points"][0]["gpu_hours"]


def test_an_accelerator_the_estimator_refuses_is_a_note_not_a_failure() -> None:
    scenario = capacity_scenario(preset_id="llama3-8b", tokens=TOKENS)
    found = chunk_compute(scenario, {"accelerator": "NOPE-1", "capacity": "", "sizes": [8]})
    assert found["points"] == []
    assert "NOPE-1" in found["error"]


def test_each_option_has_its_deadline_verdict_from_its_monte_carlo(book: PriceBook) -> None:
    options, scenario, plan = _plan(book, days=12)
    points = plan["points"]
    assert points
    for point in points:
        spread, check = point["training_days_spread"], point["deadline"]
        assert "training_days_quantiles" not in point  # the grid gave the verdict; not kept
        assert check["days_available"] == 12
        assert (check["p50_days"], check["p90_days"]) == (spread["p50"], spread["p90"])
        late_p50, late_p90 = spread["p50"] > 12, spread["p90"] > 12
        verdict = "misses_p50" if late_p50 else "misses_p90" if late_p90 else "meets"
        assert check["verdict"] == verdict
        assert 0.0 <= check["probability"] <= 1.0
        assert (check["probability"] >= 0.5) == (spread["p50"] <= 12)
    # The chance is the one the point's own quantiles give.
    first = points[0]
    accelerator, capacity = options[first["option"]].search_key
    chunk = {"accelerator": accelerator, "capacity": capacity, "sizes": [first["num_gpus"]]}
    (searched,) = chunk_compute(scenario, chunk)["points"]
    grid = searched["training_days_quantiles"]
    assert first["deadline"]["probability"] == finish_probability(grid, 12)


def test_a_point_searched_before_the_spread_has_no_verdict() -> None:
    assert point_deadline({"training_days": 10.0}, 12) is None
    verdict = point_deadline({"training_days_spread": {"p50": 10.0, "p90": 13.0}}, 12)
    assert verdict is not None
    assert (verdict["text"], verdict["probability"]) == ("meets at P50, misses at P90", None)
