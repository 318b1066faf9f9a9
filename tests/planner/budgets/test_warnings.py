"""Warnings where money is committed (planner/budgets/warnings.py): a run that does not
fit, an uncalibrated family, a flagged or stale price, a P90 above the ceiling; the refusal of a
budget for a run that does not fit unless the requester says why, kept in the snapshot and the
audit trail."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from planner.budgets.models import AuditEvent, BudgetRequest
from planner.budgets.services import (
    budget_request_create,
    budget_request_submit,
)
from planner.budgets.warnings import (
    ABOVE_CEILING,
    BLOCK,
    DOES_NOT_FIT,
    PRICE_BOOK_STALE,
    PRICE_FLAGGED,
    UNCALIBRATED,
    WARN,
    request_warnings,
    run_warnings,
)
from planner.common.errors import PlannerError
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import run_execute, run_start, scenario_create, scenario_fit_note
from pricing.models import PriceEntry
from tests.planner.conftest import list_price, small_spec, too_big_scenario, too_big_spec

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
