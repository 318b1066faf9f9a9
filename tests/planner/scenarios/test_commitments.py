"""A committed price shown as a commitment (planner/scenarios/commitments.py): 64 H100 on the
demo's example quote (256 H100 for 12 months, 4,709,376 USD) owe the whole commitment if the
run is its only use, and every page says so with the share used and the share idle, never as
the quote's 2.10 USD/GPU-h."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from planner.budgets.services import budget_request_create
from planner.budgets.signoff.tables import price_rows
from planner.scenarios.commitments import commitment_sentences, commitment_short
from planner.scenarios.models import EstimationRun, Project
from tests.planner.conftest import (
    _client,
    example_quote,
    finished_run,
    quote_scenario,
    scenario_add,
)

pytestmark = pytest.mark.django_db

COMMITTED_HOURS = 256 * 12 * 730  # 2,242,560 GPU-hours


@pytest.fixture
def on_quote(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    with django_capture_on_commit_callbacks(execute=False):
        return finished_run(quote_scenario(project, requester), requester)


def _use(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None
    return dict(run.budget["commitment"])


def _share(value: float) -> str:
    return f"{value * 100:.1f} %"


def test_the_run_keeps_the_commitment_and_the_share_it_uses(on_quote: EstimationRun) -> None:
    use, budget = _use(on_quote), on_quote.budget or {}
    hours = Decimal(budget["gpu_hours"]["p50"])
    assert use["minimum_spend"] == "4709376.00"
    assert (use["accelerators"], use["term_months"]) == (256, 12)
    assert use["committed_gpu_hours"] == str(COMMITTED_HOURS)
    assert use["used_share"] == pytest.approx(float(hours) / COMMITTED_HOURS, rel=1e-4)
    assert use["idle_share"] == pytest.approx(1 - use["used_share"], abs=1e-12)
    assert use["idle_share"] > 0.9  # 64 GPUs for days on a year of 256
    assert use["binds"] is True
    montecarlo = on_quote.montecarlo or {}
    p50_hours = Decimal(repr(float(montecarlo["gpu_hours"]["p50"])))
    expected = (Decimal("4709376") / p50_hours).quantize(Decimal("0.01"))
    assert Decimal(use["cost_per_used_gpu_hour"]) == expected


def test_the_sensitivity_is_centred_on_the_commitment_and_the_price_cannot_lower_it(
    on_quote: EstimationRun,
) -> None:
    moves = on_quote.sensitivity or {}
    assert moves["baseline"]["cost"] == 4709376.0  # not GPU-hours x 2.10
    price_bar = next(item for item in moves["inputs"] if item["key"] == "price")
    assert price_bar["cost"] == [4709376.0, 4709376.0]
    assert all(min(item["cost"]) >= 4709376.0 for item in moves["inputs"])


def test_the_run_page_shows_a_commitment_not_an_hourly_price(
    on_quote: EstimationRun, requester: User
) -> None:
    page = _client(requester).get(reverse("planner:run-detail", args=[on_quote.pk]))
    body = page.content.decode()
    use = _use(on_quote)
    assert "4,709,376 USD commitment, 12 months" in body
    assert f"{_share(use['idle_share'])} idle" in body
    assert "owed whether or not they are used" in body
    assert "the whole 4,709,376 USD is its cost" in body
    assert "256 GPUs x 12 months (2,242,560 GPU-hours)" in body
    days = float((on_quote.budget or {})["training_days"]["p50"])
    assert f"({days / (730 / 24):.1f} months) of the 12-month term" in body
    assert "at 2.1 USD per GPU-hour" not in body  # the cost per million tokens' old note


def test_texts_say_the_used_and_idle_share_and_the_cost_per_used_hour() -> None:
    price = {"currency": "USD", "price_per_gpu_hour": "2.1000000000", "minimum_spend": "4709376"}
    budget = {
        "commitment": {
            "minimum_spend": "4709376.00", "accelerators": 256, "term_months": 12,
            "committed_gpu_hours": "2242560", "used_gpu_hours": "186000",
            "used_share": 0.0829, "idle_share": 0.9171, "cost_per_used_gpu_hour": "25.32",
            "binds": True,
        }
    }  # fmt: skip
    assert commitment_short(price, budget) == (
        "4,709,376 USD commitment, 12 months · 8.3 % used, 91.7 % idle · 25.32 USD/used GPU-h"
    )
    sentences = commitment_sentences(price, budget)
    assert sentences[1] == (
        "This run uses 186,000 GPU-hours (P50), 8.3 % of it; 91.7 % is idle unless other work "
        "uses it."
    )
    assert "the quoted 2.10 USD/GPU-h holds only if every committed hour is used" in sentences[2]
    uncommitted = {"currency": "USD", "price_per_gpu_hour": "2.5"}
    assert commitment_short(uncommitted, {}) == ""
    assert commitment_sentences(uncommitted, None) == []


def test_the_compare_row_budget_page_pack_and_api_show_the_commitment(
    on_quote: EstimationRun, requester: User, requester_api: APIClient
) -> None:
    project = on_quote.scenario.project
    client = _client(requester)
    other = scenario_add(project, requester, "at a list price", 64)
    query = f"scenario={on_quote.scenario_id}&scenario={other.pk}"
    compare_page = client.get(f"{reverse('planner:project-compare', args=[project.pk])}?{query}")
    compare = compare_page.content.decode()
    assert 'data-testid="row-commitment">4,709,376 USD commitment, 12 months' in compare
    request = budget_request_create(
        user=requester, run=on_quote, title="Quote", justification="Commitment display."
    )
    budget_page = client.get(reverse("planner:budget-detail", args=[request.pk])).content.decode()
    assert 'data-testid="budget-commitment"' in budget_page
    assert "Commitment: 4,709,376 USD minimum spend" in budget_page
    rows = {label: value for label, value, _kind in price_rows(
        {"price": on_quote.price, "results": {"budget": on_quote.budget}}
    )}  # fmt: skip
    assert rows["Commitment (minimum spend)"] == Decimal("4709376.00")
    assert rows["Committed GPU-hours"] == Decimal(COMMITTED_HOURS)
    assert rows["Idle share (paid, unused by this run)"] == _use(on_quote)["idle_share"]
    api = requester_api.get(f"/api/v1/runs/{on_quote.pk}/").json()
    assert api["budget"]["commitment"] == _use(on_quote)


def test_the_price_picker_names_the_commitment_and_its_term(
    prices: None, project: Project, requester: User
) -> None:
    page = _client(requester).get(reverse("planner:scenario-create", args=[project.pk]))
    body = page.content.decode()
    quote = example_quote()
    assert quote.term_months == 12
    assert (
        "4,709,376 USD commitment: 256 GPUs x 12 months = 2,242,560 GPU-h, owed in full however "
        "short the run (2.10 USD/GPU-h only if all used)"
    ) in body


def test_the_scenario_page_shows_its_quote_as_a_commitment(
    prices: None, project: Project, requester: User
) -> None:
    scenario = quote_scenario(project, requester)
    page = _client(requester).get(scenario.get_absolute_url()).content.decode()
    assert "4,709,376 USD commitment, 12 months" in page
    assert "the quote&#x27;s 256 accelerators for 12 months" in page
    assert "if every committed hour is used" in page
