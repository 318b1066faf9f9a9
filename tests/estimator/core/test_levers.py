"""Levers: every lever is exactly the estimate of its changed scenario, changes one thing,
and they come best first."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from estimator.core import ScenarioError, estimate
from estimator.core.levers import levers
from estimator.core.presets import preset_scenario

GPT3_LAYOUT = {
    "tp": 8, "pp": 8, "dp": 16, "cp": 1, "ep": 1, "micro_batch_size": 1, "zero_stage": 1,
    "recompute": "full", "sequence_parallel": False, "pipeline_schedule": "1f1b",
    "virtual_stages": 1, "activation_offload": False,
}  # fmt: skip


def _gpt3(**layout: Any) -> dict[str, Any]:
    scenario = preset_scenario("gpt3-175b", accelerator="A100-80GB-SXM", num_gpus=1024)
    scenario["model"]["vocab_size"] = 50257  # GPT-2's tokenizer, unpadded as the paper lists it
    scenario["parallelism"] = {**GPT3_LAYOUT, **layout}
    return scenario


def _llama_auto() -> dict[str, Any]:
    return preset_scenario("llama3-8b", accelerator="H100-SXM", num_gpus=64)


@pytest.mark.parametrize("scenario", [_gpt3(), _llama_auto()], ids=["gpt3-stated", "llama-auto"])
def test_each_lever_is_the_estimate_of_its_scenario(scenario: dict[str, Any]) -> None:
    found = levers(scenario)
    assert found["levers"]
    assert found["baseline"]["gpu_hours"] == estimate(scenario)["gpu_hours"]
    for lever in found["levers"]:
        again = estimate(json.loads(json.dumps(lever["scenario"])))  # as a file would hold it
        for key in ("training_days", "gpu_hours", "mfu", "step_time_s"):
            assert lever[key] == pytest.approx(again[key], rel=1e-9, abs=0), lever["change"]
        assert lever["fits_in_memory"] == again["fits_in_memory"]
        saved = found["baseline"]["gpu_hours"] - again["gpu_hours"]
        assert lever["gpu_hours_saved"] == pytest.approx(saved, rel=1e-9, abs=1e-6)


def _differences(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return [
            d
            for k in sorted(keys)
            for d in _differences(before.get(k), after.get(k), f"{path}.{k}")
        ]
    return [] if before == after else [path]


def test_a_lever_changes_one_thing() -> None:
    scenario = _gpt3()
    allowed = {
        "precision": [{".training.precision"}],
        "padding": [{".model.vocab_size"}],
        "recompute": [{".parallelism.recompute"}],
        "micro_batch": [{".parallelism.micro_batch_size"}],
        "zero": [{".parallelism.zero_stage"}],
        "sequence_parallel": [{".parallelism.sequence_parallel"}],
        "schedule": [
            {".parallelism.pipeline_schedule", ".parallelism.virtual_stages"},
            {".parallelism.virtual_stages"},
        ],
        "cluster": [{".cluster.num_gpus", ".parallelism.dp"}],
    }
    kinds = set()
    for lever in levers(scenario)["levers"]:
        kinds.add(lever["kind"])
        changed = set(_differences(scenario, lever["scenario"]))
        if lever["kind"] == "layout":
            assert changed
            assert all(path.startswith(".parallelism.") for path in changed)
        else:
            assert changed in allowed[lever["kind"]], lever["change"]
    # GPT-3's vocabulary (50,257) is not a multiple of the tile; A100s have no fp8 but bf16.
    assert {"padding", "precision", "recompute", "zero", "schedule", "cluster"} <= kinds


def test_levers_come_best_first() -> None:
    found = levers(_gpt3())["levers"]
    fits = [lever["fits_in_memory"] for lever in found]
    assert fits == sorted(fits, reverse=True)  # every fitting lever before any that does not
    for group in (True, False):
        saved = [lever["gpu_hours_saved"] for lever in found if lever["fits_in_memory"] is group]
        assert saved == sorted(saved, reverse=True)


def test_fp8_is_offered_only_where_the_accelerator_has_it() -> None:
    on_h100 = levers(_llama_auto())["levers"]
    assert any(lever["change"] == "precision: bf16 -> fp8" for lever in on_h100)
    on_a100 = levers(_gpt3())["levers"]
    assert not any("fp8" in lever["change"] for lever in on_a100)


def test_the_reason_quotes_the_model() -> None:
    found = {lever["change"]: lever for lever in levers(_gpt3())["levers"]}
    lever = found["recompute: full -> none"]
    baseline = estimate(_gpt3())
    share = baseline["time_per_step_breakdown_s"]["recompute"] / baseline["step_time_s"]
    assert lever["reason"].startswith(f"recomputation falls from {round(100 * share)} %")
    assert "does not fit" in lever["reason"] or lever["fits_in_memory"]


def test_a_lever_that_moves_the_run_to_another_framework_says_so() -> None:
    """fp16 on A100s runs on the 2021 stack (no FlashAttention, no selective recompute); a
    lever to bf16 or to selective recomputation resolves to today's Megatron-LM, and its
    reason says so rather than crediting the whole change to the lever."""
    scenario = _gpt3(zero_stage=0)
    scenario["training"]["precision"] = "fp16"
    found = {lever["change"]: lever for lever in levers(scenario)["levers"]}
    assert estimate(scenario)["framework"]["id"] == "megatron-lm-2021"
    for change in ("precision: fp16 -> bf16", "recompute: full -> selective"):
        assert found[change]["scenario"].get("framework", "auto") == "auto"
        assert found[change]["reason"].endswith(
            "runs on Megatron-LM instead of Megatron-LM 2021 (fp16, no FlashAttention)"
        )
    assert "runs on" not in found["recompute: full -> none"]["reason"]
    # The 2021 stack has no sequence parallelism: no lever offers it there; on bf16 one does.
    assert not any(lever["kind"] == "sequence_parallel" for lever in found.values())
    scenario["training"]["precision"] = "bf16"
    assert any(lever["kind"] == "sequence_parallel" for lever in levers(scenario)["levers"])


def test_applying_the_best_levers_raises_a_naive_runs_mfu() -> None:
    """A naive GPT-3 175B layout (micro-batch 1, full recomputation, 1F1B, fp16): taking the
    best fitting lever while one saves GPU-hours only ever raises MFU."""
    scenario = _gpt3()
    mfu = [estimate(scenario)["mfu"]]
    for _ in range(8):
        best = next((lv for lv in levers(scenario)["levers"] if lv["fits_in_memory"]), None)
        if best is None or best["gpu_hours_saved"] <= 0:
            break
        scenario = best["scenario"]
        mfu.append(best["mfu"])
    assert len(mfu) > 2
    assert mfu[-1] > mfu[0] * 1.2


def test_a_bad_scenario_is_refused_naming_the_key() -> None:
    with pytest.raises(ScenarioError) as refused:
        levers({"format_version": 1})
    assert refused.value.key == "model"


def test_the_command_line_prints_the_contracts_json(tmp_path: Any) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(_llama_auto()))
    done = subprocess.run(
        [sys.executable, "-m", "estimator", "levers", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["format_version"] == 1
    assert printed["levers"] == json.loads(json.dumps(levers(_llama_auto())["levers"]))
    bad = subprocess.run(
        [sys.executable, "-m", "estimator", "levers", "-"],
        input='{"format_version": 1}', capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.startswith("model:")
