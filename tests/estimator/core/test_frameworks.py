"""Framework profiles: what each framework runs, validation against it, the search within it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, search, validate_scenario
from estimator.core.calibration import efficiency_for
from estimator.core.frameworks import PROFILES, profile_for
from estimator.core.layout import Layouts, evaluate_layouts
from estimator.core.search import grid_axes
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario
from .test_cli import run

TPU = {"accelerator": "TPU-v5p", "num_gpus": 16}
GPT3_AUTO = scenario(GPT3_175B, parallelism="auto")
#: 8,192-token sequences: context parallelism up to 4 (2,048 tokens per rank at least).
GPT3_8K_AUTO = scenario(GPT3_AUTO, model={"seq_len": 8192})


def test_profiles_known_and_auto_defaults() -> None:
    assert set(PROFILES) == {"megatron-lm", "torchtitan", "deepspeed", "maxtext", "hf-peft"}
    assert profile_for("auto", "google-tpu").id == "maxtext"
    for family in ("nvidia-hopper", "nvidia-ampere", "amd-cdna3", "intel-gaudi"):
        assert profile_for("auto", family).id == "megatron-lm"


def test_unknown_framework_names_the_key() -> None:
    with pytest.raises(ScenarioError) as caught:
        profile_for("jax", "nvidia-hopper")
    assert caught.value.key == "framework"


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        # DeepSpeed runs 1F1B pipelines only, no ring-attention CP, no fp8.
        (
            {
                "framework": "deepspeed",
                "parallelism": {"pipeline_schedule": "interleaved", "virtual_stages": 2},
            },
            "parallelism.pipeline_schedule",
        ),
        ({"framework": "deepspeed", "parallelism": {"cp": 2, "dp": 8}}, "parallelism.cp"),
        (
            {
                "framework": "deepspeed",
                "training": {"precision": "fp8"},
                "cluster": {"accelerator": "H100-SXM"},
            },
            "training.precision",
        ),
        # Megatron-LM: distributed optimizer (1) or FSDP (3), no ZeRO-2; explicit or "auto".
        ({"framework": "megatron-lm", "parallelism": {"zero_stage": 2}}, "parallelism.zero_stage"),
        ({"framework": "torchtitan", "parallelism": {"zero_stage": 1}}, "parallelism.zero_stage"),
        ({"framework": "torchtitan", "parallelism": {"zero_stage": 3},
          "training": {"offload": "optimizer"}}, "training.offload"),
        # TPUs run MaxText only; "auto" there is MaxText (FSDP = 3, no ZeRO-1).
        (
            {"framework": "megatron-lm", "cluster": {"accelerator": "TPU-v5p"},
             "parallelism": {"zero_stage": 3}},
            "framework",
        ),
        ({"cluster": {"accelerator": "TPU-v5p"}}, "parallelism.zero_stage"),
        ({"framework": "jax"}, "framework"),
        ({"framework": 3}, "framework"),
        ({"framework": ""}, "framework"),
    ],
)  # fmt: skip
def test_validation_rejects_what_the_framework_does_not_run(changes: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(scenario(GPT3_175B, **changes))
    assert caught.value.key == key
    assert caught.value.reason


@pytest.mark.parametrize(
    "changes",
    [
        {"framework": "maxtext", "cluster": {"accelerator": "TPU-v5p"},
         "parallelism": {"zero_stage": 3}},
        {"framework": "torchtitan", "parallelism": {"zero_stage": 2}},
        {"framework": "deepspeed", "parallelism": {"zero_stage": 2}},
        {"framework": "megatron-lm", "training": {"offload": "optimizer"}},
        # the layouts DeepSpeed refuses above are fine elsewhere
        {"framework": "megatron-lm", "parallelism": {"cp": 2, "dp": 8}},
        {"framework": "torchtitan", "training": {"precision": "fp8"},
         "cluster": {"accelerator": "H100-SXM"}, "parallelism": {"zero_stage": 3}},
        {"framework": "megatron-lm", "parallelism": {"pipeline_schedule": "interleaved",
                                                     "virtual_stages": 2}},
    ],
)  # fmt: skip
def test_validation_accepts_what_the_framework_runs(changes: dict) -> None:
    parsed = validate_scenario(scenario(GPT3_175B, **changes))
    assert parsed.framework == changes["framework"]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"framework": "deepspeed", "training": {"precision": "fp8"}}, "training.precision"),
    ],
)
def test_auto_layout_rejects_training_options_the_framework_lacks(changes: dict, key: str) -> None:
    # The search picks the layout, but fp8 or the offload mode is the scenario's own
    # choice: a framework that cannot run it cannot run any layout of the scenario, as
    # validation says for an explicit layout.
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(scenario(SMALL, parallelism="auto", **changes))
    assert caught.value.key == key


def axes(data: dict) -> dict[str, list[int]]:
    return {name: [int(v) for v in values] for name, values in grid_axes(
        validate_scenario(data)).items()}  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "zero_stages"),
    [("megatron-lm", [0, 1, 3]), ("torchtitan", [0, 2, 3]), ("deepspeed", [0, 1, 2, 3])],
)
def test_grid_axes_stay_within_the_profile(framework: str, zero_stages: list[int]) -> None:
    grid = axes(scenario(GPT3_8K_AUTO, framework=framework))
    assert grid["zero_stage"] == zero_stages
    if framework == "deepspeed":
        assert grid["virtual_stages"] == [1]
        assert grid["cp"] == [1]
    else:
        assert len(grid["virtual_stages"]) > 1
        assert grid["cp"] == [1, 2, 4]


def test_grid_axes_auto_on_gpus_is_megatron_and_on_tpus_maxtext() -> None:
    assert axes(GPT3_AUTO)["zero_stage"] == [0, 1, 3]
    tpu = axes(scenario(SMALL, cluster=TPU, parallelism="auto"))
    assert tpu["zero_stage"] == [0, 3]


def test_search_results_run_on_the_framework() -> None:
    found = search(scenario(GPT3_AUTO, framework="deepspeed"), top_k=5)
    assert found["results"]
    for result in found["results"]:
        layout = result["parallelism"]
        assert (layout["cp"], layout["virtual_stages"]) == (1, 1)
        assert layout["pipeline_schedule"] == "1f1b"
        assert result["framework"]["id"] == "deepspeed"
    found = search(scenario(GPT3_AUTO, framework="megatron-lm"), top_k=5)
    assert all(r["parallelism"]["zero_stage"] != 2 for r in found["results"])


def test_estimate_reports_the_framework() -> None:
    result = estimate(GPT3_175B)
    assert result["framework"] == PROFILES["megatron-lm"].as_dict()
    assert result["framework"]["supports"]["zero_stages"] == [0, 1, 3]
    tpu = estimate(scenario(SMALL, cluster=TPU, parallelism={"zero_stage": 3}))
    assert tpu["framework"]["id"] == "maxtext"
    assert tpu["memory_headroom"]["usable_gib"] == pytest.approx(95 * 0.95, rel=1e-12)
    json.dumps(result, allow_nan=False)


def test_deepspeed_has_no_tensor_parallel_overlap() -> None:
    # On H100s (a fitted TP overlap) DeepSpeed runs the step Megatron-LM would run with the
    # overlap switched off: same profile otherwise (headroom, no compiler remat).
    h100 = scenario(GPT3_175B, cluster={"accelerator": "H100-SXM"})
    deepspeed = estimate(scenario(h100, framework="deepspeed"))
    megatron = estimate(h100)
    parsed = validate_scenario(h100)
    assert parsed.parallelism is not None
    family = efficiency_for(parsed.cluster.spec.family)
    assert family.tp_overlap > 0
    no_overlap = build_workload(parsed, efficiency=dataclasses.replace(family, tp_overlap=0.0))
    step = evaluate_layouts(no_overlap, Layouts.single(parsed.parallelism)).step_time[0]
    assert_allclose(deepspeed["step_time_s"], step, rtol=1e-12)
    parts_d = deepspeed["time_per_step_breakdown_s"]
    parts_m = megatron["time_per_step_breakdown_s"]
    assert parts_d["tp_communication"] > parts_m["tp_communication"]
    assert parts_d["compute"] == parts_m["compute"]
    assert deepspeed["memory_per_gpu_gib"] == megatron["memory_per_gpu_gib"]


@pytest.mark.parametrize(
    ("framework", "message"),
    [
        ("jax", "framework: must be one of"),
        ("megatron-lm", "framework: 'megatron-lm' does not run on TPUs"),
    ],
)
def test_cli_bad_framework_exits_2_naming_it(tmp_path: Path, framework: str, message: str) -> None:
    data: dict[str, Any] = scenario(SMALL, framework=framework)
    if framework == "megatron-lm":
        data = scenario(data, cluster=TPU, parallelism={"zero_stage": 3})
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    done = run("estimate", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(message)
    assert done.stderr.count("\n") == 1
    assert done.stderr.endswith("\n")


@pytest.mark.parametrize(
    ("changes", "resolved"),
    [
        ({"framework": "auto", "parallelism": {"zero_stage": 3}}, "megatron-lm"),
        ({"parallelism": {"zero_stage": 2}}, "torchtitan"),
        # GPT-3's stated ZeRO-1 rules torchtitan out; DeepSpeed runs both.
        ({"training": {"offload": "optimizer_and_params"}}, "deepspeed"),
        ({"training": {"offload": "optimizer_and_params"}, "parallelism": "auto"}, "torchtitan"),
        ({"cluster": {"accelerator": "TPU-v5p"}, "parallelism": {"zero_stage": 3}}, "maxtext"),
    ],
)
def test_auto_framework_resolves_to_the_first_profile_that_runs_the_scenario(
    changes: dict, resolved: str
) -> None:
    # A contract-valid scenario is never refused for a framework nobody named: "auto" is
    # the family's default when it runs the scenario, else the first profile that does.
    parsed = validate_scenario(scenario(GPT3_175B, **changes))
    assert parsed.framework == resolved
    assert estimate(scenario(GPT3_175B, **changes))["framework"]["id"] == resolved
