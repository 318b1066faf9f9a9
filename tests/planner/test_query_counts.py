"""The main pages and API lists make as many queries for five of everything as for one.

The pages are those ``benchmarks/load.py`` browses. Each is counted once with one scenario,
run, comparison and budget request, then again after four more of each (more runs of the
page's own scenario, more requests with alternatives, a larger comparison): an N+1 shows
as a count that grows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from planner.budgets.models import BudgetRequest
from planner.budgets.services import budget_request_create, budget_request_submit
from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
from planner.scenarios.services import comparison_create
from pricing.models import PriceBook
from tests.planner.conftest import Capture, _add_scenario, _client, _finished_run, list_price

pytestmark = pytest.mark.django_db

#: Page name -> its path, given the first scenario, run, comparison and request.
PAGES: dict[str, Callable[[dict[str, Any]], str]] = {
    "dashboard": lambda o: "/",
    "projects": lambda o: "/projects/",
    "project": lambda o: f"/projects/{o['project'].pk}/",
    "project compare": lambda o: f"/projects/{o['project'].pk}/compare/",
    "scenario": lambda o: f"/scenarios/{o['scenario'].pk}/",
    "run": lambda o: f"/runs/{o['run'].pk}/",
    "comparison": lambda o: f"/comparisons/{o['comparison'].pk}/",
    "compare across": lambda o: "/compare/",
    "budgets": lambda o: "/budgets/",
    "budget request": lambda o: f"/budgets/{o['request'].pk}/",
    "pricing catalog": lambda o: "/pricing/catalog/",
    "price books": lambda o: "/pricing/books/",
    "price book": lambda o: f"/pricing/books/{o['book'].pk}/",
    "api projects": lambda o: "/api/v1/projects/",
    "api scenarios": lambda o: "/api/v1/scenarios/",
    "api runs": lambda o: "/api/v1/runs/",
    "api comparisons": lambda o: "/api/v1/comparisons/",
    "api budgets": lambda o: "/api/v1/budgets/",
    "api budget": lambda o: f"/api/v1/budgets/{o['request'].pk}/",
}


#: Pages whose queries still grow, with where the loop is: the test fails once one is fixed,
#: so the entry is removed and the page held to a constant count from then on.
KNOWN_TO_GROW: dict[str, str] = {}


def _queries(client: Client, path: str) -> int:
    """The queries of the page at ``path``, once anything cached is warm."""
    assert client.get(path).status_code == 200, path
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200, path
    return len(captured.captured_queries)


def _request(
    user: User, run: EstimationRun, alternatives: list[EstimationRun], capture: Capture
) -> BudgetRequest:
    with capture(execute=False):
        request = budget_request_create(
            user=user, run=run, title=f"Run {run.pk}", justification="Cheapest.",
            alternatives=alternatives,
        )  # fmt: skip
        return budget_request_submit(user=user, request=request)


def _scenario_with_run(
    user: User, project: Project, name: str, gpus: int, capture: Capture
) -> tuple[Scenario, EstimationRun]:
    scenario = _add_scenario(user, project, name, "H100-SXM", gpus, list_price("H100-SXM"))
    return scenario, _finished_run(capture, user, scenario)


def _grow(objects: dict[str, Any], user: User, capture: Capture) -> None:
    """Four more scenarios with a run each, four more runs of the first scenario, four more
    requests (each with the other runs as alternatives) and a comparison of them all."""
    project: Project = objects["project"]
    runs = [objects["run"]]
    for number in range(4):
        runs.append(_finished_run(capture, user, objects["scenario"], seed=100 + number))
        gpus = (16, 32, 256, 512)[number]
        _, run = _scenario_with_run(user, project, f"more {number}", gpus, capture)
        runs.append(run)
    for run in runs[1:5]:
        _request(user, run, [other for other in runs if other != run][:3], capture)
    comparison: Comparison = objects["comparison"]
    comparison.scenarios.set(Scenario.objects.filter(project=project))
    objects["request"].alternatives.set(runs[1:4])


@pytest.fixture
def one_of_each(
    prices: None,
    requester: User,
    project: Project,
    django_capture_on_commit_callbacks: Capture,
) -> dict[str, Any]:
    capture = django_capture_on_commit_callbacks
    scenario, run = _scenario_with_run(requester, project, "H100 x64", 64, capture)
    second, _ = _scenario_with_run(requester, project, "H100 x128", 128, capture)
    comparison = comparison_create(
        user=requester, project=project, name="sizes", scenarios=[scenario, second]
    )
    return {
        "project": project,
        "scenario": scenario,
        "run": run,
        "comparison": comparison,
        "request": _request(requester, run, [], capture),
        "book": PriceBook.objects.filter(status="published").order_by("pk").first(),
    }


def test_the_main_pages_make_as_many_queries_for_five_of_everything_as_for_one(
    one_of_each: dict[str, Any],
    requester: User,
    django_capture_on_commit_callbacks: Capture,
) -> None:
    client = _client(requester)
    paths = {name: page(one_of_each) for name, page in PAGES.items()}
    before = {name: _queries(client, path) for name, path in paths.items()}
    _grow(one_of_each, requester, django_capture_on_commit_callbacks)
    after = {name: _queries(client, path) for name, path in paths.items()}
    grown = {name: (before[name], after[name]) for name in paths if after[name] != before[name]}
    unexpected = {name: counts for name, counts in grown.items() if name not in KNOWN_TO_GROW}
    assert not unexpected, f"queries (one of each, five of each) grow on: {unexpected}"
    fixed = set(KNOWN_TO_GROW) - set(grown)
    assert not fixed, f"no longer grow, remove them from KNOWN_TO_GROW: {fixed}"
