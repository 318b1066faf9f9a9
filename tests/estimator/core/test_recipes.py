"""Fine-tuning recipes: each names its sources and makes a valid scenario that fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator.core import ScenarioError, estimate, validate_scenario
from estimator.core.presets import Recipe, get_preset, load_recipes, recipe_scenario

RECIPES = load_recipes()
#: The recipes the scenario form offers first; the planner's tests start from them.
REQUIRED_IDS = (
    "llama3-8b-lora-r16-8xh100",
    "llama3-8b-qlora-r64-1xl40s",
    "llama3-70b-qlora-r64-1xh100",
    "llama3-70b-qlora-r64-2xl40s",
    "llama3-8b-full-8xh100",
)
ADAPTER_METHODS = ("lora", "qlora")


def _recipe_entry(recipe_id: str, model_preset: str = "llama3-8b") -> dict[str, object]:
    return {
        "id": recipe_id,
        "name": recipe_id,
        "model_preset": model_preset,
        "training": {"tokens": 1e9, "global_batch_size": 64, "precision": "bf16"},
        "cluster": {"accelerator": "H100-SXM", "num_gpus": 8},
        "source": "test",
        "notes": "test",
    }


def _write(tmp_path: Path, *entries: dict[str, object]) -> Path:
    path = tmp_path / "recipes.json"
    path.write_text(json.dumps({"format_version": 1, "recipes": list(entries)}))
    return path


def test_load_recipes_has_required_ids() -> None:
    assert set(REQUIRED_IDS) <= set(RECIPES)


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=lambda r: r.id)
def test_recipe_scenario_validates(recipe: Recipe) -> None:
    scenario = validate_scenario(recipe_scenario(recipe))
    assert scenario.training.method.type == recipe.training["method"]["type"]
    assert scenario.cluster.num_gpus == recipe.cluster["num_gpus"]


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=lambda r: r.id)
def test_recipe_scenario_fits_in_memory(recipe: Recipe) -> None:
    # A recipe is a starting point: one that does not fit on its own cluster misleads.
    result = estimate(recipe_scenario(recipe))
    assert result["fits_in_memory"], result["warnings"]


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=lambda r: r.id)
def test_recipe_names_sources_and_assumptions(recipe: Recipe) -> None:
    assert "https://" in recipe.source
    assert recipe.notes.strip()
    assert recipe.name.startswith(get_preset(recipe.model_preset).name)


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=lambda r: r.id)
def test_recipe_scenario_is_the_preset_model_with_the_recipe_changes(recipe: Recipe) -> None:
    model = recipe_scenario(recipe)["model"]
    assert model == {**get_preset(recipe.model_preset).model, **recipe.model}


@pytest.mark.parametrize(
    "recipe", [r for r in RECIPES.values() if r.training["method"]["type"] in ADAPTER_METHODS],
    ids=lambda r: r.id,
)  # fmt: skip
def test_adapter_recipes_train_a_few_percent_of_the_weights_at_most(recipe: Recipe) -> None:
    method = estimate(recipe_scenario(recipe))["training_method"]
    assert method["type"] == recipe.training["method"]["type"]
    assert method["rank"] == recipe.training["method"]["rank"]
    assert 0 < method["trainable_share"] < 0.05  # r=64 on every linear layer of 8B: 2.1 %


def test_recipe_scenario_lora_against_full_fine_tuning_on_the_same_cluster() -> None:
    lora = estimate(recipe_scenario("llama3-8b-lora-r16-8xh100"))
    full = estimate(recipe_scenario("llama3-8b-full-8xh100"))
    lora_method, full_method = lora["training_method"], full["training_method"]
    assert full_method["trainable_share"] == 1.0
    assert lora_method["trainable_parameters"] < full_method["trainable_parameters"] / 100
    assert lora["memory_per_gpu_gib"]["total"] < full["memory_per_gpu_gib"]["total"]


def test_recipe_scenario_leaves_out_an_auto_framework(tmp_path: Path) -> None:
    recipe = load_recipes(_write(tmp_path, _recipe_entry("plain")))["plain"]
    scenario = recipe_scenario(recipe)
    assert "framework" not in scenario
    assert scenario["parallelism"] == "auto"
    validate_scenario(scenario)


def test_recipe_scenario_returns_fresh_dicts() -> None:
    first = recipe_scenario("llama3-8b-lora-r16-8xh100")
    first["training"]["method"]["rank"] = 1
    first["model"]["seq_len"] = 1
    again = recipe_scenario("llama3-8b-lora-r16-8xh100")
    assert again["training"]["method"]["rank"] == 16
    assert again["model"]["seq_len"] == 4096


def test_recipe_scenario_unknown_id_names_the_known_ones() -> None:
    with pytest.raises(ScenarioError) as raised:
        recipe_scenario("llama3-8b-dora")
    assert raised.value.key == "recipe"
    assert "llama3-8b-lora-r16-8xh100" in raised.value.reason


def test_load_recipes_duplicate_id(tmp_path: Path) -> None:
    path = _write(tmp_path, _recipe_entry("twice"), _recipe_entry("twice"))
    with pytest.raises(ValueError, match="duplicate recipe id 'twice'"):
        load_recipes(path)


def test_load_recipes_unknown_model_preset(tmp_path: Path) -> None:
    path = _write(tmp_path, _recipe_entry("odd", model_preset="llama9-1t"))
    with pytest.raises(ValueError, match="unknown model preset 'llama9-1t'"):
        load_recipes(path)
