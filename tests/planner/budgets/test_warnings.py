"""Warnings where money is committed (planner/budgets/warnings.py): a run that does not
fit, an uncalibrated family, a flagged or stale price, a P90 above the ceiling, a run late for
the deadline at P50 (blocking) or at P90 only (a note); the refusal of a
budget for a run that does not fit unless the requester says why, kept in the snapshot and the
audit trail."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from estimator.core.deadline import MISSES_P50, finish_probability
from planner.budgets.models import AuditEvent, BudgetRequest
from planner.budgets.services import (
    budget_request_create,
    budget_request_submit,
)
from planner.budgets.warnings import (
    ABOVE_CEILING,
    BLOCK,
    DEADLINE_AT_RISK,
    DOES_NOT_FIT,
    MISSES_DEADLINE,
    PRICE_BOOK_STALE,
    PRICE_FLAGGED,
    QUOTE_EXAMPLE,
    QUOTE_EXPIRED,
    UNCALIBRATED,
    WARN,
    request_warnings,
    run_warnings,
)
from planner.common.errors import PlannerError
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import run_execute, run_start, scenario_create, scenario_fit_note
from pricing.models import PriceEntry
from tests.planner.conftest import (
    example_quote,
    list_price,
    quote_scenario,
    small_spec,
    too_big_scenario,
    too_big_spec,
)

pytestmark = pytest.mark.django_db


def _run(scenario: Scenario, user: User, capture: Any) -> EstimationRun:
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=3, samples=200)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    return finished


def _scenario(
    project: Project, user: User, name: str, spec: dict[str, Any], price: PriceEntry
) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=spec,
        price_source="price_entry",
        price=price,
    )


@pytest.fixture
def too_big(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    scenario = too_big_scenario(project, requester)
    return _run(scenario, requester, django_capture_on_commit_callbacks)


@pytest.fixture
def fine(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    return _run(scenario, requester, django_capture_on_commit_callbacks)


def _result(run: EstimationRun) -> dict[str, Any]:
    assert run.result is not None
    return run.result


def _budget(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None
    return run.budget


def _snapshot(request: BudgetRequest) -> dict[str, Any]:
    assert request.snapshot is not None
    return request.snapshot


def _entry(run: EstimationRun) -> PriceEntry:
    entry = run.scenario.price_entry
    assert entry is not None
    return entry


def _codes(run: EstimationRun, **kwargs: Any) -> list[str]:
    return [warning.code for warning in run_warnings(run, **kwargs)]


# --- What is warned of -------------------------------------------------------------------------


def test_a_run_that_does_not_fit_blocks_with_the_memory_it_needs(too_big: EstimationRun) -> None:
    assert _result(too_big)["fits_in_memory"] is False
    warnings = run_warnings(too_big)
    assert warnings[0].code == DOES_NOT_FIT
    assert warnings[0].severity == BLOCK
    needed = _result(too_big)["memory_per_gpu_gib"]["total"]
    assert f"needs {needed:,.0f} GiB per GPU of 80 GiB" in warnings[0].message


def test_a_run_that_fits_at_a_clean_fresh_price_has_no_warnings(fine: EstimationRun) -> None:
    assert _result(fine)["fits_in_memory"] is True
    fetched = timezone.localdate(_entry(fine).book.fetched_at)
    assert run_warnings(fine, today=fetched) == []


def test_a_flagged_price_warns_with_its_flag(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    flagged = PriceEntry.objects.exclude(data_flag="").select_related("accelerator").first()
    assert flagged is not None, "the demo book has a flagged price"
    spec = small_spec(flagged.accelerator.catalog_id, 64)
    scenario = _scenario(project, requester, "flagged", spec, flagged)
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    found = {warning.code: warning for warning in run_warnings(run)}
    assert found[PRICE_FLAGGED].severity == WARN
    assert flagged.data_flag.strip() in found[PRICE_FLAGGED].message


@pytest.mark.parametrize(("age", "stale"), [(90, False), (91, True)])
def test_a_price_book_is_stale_after_the_configured_age(
    fine: EstimationRun, settings: Any, age: int, stale: bool
) -> None:
    settings.PRICE_BOOK_STALE_DAYS = 90
    fetched = timezone.localdate(_entry(fine).book.fetched_at)
    codes = _codes(fine, today=fetched + timedelta(days=age))
    assert (PRICE_BOOK_STALE in codes) is stale


def test_a_family_without_measurements_is_uncalibrated(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    spec = small_spec("Trainium1", 64)
    scenario = _scenario(project, requester, "Trainium", spec, list_price("Trainium1", "aws"))
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    assert any(text.startswith("uncalibrated: ") for text in _result(run)["warnings"])
    warning = next(w for w in run_warnings(run) if w.code == UNCALIBRATED)
    assert warning.severity == WARN
    assert "aws-trainium" in warning.message


def test_p90_above_the_ceiling_warns_and_at_or_below_it_does_not(fine: EstimationRun) -> None:
    project = fine.scenario.project
    p90 = Decimal(_budget(fine)["cost"]["p90"])
    assert _budget(fine)["currency"] == project.currency
    project.budget_ceiling = p90
    assert ABOVE_CEILING not in _codes(fine, project=project)
    project.budget_ceiling = (p90 * Decimal("0.99")).quantize(Decimal("0.01"))
    assert ABOVE_CEILING in _codes(fine, project=project)


# --- The refusal -------------------------------------------------------------------------------


@pytest.mark.parametrize("override_reason", ["", "Finance asked for the single-node figure."])
def test_a_budget_for_a_run_that_does_not_fit_is_refused_even_with_a_reason(
    too_big: EstimationRun, requester: User, override_reason: str
) -> None:
    assert too_big.does_not_fit
    with pytest.raises(PlannerError) as refused:
        budget_request_create(
            user=requester,
            run=too_big,
            title="70B",
            justification="Go.",
            override_reason=override_reason,
        )
    assert refused.value.field == "run"
    assert "does not fit in memory" in refused.value.message
    assert "not achievable" in refused.value.message
    assert not BudgetRequest.objects.exists()  # nothing half-written
    assert not AuditEvent.objects.exists()


def test_a_reason_is_not_needed_for_a_run_that_fits(fine: EstimationRun, requester: User) -> None:
    draft = budget_request_create(user=requester, run=fine, title="8B", justification="Go.")
    assert draft.override_reason == ""
    assert _snapshot(budget_request_submit(user=requester, request=draft))["override_reason"] == ""


# --- What the request page shows ---------------------------------------------------------------


def test_warnings_arisen_after_submission_are_shown_apart_from_the_frozen_ones(
    fine: EstimationRun, requester: User
) -> None:
    draft = budget_request_create(user=requester, run=fine, title="8B", justification="Go.")
    submitted = budget_request_submit(user=requester, request=draft)
    frozen = [item["code"] for item in _snapshot(submitted)["warnings"]]
    assert PRICE_FLAGGED not in frozen
    PriceEntry.objects.filter(pk=_entry(fine).pk).update(data_flag="SUSPECT: check")
    shown = request_warnings(submitted, _snapshot(submitted))
    assert [w.code for w in shown.shown] == frozen  # the snapshot is what was signed
    assert [w.code for w in shown.since_submission] == [PRICE_FLAGGED]


# --- Saving a scenario -------------------------------------------------------------------------


def test_saving_a_stated_layout_that_does_not_fit_says_so_at_once() -> None:
    assert "does not fit in memory" in scenario_fit_note(too_big_spec())
    assert scenario_fit_note(small_spec("H100-SXM", 64)) == ""  # "auto": the worker searches


# --- The deadline ------------------------------------------------------------------------------


@pytest.fixture
def long_run(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    """Llama 3 8B on 2 T tokens and 64 H100s: weeks, with days between its P50 and P90."""
    spec = small_spec("H100-SXM", 64, tokens=2e12)
    scenario = _scenario(project, requester, "8B long", spec, list_price("H100-SXM"))
    return _run(scenario, requester, django_capture_on_commit_callbacks)


def _days(run: EstimationRun) -> dict[str, float]:
    assert run.montecarlo is not None
    return run.montecarlo["training_days"]


def _due_in(run: EstimationRun, days: int) -> Project:
    """The run's project with its deadline ``days`` from today."""
    project = run.scenario.project
    project.deadline = timezone.localdate() + timedelta(days=days)
    project.save(update_fields=["deadline"])
    return project


def test_no_deadline_no_deadline_warning(long_run: EstimationRun) -> None:
    assert long_run.scenario.project.deadline is None
    assert not {MISSES_DEADLINE, DEADLINE_AT_RISK} & set(_codes(long_run))


def test_meeting_the_deadline_at_p90_warns_of_nothing(long_run: EstimationRun) -> None:
    _due_in(long_run, math.ceil(_days(long_run)["p90"]))
    assert not {MISSES_DEADLINE, DEADLINE_AT_RISK} & set(_codes(long_run))


def test_late_at_p90_only_is_a_note_with_the_chance_in_time(
    long_run: EstimationRun, requester: User
) -> None:
    days = _days(long_run)
    left = math.ceil(days["p50"])
    assert left < days["p90"], days
    _due_in(long_run, left)
    warning = next(w for w in run_warnings(long_run) if w.code == DEADLINE_AT_RISK)
    assert warning.severity == WARN
    assert long_run.montecarlo is not None
    chance = finish_probability(long_run.montecarlo["training_days_quantiles"], left)
    assert 0.5 <= chance < 0.9
    assert f"{100 * chance:.0f}% chance of finishing in time" in warning.message
    assert f"{days['p90']:,.0f} days" in warning.message
    draft = budget_request_create(user=requester, run=long_run, title="8B", justification="Go.")
    assert draft.override_reason == ""  # a note does not block


def test_late_at_p50_blocks_until_the_requester_says_why(
    long_run: EstimationRun, requester: User
) -> None:
    left = math.floor(_days(long_run)["p50"]) - 1
    _due_in(long_run, left)
    warning = run_warnings(long_run)[0]
    assert (warning.code, warning.severity) == (MISSES_DEADLINE, BLOCK)
    assert f"{left} days from" in warning.message
    with pytest.raises(PlannerError) as refused:
        budget_request_create(user=requester, run=long_run, title="8B", justification="Go.")
    assert refused.value.field == "run"
    assert "misses the project's deadline" in refused.value.message
    draft = budget_request_create(
        user=requester, run=long_run, title="8B", justification="Go.", override_reason="Q4 is ok."
    )
    snapshot = _snapshot(budget_request_submit(user=requester, request=draft))
    assert (snapshot["warnings"][0]["code"], snapshot["warnings"][0]["severity"]) == (
        MISSES_DEADLINE,
        BLOCK,
    )
    assert snapshot["chosen"]["deadline"]["verdict"] == MISSES_P50
    assert snapshot["chosen"]["deadline"]["days_available"] == left


# --- Vendor quotes -----------------------------------------------------------------------------


@pytest.fixture
def on_example_quote(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> EstimationRun:
    """64 H100 on the demo's example quote (256 H100 for 12 months)."""
    scenario = quote_scenario(project, requester)
    return _run(scenario, requester, django_capture_on_commit_callbacks)


def test_a_quote_marked_as_an_example_warns_that_it_is_no_offer(
    on_example_quote: EstimationRun,
) -> None:
    quote = example_quote()
    found = {w.code: w for w in run_warnings(on_example_quote, today=quote.valid_from)}
    assert set(found) == {QUOTE_EXAMPLE}
    assert found[QUOTE_EXAMPLE].severity == WARN
    assert "EXAMPLE-0001" in found[QUOTE_EXAMPLE].message
    assert "not a real offer" in found[QUOTE_EXAMPLE].message


def test_a_quote_warns_once_it_has_expired_and_not_on_its_last_day(
    on_example_quote: EstimationRun,
) -> None:
    quote = example_quote()
    quote.is_example = False
    quote.save(update_fields=["is_example"])
    assert _codes(on_example_quote, today=quote.valid_until) == []
    after = run_warnings(on_example_quote, today=quote.valid_until + timedelta(days=1))
    assert [w.code for w in after] == [QUOTE_EXPIRED]
    assert f"expired on {quote.valid_until:%Y-%m-%d}" in after[0].message
