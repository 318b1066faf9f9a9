"""The diff of two runs (planner/scenarios/run_diff.py) and its page: the differences listed by
group, and the change of days and cost attributed one difference at a time, adding up to the
total.

Runs are started with ``run_start`` and executed with ``run_execute`` (the worker's service)
inside ``django_capture_on_commit_callbacks(execute=False)``.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from organisations.models import Organisation
from planner.budgets.models import BudgetRequest, BudgetState
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
)
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.run_diff import RunDiff, RunNotComparable, run_diff
from planner.scenarios.services import (
    project_create,
    run_execute,
    run_start,
    scenario_create,
    scenario_update,
)
from pricing.models import PriceEntry
from tests.planner.conftest import list_price, small_spec

pytestmark = pytest.mark.django_db

CENT = Decimal("0.01")
#: A stated layout for 64 GPUs other than the one the search picks for ``small_spec``.
STATED_LAYOUT = {"tp": 4, "pp": 1, "dp": 16, "micro_batch_size": 1, "zero_stage": 1,
                 "recompute": "selective"}  # fmt: skip


def _run(capture: Any, user: User, scenario: Scenario, seed: int = 3) -> EstimationRun:
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=seed, samples=200)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    assert finished.status == RunStatus.SUCCEEDED, finished.error
    return finished


def _other_price(scenario: Scenario) -> PriceEntry:
    """Another on-demand price of the scenario's accelerator, at a different price."""
    current = scenario.price_entry
    assert current is not None
    entry = (
        PriceEntry.objects.filter(
            accelerator__catalog_id=scenario.accelerator_id,
            pricing_type="on_demand",
            data_flag="",
            book=current.book,
        )
        .exclude(price_per_accelerator_hour=current.price_per_accelerator_hour)
        .first()
    )
    assert entry is not None, "the demo book has two on-demand H100 prices"
    return entry


def _assert_adds_up(diff: RunDiff) -> None:
    total_cost = diff.total_cost
    attributed_cost = diff.attributed_cost
    assert total_cost is not None
    assert attributed_cost is not None
    assert abs(attributed_cost - total_cost) <= CENT
    assert diff.attributed_days == pytest.approx(diff.total_days, abs=1e-9)


def _figures(run: EstimationRun) -> tuple[float, Decimal]:
    assert run.budget is not None
    return run.budget["training_days"]["deterministic"], Decimal(
        run.budget["cost"]["deterministic"]
    )


@pytest.fixture
def changed(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> tuple[EstimationRun, EstimationRun]:
    """A run of ``scenario``, then one with 1.5 x the tokens, another price and a stated
    layout."""
    before = _run(django_capture_on_commit_callbacks, requester, scenario)
    spec = copy.deepcopy(scenario.spec)
    spec["training"]["tokens"] = 3e11
    spec["parallelism"] = STATED_LAYOUT
    scenario = scenario_update(
        user=requester,
        scenario=scenario,
        spec=spec,
        price_source="price_entry",
        price=_other_price(scenario),
    )
    after = _run(django_capture_on_commit_callbacks, requester, scenario, seed=4)
    return before, after


# --- The diff ----------------------------------------------------------------------------------


def test_the_differences_are_listed_by_group(changed: tuple[EstimationRun, ...]) -> None:
    before, after = changed
    diff = run_diff(before, after)
    groups = {group.key: group for group in diff.groups}
    assert list(groups) == ["training", "layout", "price", "montecarlo"]
    tokens = groups["training"].changes
    assert [(c.path, c.before, c.after) for c in tokens] == [("training.tokens", 2e11, 3e11)]
    layout = {change.path: change for change in groups["layout"].changes}
    assert (layout["layout"].before, layout["layout"].after) == ("chosen by the search", "stated")
    assert layout["tp"].after == 4
    assert layout["recompute"].after == "selective"
    price = {change.path: change for change in groups["price"].changes}
    assert price["price_per_gpu_hour"].before == before.price["price_per_gpu_hour"]
    assert price["price_per_gpu_hour"].after == after.price["price_per_gpu_hour"]
    assert "id" in price
    assert groups["montecarlo"].attributed is False
    assert [change.path for change in groups["montecarlo"].changes] == ["seed"]


def test_the_attributions_add_up_to_the_total_change(changed: tuple[EstimationRun, ...]) -> None:
    before, after = changed
    diff = run_diff(before, after)
    assert [item.key for item in diff.attributions] == ["training", "layout", "price"]
    (days_before, cost_before), (days_after, cost_after) = _figures(before), _figures(after)
    assert diff.total_days == pytest.approx(days_after - days_before, abs=1e-12)
    assert diff.total_cost == cost_after - cost_before
    _assert_adds_up(diff)
    by_key = {item.key: item for item in diff.attributions}
    # 1.5 x the tokens is about 1.5 x the time at the same layout and price (the fixed
    # parts of the whole run, such as the ramp-up, do not grow)
    assert by_key["training"].days == pytest.approx(0.5 * days_before, rel=0.1)
    assert by_key["price"].days == 0  # the price moves only the cost
    assert by_key["price"].cost != 0


def test_identical_runs_show_no_differences_and_no_change(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    first = _run(django_capture_on_commit_callbacks, requester, scenario)
    second = _run(django_capture_on_commit_callbacks, requester, scenario)
    diff = run_diff(first, second)
    assert diff.identical
    assert diff.groups == ()
    assert diff.attributions == ()
    assert (diff.total_days, diff.total_cost) == (0.0, Decimal(0))


def test_a_changed_estimator_takes_the_residual(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    old = _run(django_capture_on_commit_callbacks, requester, scenario)
    new = _run(django_capture_on_commit_callbacks, requester, scenario)
    # as an older estimator would have stored it: 10 % slower
    assert old.result is not None
    assert old.budget is not None
    old.estimator_version = "0.0.9"
    old.result["training_days"] *= 1.1
    old.result["gpu_hours"] *= 1.1
    old.budget["training_days"]["deterministic"] *= 1.1
    old.budget["cost"]["deterministic"] = str(
        (Decimal(old.budget["cost"]["deterministic"]) * Decimal("1.1")).quantize(CENT)
    )
    old.save(update_fields=["estimator_version", "result", "budget"])
    diff = run_diff(old, new)
    assert [group.key for group in diff.groups] == ["estimator"]
    assert [item.key for item in diff.attributions] == ["estimator"]
    residual = diff.attributions[0]
    assert residual.days == pytest.approx(diff.total_days, abs=1e-9)
    assert residual.cost == diff.total_cost
    assert residual.days < 0
    assert diff.total_cost is not None
    assert diff.total_cost < 0
    _assert_adds_up(diff)


def test_a_layout_that_does_not_fit_the_new_cluster_is_counted_with_it(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    before = _run(django_capture_on_commit_callbacks, requester, scenario)
    scenario = scenario_update(user=requester, scenario=scenario, spec=small_spec(num_gpus=128))
    after = _run(django_capture_on_commit_callbacks, requester, scenario)
    diff = run_diff(before, after)
    assert [item.key for item in diff.attributions] == ["cluster+layout"]
    assert "counted with the next one" in diff.attributions[0].note
    _assert_adds_up(diff)


def test_a_run_without_figures_cannot_be_compared(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    done = _run(django_capture_on_commit_callbacks, requester, scenario)
    with django_capture_on_commit_callbacks(execute=False):
        queued = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    with pytest.raises(RunNotComparable, match="queued"):
        run_diff(done, queued)


def test_costs_in_two_currencies_are_converted_at_the_recorded_rate(
    changed: tuple[EstimationRun, ...],
) -> None:
    before, after = changed
    assert after.budget is not None
    after.price["currency"] = "EUR"  # as if priced in euros, converted to the base currency
    after.budget["converted"] = {"currency": "USD", "p50": "0", "p90": "0", "rate": "1.25"}
    diff = run_diff(before, after)
    assert diff.rate == Decimal(1) / Decimal("1.25")
    assert diff.currency == "EUR"
    _, cost_before = _figures(before)
    assert diff.before.cost == (cost_before * Decimal("0.8")).quantize(CENT)
    assert "converted to EUR at 0.8" in diff.notes[0]
    assert [group.key for group in diff.groups][-1] == "exchange_rate"
    _assert_adds_up(diff)
    after.budget["converted"] = None  # no rate recorded: the costs are not attributed
    unconverted = run_diff(before, after)
    assert unconverted.rate is None
    assert unconverted.total_cost is None
    assert all(item.cost is None for item in unconverted.attributions)
    assert unconverted.attributed_days == pytest.approx(unconverted.total_days, abs=1e-9)
    assert "costs are not attributed" in unconverted.notes[0]


def test_the_diff_is_json_ready(changed: tuple[EstimationRun, ...]) -> None:
    data = run_diff(*changed).as_json()
    assert set(data) == {"before", "after", "currency", "before_currency", "rate", "groups",
                         "figures", "attributions", "total", "notes"}  # fmt: skip
    assert sum(Decimal(item["cost"]) for item in data["attributions"]) == Decimal(
        data["total"]["cost"]
    )


# --- The page ----------------------------------------------------------------------------------


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _url(run: EstimationRun, other: EstimationRun | None = None) -> str:
    url = reverse("planner:run-diff", args=[run.pk])
    return f"{url}?other={other.pk}" if other else url


def test_the_page_shows_the_differences_and_the_attribution(
    changed: tuple[EstimationRun, ...], requester: User
) -> None:
    before, after = changed
    response = _client(requester).get(_url(after, before))  # the older run is "before"
    assert response.status_code == 200
    body = response.content.decode()
    assert f'Run <a href="{before.get_absolute_url()}">{before.pk}</a> → run' in body
    assert 'data-path="training.tokens"' in body
    assert 'data-testid="attribution" data-key="layout"' in body
    assert 'data-testid="attribution-total"' in body
    assert "depends on that order" in body
    assert response.context["diff"].before_id == before.pk
    swapped = _client(requester).get(_url(after, before) + "&swap=1")
    assert swapped.context["diff"].before_id == after.pk


def test_runs_of_two_scenarios_are_compared_and_labelled(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    first = _run(django_capture_on_commit_callbacks, requester, scenario)
    smaller = scenario_create(
        user=requester,
        project=scenario.project,
        name="H100 x 32",
        spec=small_spec(num_gpus=32),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    second = _run(django_capture_on_commit_callbacks, requester, smaller)
    response = _client(requester).get(_url(first, second))
    assert response.status_code == 200
    assert 'data-testid="diff-other-scenario"' in response.content.decode()
    diff = response.context["diff"]
    assert "cluster" in [group.key for group in diff.groups]
    _assert_adds_up(diff)


def test_another_organisations_user_gets_404(
    changed: tuple[EstimationRun, ...], outsider: User
) -> None:
    before, after = changed
    assert _client(outsider).get(_url(after, before)).status_code == 404
    assert _client(outsider).get(_url(after)).status_code == 404


def test_a_run_of_another_organisation_is_not_found(
    changed: tuple[EstimationRun, ...],
    outsider: User,
    other_organisation: Organisation,
    requester: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    project = project_create(user=outsider, organisation=other_organisation, name="Theirs")
    theirs = scenario_create(
        user=outsider,
        project=project,
        name="theirs",
        spec=small_spec(),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    their_run = _run(django_capture_on_commit_callbacks, outsider, theirs)
    assert _client(requester).get(_url(changed[1], their_run)).status_code == 404
    assert _client(requester).get(_url(changed[1]) + "?other=abc").status_code == 404


def test_an_unfinished_run_gets_a_clear_message(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    done = _run(django_capture_on_commit_callbacks, requester, scenario)
    with django_capture_on_commit_callbacks(execute=False):
        queued = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    client = _client(requester)
    for page in (_url(done, queued), _url(queued, done), _url(queued)):
        response = client.get(page)
        assert response.status_code == 200
        body = response.content.decode()
        assert 'data-testid="diff-problem"' in body
        assert f"Run {queued.pk} is queued: only a succeeded run has figures" in body
        assert response.context["diff"] is None


def test_the_picker_lists_the_approved_budget_run_first(
    scenario: Scenario,
    requester: User,
    approver: User,
    second_approver: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    approved = _run(django_capture_on_commit_callbacks, requester, scenario, seed=1)
    newer = _run(django_capture_on_commit_callbacks, requester, scenario, seed=2)
    current = _run(django_capture_on_commit_callbacks, requester, scenario, seed=3)
    request = budget_request_create(
        user=requester, run=approved, title="Q3 training", justification="Why."
    )
    request = budget_request_submit(user=requester, request=request)
    for user in (approver, second_approver):
        if request.state != BudgetState.APPROVED:
            request = budget_request_approve(user=user, request=request)
    assert BudgetRequest.objects.get(pk=request.pk).state == BudgetState.APPROVED
    response = _client(requester).get(_url(current))
    assert response.status_code == 200
    listed = [item["run"].pk for item in response.context["candidates"]]
    assert listed == [approved.pk, newer.pk]
    body = response.content.decode()
    assert 'data-testid="diff-approved"' in body
    assert "approved budget: Q3 training" in body
