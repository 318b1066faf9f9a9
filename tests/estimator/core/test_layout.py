"""Per-layout formulas: schedules, ZeRO traffic, peaks and fast domains."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.testing import assert_allclose

from estimator.core import estimate, validate_scenario
from estimator.core.layout import LayoutResults, Layouts, evaluate_layouts
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario


def evaluate(data: dict[str, Any], **columns: Any) -> LayoutResults:
    """Evaluate the scenario's layout with some columns replaced by arrays."""
    parsed = validate_scenario(data)
    base = Layouts.single(parsed.parallelism)  # type: ignore[arg-type]
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    fields.update(columns)
    return evaluate_layouts(build_workload(parsed), Layouts.from_arrays(**fields))


def test_pp_bubble_shrinks_with_virtual_stages() -> None:
    # Narayanan et al. 2021, section 2.2.2: the interleaved bubble is 1/v of 1F1B's.
    result = evaluate(GPT3_175B, virtual_stages=np.array([1.0, 2.0, 3.0]))
    assert_allclose(result.pp_bubble[0] / result.pp_bubble[1:], [2.0, 3.0], rtol=1e-12)


def test_pp_bubble_fraction_is_p_minus_1_over_m() -> None:
    # With one micro-batch per pipeline the bubble is (p - 1) micro-batch times, so doubling
    # the batch (m) leaves it unchanged while the busy time doubles.
    small = evaluate(scenario(GPT3_175B, training={"global_batch_size": 768}))
    large = evaluate(GPT3_175B)
    assert_allclose(large.num_micro_batches, 2 * small.num_micro_batches)
    assert_allclose(large.pp_bubble, small.pp_bubble, rtol=1e-12)


def test_dp_communication_zero3_is_one_and_a_half_times_zero0() -> None:
    # Rajbhandari et al. 2020, section 7: stage 3 moves 3 Psi per step against 2 Psi for an
    # all-reduce (one micro-batch, same ring, same per-layer collectives).
    data = scenario(
        SMALL,
        training={"global_batch_size": 16},
        parallelism={"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 1},
    )
    result = evaluate(data, zero_stage=np.array([0.0, 3.0]))
    assert_allclose(result.num_micro_batches, [1.0, 1.0])
    assert_allclose(result.dp_communication[1] / result.dp_communication[0], 1.5, rtol=1e-12)


def test_tp_communication_grows_when_tp_group_leaves_node() -> None:
    data = scenario(SMALL, cluster={"num_gpus": 16}, parallelism={"tp": 16, "pp": 1, "dp": 1})
    inside = evaluate(scenario(data, cluster={"gpus_per_node": 16}))
    across = evaluate(scenario(data, cluster={"gpus_per_node": 8}))
    assert across.tp_communication[0] > inside.tp_communication[0]


def test_tpu_slice_is_one_fast_domain() -> None:
    data = scenario(
        SMALL,
        cluster={"accelerator": "TPU-v5p", "num_gpus": 16},
        parallelism={"tp": 16, "pp": 1, "dp": 1},
    )
    warnings = estimate(data)["warnings"]
    assert not any("TP group spans nodes" in w for w in warnings)


def test_only_a_family_without_measurements_is_flagged_uncalibrated() -> None:
    measured = estimate(SMALL)["warnings"]
    assert not any("uncalibrated" in w for w in measured)
    unmeasured = estimate(scenario(SMALL, cluster={"accelerator": "Trainium2", "num_gpus": 16}))
    assert any(w.startswith("uncalibrated: ") for w in unmeasured["warnings"])


def test_fp32_is_true_fp32_tf32_uses_tensor_cores_and_fp8_keeps_attention_in_bf16() -> None:
    fp32 = build_workload(validate_scenario(scenario(SMALL, training={"precision": "fp32"})))
    assert fp32.peak_matmul_flops == 67e12  # H100 SXM FP32 (no tensor cores)
    assert fp32.activation_bytes == 4.0
    tf32 = build_workload(validate_scenario(scenario(SMALL, training={"precision": "tf32"})))
    assert tf32.peak_matmul_flops == 494.5e12
    assert tf32.activation_bytes == 4.0
    fp8 = build_workload(validate_scenario(scenario(SMALL, training={"precision": "fp8"})))
    assert fp8.peak_matmul_flops == 1978.9e12
    assert fp8.peak_attention_flops == 989.4e12


def test_fp8_faster_than_bf16_but_below_twice() -> None:
    bf16 = estimate(SMALL)["tokens_per_s_per_gpu"]
    fp8 = estimate(scenario(SMALL, training={"precision": "fp8"}))["tokens_per_s_per_gpu"]
    assert bf16 < fp8 < 2 * bf16


def test_margins_scale_step_time() -> None:
    plain = estimate(scenario(SMALL, margins={"framework_overhead": 0.0, "network_jitter": 0.0}))
    default = estimate(SMALL)
    assert_allclose(plain["time_per_step_breakdown_s"]["overheads"], 0.0, atol=1e-15)
    assert default["step_time_s"] > 1.1 * plain["step_time_s"]
