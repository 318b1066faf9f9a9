"""Every shipped fine-tuning recipe saves as it is through the service, at the demo book's
price of its card; the one-L40S QLoRA recipe runs; its 70B sibling on one L40S with 8-bit AdamW
has one memory verdict on the run page and in the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from estimator.core.presets import load_recipes, recipe_scenario
from estimator.core.validation import validate_scenario
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import scenario_create
from tests.planner.conftest import _client, api_client, book_price, run_finished

pytestmark = pytest.mark.django_db

L40S_QLORA = "llama3-8b-qlora-r64-1xl40s"


def _saved(
    recipe_id: str, project: Project, user: User, spec: dict[str, Any] | None = None
) -> Scenario:
    recipe = load_recipes()[recipe_id]
    spec = spec or recipe_scenario(recipe)
    return scenario_create(
        user=user,
        project=project,
        name=f"{recipe.name} ({spec['cluster']['num_gpus']} GPU, {spec['training']['optimizer']})",
        spec=spec,
        price_source="price_entry",
        price=book_price(spec["cluster"]["accelerator"]),
        model_preset=recipe.model_preset,
    )


def _result(run: EstimationRun) -> dict[str, Any]:
    assert run.result is not None
    return run.result


@pytest.mark.parametrize("recipe_id", sorted(load_recipes()))
def test_every_shipped_recipe_saves_through_the_service_as_it_is(
    prices: None, project: Project, requester: User, recipe_id: str
) -> None:
    scenario = _saved(recipe_id, project, requester)
    recipe = load_recipes()[recipe_id]
    assert validate_scenario(scenario.spec) == validate_scenario(recipe_scenario(recipe))
    assert scenario.accelerator_id == recipe.cluster["accelerator"]
    assert scenario.price is not None


def test_the_l40s_qlora_recipe_saves_and_runs(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    scenario = _saved(L40S_QLORA, project, requester)
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    result = _result(run)
    assert result["memory_verdict"] == run.memory_verdict == "fits"
    assert not run.does_not_fit
    assert result["memory_per_gpu_gib"]["total"] <= result["memory_headroom"]["usable_gib"]
    assert run.budget is not None
    assert run.budget["currency"] == "USD"
    assert float(run.budget["cost"]["p50"]) > 0


def test_the_8bit_70b_qlora_on_one_l40s_has_one_verdict_on_the_page_and_in_the_api(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    spec = recipe_scenario(load_recipes()["llama3-70b-qlora-r64-2xl40s"])
    spec["cluster"]["num_gpus"] = 1
    spec["training"]["optimizer"] = "adamw8bit"
    scenario = _saved("llama3-70b-qlora-r64-2xl40s", project, requester, spec)
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    result = _result(run)
    total, usable = result["memory_per_gpu_gib"]["total"], result["memory_headroom"]["usable_gib"]
    assert usable < total <= result["accelerator_memory_gib"]
    assert result["memory_verdict"] == "tight"
    assert result["fits_in_memory"] is True
    page = _client(requester).get(run.get_absolute_url()).content.decode()
    assert 'data-testid="fits" data-verdict="tight">tight on memory<' in page
    assert "fits in memory<" not in page
    assert 'data-testid="request-budget"' in page  # tight is a warning, not a refusal
    body = api_client(requester).get(f"/api/v1/runs/{run.pk}/").json()
    assert body["memory_verdict"] == "tight"


def test_an_over_memory_fine_tune_run_lists_the_memory_levers_that_make_it_fit(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    spec = recipe_scenario(load_recipes()["llama3-70b-qlora-r64-2xl40s"])
    spec["cluster"]["num_gpus"] = 1  # 32-bit AdamW states: over the 48 GB card
    scenario = _saved("llama3-70b-qlora-r64-2xl40s", project, requester, spec)
    run = run_finished(scenario, requester, django_capture_on_commit_callbacks)
    assert run.does_not_fit
    memory = [lever for lever in run.levers or [] if lever["kind"] == "memory"]
    assert {lever["change"].split(":")[0] for lever in memory} >= {
        "optimizer",
        "offload",
        "LoRA rank",
        "LoRA targets",
        "sequence length",
    }
    fitting = [lever for lever in run.levers or [] if lever["makes_it_fit"]]
    assert fitting
    assert run.levers is not None
    assert run.levers[: len(fitting)] == fitting
    page = _client(requester).get(run.get_absolute_url()).content.decode()
    assert "What would make it fit, cheaper or faster" in page
    assert page.count('data-testid="lever-makes-it-fit"') == len(fitting)
    first_row = page.split('data-testid="lever-row"', 2)[1]
    assert 'data-testid="lever-makes-it-fit"' in first_row
