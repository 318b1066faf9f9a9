"""A scenario's measured speed: entered on the form, applied by the run, shown on its page;
the input pipeline is checked against the stated storage and CPU figures."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from estimator.core import estimate
from planner.scenarios.forms import ScenarioForm
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import scenario_update
from tests.planner.conftest import run_finished

pytestmark = pytest.mark.django_db


def _run(scenario: Scenario, user: User, capture: Any) -> EstimationRun:
    return run_finished(scenario, user, capture)


def test_a_measured_step_time_rescales_the_run_and_the_page_says_so(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    modelled = estimate(scenario.spec)
    measured = modelled["step_time_s"] * 1.3
    scenario_update(
        user=requester,
        scenario=scenario,
        spec={
            **scenario.spec,
            "measurement": {"step_time_s": measured, "measured_on": "2026-11-20"},
        },
    )
    scenario.refresh_from_db()
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    assert run.result is not None
    assert run.result["step_time_s"] == pytest.approx(measured, rel=1e-12)
    assert run.result["calibration"]["measured_on"] == "2026-11-20"
    client = Client()
    client.force_login(requester)
    body = client.get(run.get_absolute_url()).content.decode()
    assert 'data-testid="calibrated"' in body
    assert "Calibrated to your measurement of 2026-11-20" in body


def test_the_form_writes_and_reads_back_the_measurement_and_pipeline_figures(
    scenario: Scenario,
) -> None:
    initial = ScenarioForm.initial_from(scenario)
    data = {key: ("" if value is None else value) for key, value in initial.items()}
    data |= {
        "measured_kind": "mfu", "measured_value": "0.41", "measured_on": "2026-11-20",
        "storage_read_gbps": "0.00001", "cpu_tokens_per_s": "5",
        "price": f"{scenario.price_source}:{scenario.price.pk}",  # type: ignore[union-attr]
    }  # fmt: skip
    form = ScenarioForm(data, base_spec=scenario.spec, organisation=scenario.project.organisation)
    assert form.is_valid(), form.errors
    spec = form.spec()
    assert spec["measurement"] == {"mfu": 0.41, "measured_on": "2026-11-20"}
    assert spec["data_pipeline"] == {"read_gbps_per_node": 0.00001, "cpu_tokens_per_s_per_node": 5}
    unvalued = ScenarioForm(
        {**data, "measured_value": ""}, base_spec=spec, organisation=scenario.project.organisation
    )
    assert "measured_value" in unvalued.errors
    emptied = {**data, "measured_kind": "", "storage_read_gbps": "", "cpu_tokens_per_s": ""}
    form = ScenarioForm(emptied, base_spec=spec, organisation=scenario.project.organisation)
    assert form.is_valid(), form.errors
    assert "measurement" not in form.spec()
    assert "data_pipeline" not in form.spec()


def test_the_input_pipeline_warns_above_the_stated_figures(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    scenario_update(
        user=requester,
        scenario=scenario,
        spec={**scenario.spec, "data_pipeline": {"cpu_tokens_per_s_per_node": 5}},
    )
    scenario.refresh_from_db()
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    assert run.budget is not None
    pipeline = run.budget["bill"]["input_pipeline"]
    assert pipeline["cpu_tokens_per_s_per_node"] == 5
    assert pipeline["tokens_per_s_per_node"] > 5
    assert any("tokens/s per node" in warning for warning in pipeline["warnings"])
