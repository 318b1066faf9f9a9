"""Memory levers: offered when a run does not fit or is tight, each the estimate of its
changed scenario, and the list says which of them make it fit."""

from __future__ import annotations

from typing import Any

import pytest

from estimator.core import estimate
from estimator.core.levers import levers
from estimator.core.presets import load_recipes, recipe_scenario


def _lora_8b_on_one_l4(**parallelism: Any) -> dict[str, Any]:
    """The 8B LoRA recipe (4,096-token sequences, AdamW) on one 24 GB L4."""
    scenario = recipe_scenario(load_recipes()["llama3-8b-lora-r16-8xh100"])
    scenario["cluster"] = {"accelerator": "L4", "num_gpus": 1}
    if parallelism:
        scenario["parallelism"] = {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0, **parallelism}
    return scenario


def _qlora_70b_on_one_l40s() -> dict[str, Any]:
    """The two-L40S QLoRA 70B recipe (32-bit AdamW states) on one L40S: over the card."""
    scenario = recipe_scenario(load_recipes()["llama3-70b-qlora-r64-2xl40s"])
    scenario["cluster"]["num_gpus"] = 1
    return scenario


def _memory_levers(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        lever["change"].split(":")[0]: lever
        for lever in found["levers"]
        if lever["kind"] == "memory"
    }


def test_an_over_memory_fine_tune_lists_memory_levers_and_which_make_it_fit() -> None:
    found = levers(_qlora_70b_on_one_l40s())
    assert found["baseline"]["memory_verdict"] == "does_not_fit"
    memory = _memory_levers(found)
    assert {"optimizer", "offload", "LoRA rank", "LoRA targets", "sequence length"} <= set(memory)
    for lever in found["levers"]:
        assert lever["makes_it_fit"] == (lever["memory_verdict"] == "fits")
    fitting = [lever for lever in found["levers"] if lever["makes_it_fit"]]
    assert any(lever["kind"] == "memory" for lever in fitting)
    assert found["levers"][: len(fitting)] == fitting  # those that make it fit come first
    eight_bit = _memory_levers(found)["optimizer"]
    assert eight_bit["scenario"]["training"]["optimizer"] == "adamw8bit"
    assert eight_bit["memory_total_gib"] < found["baseline"]["memory_per_gpu_gib"]["total"]


@pytest.mark.parametrize("scenario", [_qlora_70b_on_one_l40s(), _lora_8b_on_one_l4()])
def test_each_memory_lever_is_the_estimate_of_its_scenario_and_changes_one_thing(
    scenario: dict[str, Any],
) -> None:
    found = levers(scenario)
    assert _memory_levers(found)
    for lever in found["levers"]:
        if lever["kind"] != "memory":
            continue
        again = estimate(lever["scenario"])
        assert again["memory_per_gpu_gib"]["total"] == pytest.approx(lever["memory_total_gib"])
        assert again["gpu_hours"] == pytest.approx(lever["gpu_hours"])
        assert again["memory_verdict"] == lever["memory_verdict"]
        changed = {
            section
            for section in ("model", "training", "cluster", "parallelism")
            if lever["scenario"][section] != scenario[section]
        }
        assert len(changed) == 1, (lever["change"], changed)


def test_a_tight_lora_on_one_l4_is_made_to_fit_by_qlora() -> None:
    found = levers(_lora_8b_on_one_l4())
    assert found["baseline"]["memory_verdict"] == "tight"
    qlora = _memory_levers(found)["method"]
    assert qlora["scenario"]["training"]["method"]["type"] == "qlora"
    assert qlora["makes_it_fit"]


def test_a_stated_layout_gets_micro_batch_and_checkpointing_levers() -> None:
    scenario = _lora_8b_on_one_l4(micro_batch_size=4, recompute="none")
    found = levers(scenario)
    assert found["baseline"]["memory_verdict"] == "does_not_fit"
    memory = _memory_levers(found)
    assert memory["micro-batch"]["scenario"]["parallelism"]["micro_batch_size"] == 1
    assert memory["gradient checkpointing"]["scenario"]["parallelism"]["recompute"] == "full"
    for name in ("micro-batch", "gradient checkpointing"):
        assert memory[name]["memory_total_gib"] < found["baseline"]["memory_per_gpu_gib"]["total"]


def test_a_run_that_fits_gets_no_memory_levers() -> None:
    scenario = recipe_scenario(load_recipes()["llama3-8b-qlora-r64-1xl40s"])
    found = levers(scenario)
    assert found["baseline"]["memory_verdict"] == "fits"
    assert not _memory_levers(found)
    assert not any(lever["makes_it_fit"] for lever in found["levers"])
