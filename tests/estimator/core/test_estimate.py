"""estimate(): the contract's output keys and their internal consistency."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import estimate, validate_scenario
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario

CONTRACT_KEYS = {
    "format_version", "parameters", "active_parameters", "model_flops_per_token",
    "parallelism", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu",
    "mfu", "hfu", "memory_per_gpu_gib", "accelerator_memory_gib", "fits_in_memory",
    "time_per_step_breakdown_s", "bottleneck", "goodput", "training_days", "gpu_hours",
    "warnings", "whole_run", "framework", "margins_applied", "memory_headroom",
}  # fmt: skip
MEMORY_KEYS = {"weights", "gradients", "optimizer", "activations", "other", "total"}
BREAKDOWN_KEYS = {
    "compute",
    "recompute",
    "tp_communication",
    "pp_bubble",
    "dp_communication",
    "exposed_communication",
    "overheads",
    "framework_overhead",
    "network_jitter",
}


@pytest.fixture(scope="module")
def gpt3() -> dict:
    return estimate(GPT3_175B)


def test_estimate_has_contract_keys(gpt3: dict) -> None:
    assert set(gpt3) >= CONTRACT_KEYS
    assert set(gpt3["memory_per_gpu_gib"]) == MEMORY_KEYS
    assert set(gpt3["time_per_step_breakdown_s"]) == BREAKDOWN_KEYS
    assert gpt3["bottleneck"] in {"compute", "memory", "communication", "pipeline_bubble"}
    assert gpt3["estimator_version"]
    json.dumps(gpt3, allow_nan=False)


def test_estimate_parallelism_echoes_layout(gpt3: dict) -> None:
    layout = gpt3["parallelism"]
    assert (layout["tp"], layout["pp"], layout["dp"], layout["zero_stage"]) == (8, 8, 16, 1)
    assert layout["sequence_parallel"] is True
    assert layout["pipeline_schedule"] == "1f1b"


def test_estimate_breakdown_sums_to_step_time(gpt3: dict) -> None:
    parts = dict(gpt3["time_per_step_breakdown_s"])
    parts.pop("dp_communication")  # gross traffic time; only its exposed part costs time
    # overheads is the sum of the two margins, listed beside it
    margins = parts.pop("framework_overhead") + parts.pop("network_jitter")
    assert_allclose(margins, parts["overheads"], rtol=1e-12)
    assert_allclose(sum(parts.values()), gpt3["step_time_s"], rtol=1e-12)


def test_estimate_throughput_identities(gpt3: dict) -> None:
    tokens_per_step = 1536 * 2048
    assert_allclose(gpt3["tokens_per_s"], tokens_per_step / gpt3["step_time_s"], rtol=1e-12)
    assert_allclose(gpt3["tokens_per_s_per_gpu"] * 1024, gpt3["tokens_per_s"], rtol=1e-12)
    model_flops = gpt3["model_flops_per_token"] * gpt3["tokens_per_s_per_gpu"]
    assert_allclose(gpt3["tflops_per_gpu"], model_flops / 1e12, rtol=1e-12)
    assert_allclose(gpt3["mfu"], model_flops / 312e12, rtol=1e-12)
    assert gpt3["mfu"] < gpt3["hfu"] < 1.0  # selective recompute adds hardware FLOPs


def test_estimate_schedule_identities(gpt3: dict) -> None:
    days = 300e9 / gpt3["tokens_per_s"] / gpt3["goodput"] / 86400
    assert_allclose(gpt3["training_days"], days, rtol=1e-12)
    assert_allclose(gpt3["gpu_hours"], gpt3["training_days"] * 24 * 1024, rtol=1e-12)


def test_estimate_memory_total_and_fit(gpt3: dict) -> None:
    mem = gpt3["memory_per_gpu_gib"]
    parts = sum(v for k, v in mem.items() if k != "total")
    assert_allclose(mem["total"], parts, rtol=1e-12)
    assert gpt3["fits_in_memory"] == (mem["total"] <= gpt3["accelerator_memory_gib"])


def test_estimate_warns_when_tp_spans_nodes() -> None:
    data = scenario(SMALL, parallelism={"tp": 16, "pp": 1, "dp": 1})
    assert any("TP group spans nodes" in w for w in estimate(data)["warnings"])


def test_estimate_warns_on_indivisible_batch() -> None:
    data = scenario(SMALL, training={"global_batch_size": 250})
    warnings = estimate(data)["warnings"]
    assert any("global batch not divisible by dp × micro-batch" in w for w in warnings)  # noqa: RUF001


def test_estimate_warns_does_not_fit() -> None:
    data = scenario(
        GPT3_175B, cluster={"num_gpus": 8}, parallelism={"tp": 8, "pp": 1, "dp": 1, "zero_stage": 0}
    )
    result = estimate(data)
    assert result["fits_in_memory"] is False
    assert result["memory_verdict"] == "does_not_fit"
    needed = result["memory_per_gpu_gib"]["total"]
    note = f"does not fit in memory: needs {needed:.1f} GiB per device, A100-80GB-SXM has 80 GiB"
    assert note in result["warnings"]


def test_estimate_auto_parallelism_picks_a_fitting_layout() -> None:
    result = estimate(scenario(SMALL, parallelism="auto"))
    assert result["fits_in_memory"]
    layout = result["parallelism"]
    assert layout["tp"] * layout["pp"] * layout["dp"] * layout["cp"] == 16


def test_estimate_moe_active_parameters_below_total() -> None:
    moe = {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 4096}
    data = scenario(SMALL, model={"moe": moe}, parallelism={"ep": 2})
    result = estimate(data)
    assert result["active_parameters"] < result["parameters"]
    assert math.isfinite(result["step_time_s"])


def test_evaluate_layouts_vectorised_matches_single() -> None:
    # The search evaluates many layouts at once through the same formulas as estimate.
    base = validate_scenario(SMALL)
    w = build_workload(base)
    rows = [(1, 1, 16, 4, 0, 0), (2, 2, 4, 2, 1, 1), (4, 1, 4, 1, 3, 2), (2, 4, 2, 8, 2, 2)]
    tp, pp, dp, mbs, zero, recompute = (np.array(c, dtype=float) for c in zip(*rows, strict=False))
    many = evaluate_layouts(
        w,
        Layouts.from_arrays(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=1,
            ep=1,
            micro_batch_size=mbs,
            zero_stage=zero,
            recompute=recompute,
            sequence_parallel=(tp > 1),
            virtual_stages=1,
        ),
    )
    for i in range(len(rows)):
        one = evaluate_layouts(
            w,
            Layouts.from_arrays(
                tp=tp[i],
                pp=pp[i],
                dp=dp[i],
                cp=1,
                ep=1,
                micro_batch_size=mbs[i],
                zero_stage=zero[i],
                recompute=recompute[i],
                sequence_parallel=tp[i] > 1,
                virtual_stages=1,
            ),
        )
        assert_allclose(many.step_time[i], one.step_time[0], rtol=1e-9)
        assert_allclose(many.total_memory[i], one.total_memory[0], rtol=1e-9)
