"""A run's whole bill: priced at the storage and egress prices of its book and provider,
frozen when it starts, with the carbon of its region's grid."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from planner.scenarios.bill import BILLED_GB_BYTES, checkpoint_size
from planner.scenarios.models import Project, Scenario
from pricing.grid import grid_intensity
from pricing.models import PriceEntry, UsagePrice
from tests.planner.conftest import _client, example_quote, quote_scenario, run_finished

pytestmark = pytest.mark.django_db


def test_a_runs_bill_uses_its_books_prices_and_its_regions_grid(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    entry = scenario.price
    assert isinstance(entry, PriceEntry)
    storage = UsagePrice.objects.get(
        book=entry.book, provider=entry.provider, kind=UsagePrice.Kind.STORAGE
    )
    assert run.budget is not None
    assert run.result is not None
    bill = run.budget["bill"]
    lines = {line["key"]: line for line in bill["lines"]}
    # Hand computation, as docs/planning.md writes it: size x kept x months x price.
    gb = Decimal(repr(checkpoint_size(run.result).bytes)) / Decimal(BILLED_GB_BYTES)
    # Stored for the run's P50 days (in months of 730 h) and 3 months after it.
    months = Decimal(repr(float(run.budget["training_days"]["p50"]) / (730 / 24) + 3.0))
    expected = (gb * 5 * months * storage.price).quantize(Decimal("0.01"))
    assert Decimal(lines["checkpoint_storage"]["amount"]) == expected
    assert run.price["usage"]["storage_per_gb_month"]["price"] == str(storage.price)
    grid = grid_intensity(entry.provider.slug, entry.region)
    assert grid is not None
    kwh = float(run.budget["energy_kwh"])
    assert lines["carbon"]["quantity"] == pytest.approx(kwh * float(grid.gco2e_per_kwh) / 1e6)
    counted = sum(
        (Decimal(line["amount"]) for line in bill["lines"] if line["amount"] and line["in_total"]),
        Decimal(0),
    )
    assert Decimal(bill["total"]) == counted


def test_the_prices_are_frozen_when_the_run_starts(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    entry = scenario.price
    assert isinstance(entry, PriceEntry)
    first = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    UsagePrice.objects.filter(book=entry.book).delete()  # the book's usage prices go away
    assert first.budget is not None
    assert first.budget["bill"]["lines"][0]["amount"] is not None  # the finished run keeps them
    second = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    assert second.budget is not None
    assert second.budget["bill"]["lines"][0]["amount"] is None
    assert "checkpoint_storage" in second.budget["bill"]["unpriced"]


def test_a_run_on_a_quote_says_its_bill_has_no_storage_or_egress_price(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    scenario = quote_scenario(project, requester)
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    assert run.budget is not None
    bill = run.budget["bill"]
    vendor = example_quote().vendor
    assert bill["total"] == "0.00"
    assert bill["total_label"] == (
        f"Total of priced lines; storage and egress have no price from {vendor}"
    )
    lines = {line["key"]: line for line in bill["lines"]}
    assert lines["egress"]["note"] == f"no price: {vendor} gives no egress price"
    page = _client(requester).get(reverse("planner:run-detail", args=[run.pk])).content.decode()
    assert f"storage and egress have no price from {vendor}" in page
    assert "Total of the priced lines" not in page
