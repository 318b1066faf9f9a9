"""Planner services: role checks, scenario validation, price sources, runs and their figures."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from estimator.core import estimate
from estimator.core.montecarlo import Uncertainty, monte_carlo
from organisations.models import Organisation
from planner.budgets.models import AuditEvent
from planner.common.errors import NotAllowed, PlannerError, RunNotRetryable
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario
from planner.scenarios.selectors import comparison_rows, projects_for, scenarios_for
from planner.scenarios.services import (
    project_create,
    project_update,
    run_execute,
    run_retry,
    run_start,
    scenario_create,
    scenario_export,
    scenario_import,
    scenario_update,
)
from pricing.models import VendorQuote
from pricing.services import price_book_copy, quote_update
from tests.planner.conftest import example_quote, list_price, onprem_profile, small_spec

pytestmark = pytest.mark.django_db


def _json(value: Any) -> dict[str, Any]:
    """A run's stored JSON figures, which a finished run always has."""
    assert isinstance(value, dict)
    return value


def _finished_run(scenario: Scenario, user: User, seed: int = 7, **kwargs: Any) -> EstimationRun:
    """Start a run without enqueuing it, then execute it as the worker would."""
    run = run_start(user=user, scenario=scenario, seed=seed, **kwargs)
    finished = run_execute(run_id=run.pk)
    assert finished is not None
    return finished


# --- Projects --------------------------------------------------------------------------------


def test_project_create_needs_the_requester_role(
    organisation: Organisation, viewer: User, approver: User
) -> None:
    for user in (viewer, approver):
        with pytest.raises(NotAllowed, match="requester"):
            project_create(user=user, organisation=organisation, name="Nope")
    assert not Project.objects.exists()


def test_project_create_refuses_a_duplicate_name_and_bad_values(
    project: Project, requester: User
) -> None:
    with pytest.raises(PlannerError) as duplicate:
        project_create(user=requester, organisation=project.organisation, name=project.name)
    assert duplicate.value.field == "name"
    with pytest.raises(PlannerError) as ceiling:
        project_create(
            user=requester, organisation=project.organisation, name="X", budget_ceiling=Decimal(-1)
        )
    assert ceiling.value.field == "budget_ceiling"
    with pytest.raises(PlannerError) as currency:
        project_create(user=requester, organisation=project.organisation, name="Y", currency="usd")
    assert currency.value.field == "currency"
    assert Project.objects.count() == 1


def test_project_update_changes_only_allowed_fields(project: Project, requester: User) -> None:
    project_update(user=requester, project=project, goal="Beat the baseline", currency="EUR")
    project.refresh_from_db()
    assert (project.goal, project.currency) == ("Beat the baseline", "EUR")
    with pytest.raises(PlannerError) as refused:
        project_update(user=requester, project=project, owner_id=1)
    assert refused.value.field == "owner_id"


def test_an_outsider_sees_none_of_another_organisations_data(
    scenario: Scenario, outsider: User, requester: User
) -> None:
    assert list(projects_for(requester)) == [scenario.project]
    assert not projects_for(outsider).exists()
    assert not scenarios_for(outsider).exists()
    with pytest.raises(NotAllowed):
        run_start(user=outsider, scenario=scenario)


# --- Scenarios -------------------------------------------------------------------------------


def test_scenario_create_names_the_bad_spec_key(
    prices: None, project: Project, requester: User
) -> None:
    spec = small_spec()
    spec["model"]["num_layers"] = -3
    with pytest.raises(PlannerError) as refused:
        scenario_create(
            user=requester,
            project=project,
            name="bad",
            spec=spec,
            price_source="price_entry",
            price=list_price("H100-SXM"),
        )
    assert refused.value.field == "spec.model.num_layers"
    assert "positive integer" in refused.value.message
    assert not Scenario.objects.exists()


def test_scenario_price_must_be_for_its_accelerator(
    prices: None, project: Project, requester: User
) -> None:
    with pytest.raises(PlannerError) as refused:
        scenario_create(
            user=requester,
            project=project,
            name="mismatch",
            spec=small_spec("A100-80GB-SXM"),
            price_source="price_entry",
            price=list_price("H100-SXM"),
        )
    assert refused.value.field == "price_entry"
    assert "A100-80GB-SXM" in refused.value.message


def test_scenario_refuses_an_expired_quote_and_one_too_small(
    prices: None, project: Project, requester: User
) -> None:
    quote = example_quote()
    with pytest.raises(PlannerError, match="covers 256 accelerators"):
        scenario_create(
            user=requester,
            project=project,
            name="too big",
            spec=small_spec("H100-SXM", 512),
            price_source="vendor_quote",
            price=quote,
        )
    VendorQuote.objects.filter(pk=quote.pk).update(
        valid_until=timezone.localdate() - timedelta(days=1),
        valid_from=timezone.localdate() - timedelta(days=30),
    )
    with pytest.raises(PlannerError, match="expired") as refused:
        scenario_create(
            user=requester,
            project=project,
            name="expired",
            spec=small_spec("H100-SXM", 64),
            price_source="vendor_quote",
            price=VendorQuote.objects.get(pk=quote.pk),
        )
    assert refused.value.field == "vendor_quote"


def test_scenario_refuses_a_draft_book_price(
    prices: None, project: Project, requester: User
) -> None:
    entry = list_price("H100-SXM")
    draft = price_book_copy(book=entry.book, user=None)
    draft_entry = draft.entries.get(
        provider=entry.provider, region=entry.region, pricing_type=entry.pricing_type,
        accelerator=entry.accelerator, instance_type=entry.instance_type,
    )  # fmt: skip
    with pytest.raises(PlannerError, match="draft") as refused:
        scenario_create(
            user=requester,
            project=project,
            name="draft",
            spec=small_spec(),
            price_source="price_entry",
            price=draft_entry,
        )
    assert refused.value.field == "price_entry"


def test_scenario_update_keeps_the_old_spec_when_the_new_one_is_bad(
    scenario: Scenario, requester: User
) -> None:
    spec = small_spec(num_gpus=128)
    spec["training"]["precision"] = "fp4"
    with pytest.raises(PlannerError) as refused:
        scenario_update(user=requester, scenario=scenario, spec=spec)
    assert refused.value.field == "spec.training.precision"
    scenario.refresh_from_db()
    assert scenario.num_gpus == 64


def test_scenario_update_audits_each_changed_field_before_and_after(
    scenario: Scenario, requester: User
) -> None:
    entry, profile = scenario.price_entry, onprem_profile()
    assert entry is not None
    scenario_update(
        user=requester,
        scenario=scenario,
        name="Renamed",
        description=scenario.description,  # unchanged: not in the diff
        pue=Decimal("1.35"),
        price_source="onprem_profile",
        price=profile,
    )
    event = AuditEvent.objects.get(scenario=scenario, action="scenario_edited")
    assert event.actor == requester
    assert event.changes == {
        "name": ["H100 list price", "Renamed"],
        "pue": ["1.20", "1.35"],
        "price_source": ["price_entry", "onprem_profile"],
        "price_entry": [f"PriceEntry {entry.pk}", None],
        "onprem_profile": [None, f"OnPremProfile {profile.pk}"],
    }
    scenario.refresh_from_db()
    assert (scenario.name, scenario.pue, scenario.price) == ("Renamed", Decimal("1.35"), profile)


def test_scenario_update_refuses_a_field_it_does_not_change(
    scenario: Scenario, requester: User
) -> None:
    with pytest.raises(PlannerError) as refused:
        scenario_update(user=requester, scenario=scenario, price_entry=None, created_by=None)
    assert refused.value.field == "created_by"
    scenario.refresh_from_db()
    assert scenario.price_entry is not None


def test_scenario_export_import_round_trip(scenario: Scenario, requester: User) -> None:
    document = scenario_export(scenario)
    document["name"] = "copy"
    copy = scenario_import(user=requester, project=scenario.project, document=document)
    assert copy.spec == scenario.spec
    assert (copy.price_source, copy.price_entry_id) == ("price_entry", scenario.price_entry_id)
    assert (copy.pue, copy.utilisation_low) == (scenario.pue, scenario.utilisation_low)
    with pytest.raises(PlannerError) as refused:
        scenario_import(
            user=requester, project=scenario.project, document={**document, "price_id": 10**9}
        )
    assert refused.value.field == "price_id"


# --- Runs ------------------------------------------------------------------------------------


def test_run_start_enqueues_only_after_commit(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_start(user=requester, scenario=scenario, seed=11)
    assert len(callbacks) == 1
    assert run.status == RunStatus.QUEUED
    assert run.inputs["scenario"] == scenario.spec
    entry = scenario.price_entry
    assert entry is not None
    assert run.price["price_per_gpu_hour"] == str(entry.price_per_accelerator_hour)


def test_run_execute_stores_estimate_montecarlo_and_budget(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = _finished_run(scenario, requester, seed=11)
    assert run.status == RunStatus.SUCCEEDED
    assert (run.progress, run.attempts) == (1.0, 1)
    expected_estimate = estimate(scenario.spec)
    assert _json(run.result)["parallelism"] == expected_estimate["parallelism"]
    for key in ("training_days", "gpu_hours", "mfu", "tokens_per_s_per_gpu"):
        assert _json(run.result)[key] == pytest.approx(expected_estimate[key], rel=1e-12)
    expected = monte_carlo(
        scenario.spec, seed=11, samples=run.samples, uncertainty=Uncertainty(utilisation=(0.9, 1))
    )
    assert _json(run.montecarlo)["gpu_hours"] == pytest.approx(expected["gpu_hours"], rel=1e-12)
    assert scenario.price_entry is not None
    price = scenario.price_entry.price_per_accelerator_hour
    p50_hours = Decimal(repr(expected["gpu_hours"]["p50"]))
    assert Decimal(_json(run.budget)["cost"]["p50"]) == (p50_hours * price).quantize(
        Decimal("0.01")
    )
    assert Decimal(_json(run.budget)["requested"]) == Decimal(_json(run.budget)["cost"]["p90"])


def test_run_with_the_same_seed_reproduces_its_figures(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        first = _finished_run(scenario, requester, seed=99)
        second = _finished_run(scenario, requester, seed=99)
        other = _finished_run(scenario, requester, seed=100)
    assert first.budget == second.budget
    assert _json(first.budget)["cost"]["p50"] != _json(other.budget)["cost"]["p50"]


def test_a_run_keeps_its_price_after_the_price_changes(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    """A run copies its price when it starts; a later edit of the quote moves nothing."""
    quote = example_quote()
    scenario = scenario_create(
        user=requester,
        project=project,
        name="quoted",
        spec=small_spec(),
        price_source="vendor_quote",
        price=quote,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = _finished_run(scenario, requester)
    quoted = quote.price_per_accelerator_hour
    quote_update(quote=quote, price_basis="hourly", price_per_accelerator_hour=Decimal("9.99"),
                 total_price=None, term_months=None)  # fmt: skip
    run.refresh_from_db()
    assert run.price["price_per_gpu_hour"] == str(quoted)
    assert VendorQuote.objects.get(pk=quote.pk).price_per_accelerator_hour == Decimal("9.99")
    assert Decimal(_json(run.budget)["price_per_gpu_hour"]) != Decimal("9.99")


def test_a_failed_run_names_the_reason_and_can_be_retried(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1)
        # A stored run whose inputs the estimator refuses (as after an estimator upgrade).
        broken = {**run.inputs, "scenario": {**run.inputs["scenario"], "format_version": 2}}
        EstimationRun.objects.filter(pk=run.pk).update(inputs=broken)
        failed = run_execute(run_id=run.pk)
        assert failed is not None
        assert failed.status == RunStatus.FAILED
        assert failed.error.startswith("format_version:")
        with pytest.raises(RunNotRetryable):
            run_retry(user=requester, run=_finished_run(scenario, requester))
        EstimationRun.objects.filter(pk=run.pk).update(inputs={**broken, "scenario": scenario.spec})
        queued = run_retry(user=requester, run=failed)
        assert (queued.status, queued.error) == (RunStatus.QUEUED, "")
        done = run_execute(run_id=run.pk)
    assert done is not None
    assert done.status == RunStatus.SUCCEEDED
    assert done.attempts == 2


def test_run_execute_leaves_a_finished_run_alone(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = _finished_run(scenario, requester)
        assert run_execute(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.attempts == 1


def test_run_start_refuses_bad_samples_and_seed(scenario: Scenario, requester: User) -> None:
    with pytest.raises(PlannerError) as samples:
        run_start(user=requester, scenario=scenario, samples=10)
    assert samples.value.field == "samples"
    with pytest.raises(PlannerError) as seed:
        run_start(user=requester, scenario=scenario, seed=-1)
    assert seed.value.field == "seed"
    assert not EstimationRun.objects.exists()


def test_onprem_scenario_is_priced_from_the_cost_of_ownership(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    scenario = scenario_create(
        user=requester,
        project=project,
        name="on-prem",
        spec=small_spec(),
        price_source="onprem_profile",
        price=onprem_profile(),
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = _finished_run(scenario, requester)
    # The reference README's worked example: about $2.65 per GPU-hour.
    assert Decimal(run.price["price_per_gpu_hour"]) == pytest.approx(
        Decimal("2.648"), abs=Decimal("0.001")
    )


# --- Comparison ------------------------------------------------------------------------------


def test_comparison_rows_mark_cheapest_and_fastest(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    bigger = scenario_create(
        user=requester,
        project=scenario.project,
        name="H100 x 256",
        spec=small_spec(num_gpus=256),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    with django_capture_on_commit_callbacks(execute=False):
        _finished_run(scenario, requester)
        _finished_run(bigger, requester)
    rows = comparison_rows([scenario, bigger], "USD")
    by_cost = min(rows, key=lambda row: Decimal(row.budget["cost"]["p50"]))
    by_days = min(rows, key=lambda row: row.budget["training_days"]["p50"])
    assert [row.cheapest for row in rows] == [row is by_cost for row in rows]
    assert [row.fastest for row in rows] == [row is by_days for row in rows]
    assert by_days.scenario == bigger  # four times the GPUs finish sooner


def test_a_quote_for_a_term_is_paid_in_full_however_short_the_run(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    quote = example_quote()  # 256 H100 for 12 months, $4,709,376 in all
    scenario = scenario_create(
        user=requester,
        project=project,
        name="quoted",
        spec=small_spec("H100-SXM", 64),
        price_source="vendor_quote",
        price=quote,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = _finished_run(scenario, requester)
    budget = _json(run.budget)
    assert quote.total_price is not None
    assert Decimal(budget["minimum_spend"]) == quote.total_price
    hourly_p90 = Decimal(budget["gpu_hours"]["p90"]) * quote.price_per_accelerator_hour
    assert hourly_p90 < quote.total_price  # 64 GPUs for days, not 256 for a year
    assert Decimal(budget["cost"]["p90"]) == quote.total_price
    assert budget["minimum_spend_binds"] == ["deterministic", "p10", "p50", "p90"]
