"""Capacity planning: the priced options built from the demo price data, and the page."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from estimator.core import estimate, load_catalog, search
from estimator.core.capacity import meets_limits
from planner.capacity import (
    TIME_BUDGET_S,
    capacity_options,
    capacity_plan,
    capacity_scenario,
    deadline_days,
)
from planner.models import Scenario
from planner.organisations.demo import demo_organisation
from planner.prices import price_describe, price_get, price_key_parse
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


def _cheapest_listed(book: PriceBook, *, spot: bool) -> dict[str, Decimal]:
    entries = PriceEntry.objects.filter(book=book, data_flag="")
    if not spot:
        entries = entries.exclude(pricing_type=PricingType.SPOT)
    catalog = load_catalog()
    cheapest: dict[str, Decimal] = {}
    for entry in entries.select_related("accelerator"):
        catalog_id = entry.accelerator.catalog_id
        if catalog_id in catalog:
            price = entry.price_per_accelerator_hour
            cheapest[catalog_id] = min(price, cheapest.get(catalog_id, price))
    return cheapest


def test_a_book_gives_its_cheapest_unflagged_on_demand_price_per_accelerator(
    book: PriceBook,
) -> None:
    built = _options(book)
    prices = {option.accelerator: option.price_per_gpu_hour for option in built.options}
    assert len(prices) == len(built.options)  # one option per accelerator
    assert prices == _cheapest_listed(book, spot=False)
    assert {option.max_gpus for option in built.options} == {512}
    assert all(option.source == "Price book" for option in built.options)
    # The cheapest unflagged on-demand H100 in the demo book is Nebius at 2.95 USD.
    assert prices["H100-SXM"] == Decimal("2.95")


def test_spot_prices_count_only_when_asked(book: PriceBook) -> None:
    prices = {
        o.accelerator: o.price_per_gpu_hour for o in _options(book, include_spot=True).options
    }
    assert prices == _cheapest_listed(book, spot=True)
    assert prices["H100-SXM"] < Decimal("2.95")


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


def test_the_plan_meets_the_deadline_and_reproduces_with_the_estimator(book: PriceBook) -> None:
    built = _options(book)
    scenario = capacity_scenario(preset_id="llama3-8b", tokens=TOKENS)
    plan = capacity_plan(scenario, built.options, deadline_days=12, budget=None)
    assert plan.feasible
    assert plan.seconds < TIME_BUDGET_S
    assert all(point["training_days"] <= 12 for point in plan.feasible)
    costs = [point["cost"] for point in plan.feasible]
    assert costs == sorted(costs)
    # The cheapest point is what the estimator itself says about that cluster and layout.
    best = plan.feasible[0]
    spec = {
        **scenario,
        "cluster": {"accelerator": best["accelerator"], "num_gpus": best["num_gpus"]},
        "parallelism": best["parallelism"],
    }
    again = estimate(spec)
    assert again["training_days"] == pytest.approx(best["training_days"], rel=1e-9)
    price = float(best["option"].price_per_gpu_hour)
    assert best["cost"] == pytest.approx(again["gpu_hours"] * price, rel=1e-9)
    # The frontier: faster points cost more.
    frontier = plan.frontier
    assert [p["training_days"] for p in frontier] == sorted(p["training_days"] for p in frontier)
    assert [p["cost"] for p in frontier] == sorted((p["cost"] for p in frontier), reverse=True)


def _page(client: Client, **values: Any) -> Any:
    query = {
        "model_preset": "llama3-8b",
        "tokens": "2T",
        "deadline": (timezone.localdate() + timedelta(days=12)).isoformat(),
        "budget": "",
        "currency": "USD",
        "max_gpus": "512",
        "book": str(PriceBook.objects.get(name=EXAMPLE_BOOK_NAME).pk),
        **values,
    }
    return client.get(reverse("planner:capacity"), {k: v for k, v in query.items() if v != ""})


@pytest.fixture
def client_of(requester: User) -> Client:
    client = Client()
    client.force_login(requester)
    return client


def test_the_page_lists_only_the_accelerators_that_meet_the_deadline(
    client_of: Client, prices: None
) -> None:
    response = _page(client_of)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="verdict"' in body
    shown = {row["accelerator"] for row in response.context["feasible_rows"]}
    assert "H100-SXM" in shown
    assert "A100-80GB-SXM" not in shown
    # Independently: even the largest A100 cluster allowed (512) needs more than 12 days.
    scenario = capacity_scenario(preset_id="llama3-8b", tokens=TOKENS)
    largest = {**scenario, "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 512}}
    assert search(largest, top_k=1)["results"][0]["training_days"] > 12
    for testid in ("capacity-chart", "feasible-table", "frontier-table", "plan-seconds"):
        assert f'data-testid="{testid}"' in body
    assert 'id="capacity-data"' in body


def test_an_impossible_deadline_says_no_option_meets_it(client_of: Client, prices: None) -> None:
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    response = _page(client_of, model_preset="llama3-70b", tokens="15T", deadline=tomorrow)
    body = response.content.decode()
    assert response.context["plan"].feasible == []
    assert 'data-testid="no-option"' in body
    assert "No option meets the deadline (1 days)" in body
    assert 'data-testid="frontier-table"' in body  # still shows what is possible


def test_a_budget_too_small_leaves_no_option(client_of: Client, prices: None) -> None:
    response = _page(client_of, budget="1000")
    assert response.context["plan"].feasible == []
    assert "and the budget (1,000 USD)" in response.content.decode()


def test_the_page_marks_each_point_by_the_estimators_rule(client_of: Client, prices: None) -> None:
    deadline = timezone.localdate() + timedelta(days=20)
    response = _page(client_of, budget="2000000", deadline=deadline.isoformat())
    days = response.context["deadline_days"]
    assert days == deadline_days(deadline, today=timezone.localdate()) == 20
    rows = response.context["frontier_rows"]
    assert {row["meets"] for row in rows} == {True, False}
    for row in rows:
        assert row["meets"] == meets_limits(row, deadline_days=days, budget=2e6)
        assert row["late"] == (row["training_days"] > days)
    assert all(row["meets"] for row in response.context["feasible_rows"])
    chart = response.context["chart_data"]
    assert (chart["deadline_days"], chart["budget"]) == (20, 2e6)
    for point in chart["points"]:
        assert point["meets"] == meets_limits(
            {"training_days": point["x"], "cost": point["y"]}, deadline_days=20, budget=2e6
        )


def test_the_plan_can_take_the_model_of_an_existing_scenario(
    client_of: Client, scenario: Scenario
) -> None:
    response = _page(client_of, model_preset="", scenario=str(scenario.pk), tokens="")
    used = response.context["scenario_used"]
    assert used["model"] == scenario.spec["model"]
    assert used["training"]["tokens"] == scenario.spec["training"]["tokens"]


def test_another_organisations_scenario_cannot_be_used(outsider: User, scenario: Scenario) -> None:
    client = Client()
    client.force_login(outsider)
    response = _page(client, model_preset="", scenario=str(scenario.pk))
    assert "scenario" in response.context["form"].errors
    assert "plan" not in response.context


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"deadline": "2000-01-01"}, "deadline"),
        ({"model_preset": ""}, "model_preset"),
        ({"book": "", "include_quotes": "", "include_onprem": ""}, "book"),
        ({"currency": "XYZ"}, "currency"),
        ({"max_gpus": "100000"}, "max_gpus"),
        ({"tokens": "many"}, "tokens"),
    ],
)
def test_bad_capacity_input_shows_the_field_error(
    client_of: Client, prices: None, values: dict[str, str], field: str
) -> None:
    response = _page(client_of, **values)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert "plan" not in response.context


def test_the_empty_form_starts_from_sensible_defaults(client_of: Client, prices: None) -> None:
    response = client_of.get(reverse("planner:capacity"))
    form = response.context["form"]
    assert form["model_preset"].value() == "llama3-8b"
    assert form["book"].value() == PriceBook.objects.get(name=EXAMPLE_BOOK_NAME).pk
    assert "plan" not in response.context


def test_the_default_deadline_fills_the_date_picker(client_of: Client, prices: None) -> None:
    """In ISO, as ``<input type="date">`` needs: en-gb's 22/04/2027 left the field blank."""
    body = client_of.get(reverse("planner:capacity")).content.decode()
    default = (timezone.localdate() + timedelta(days=60)).isoformat()
    assert f'type="date" name="deadline" value="{default}"' in body
    response = _page(client_of, deadline="22/04/2027")  # not ISO: refused, never guessed
    assert "deadline" in response.context["form"].errors
