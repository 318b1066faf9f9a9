"""Per-layout formulas: schedules, ZeRO traffic, peaks and fast domains."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import (
    activations,
    comms,
    estimate,
    gemm,
    layout_comms,
    memory,
    pipeline,
    validate_scenario,
)
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import LayoutResults, Layouts
from estimator.core.layout_comms import chunked_exposed_time, mcore_buckets
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, LLAMA3_405B, SMALL, scenario


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
    # all-reduce (one micro-batch, same ring, same per-layer collectives: a stack whose DDP
    # buckets per layer, as FSDP gathers).
    data = scenario(
        SMALL,
        training={"global_batch_size": 16},
        parallelism={"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 1, "zero_stage": 0},
        framework="torchtitan",
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
        parallelism={"tp": 16, "pp": 1, "dp": 1, "zero_stage": 3},  # MaxText: FSDP, no ZeRO-1
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


# Memory of an uneven pipeline: the stage that needs the most.

#: Llama 3 405B as trained (Dubey et al. 2024, table 4): tp 8, pp 16, dp 128 on 16,384
#: H100s, one 8,192-token sequence per micro-batch, 1F1B, no recomputation.
LLAMA3_1F1B = scenario(LLAMA3_405B, parallelism={"pipeline_schedule": "1f1b", "virtual_stages": 1})


def test_llama3_405b_split_fits_on_80_gib() -> None:
    # Uneven split 7 + 14 x 8 + 7; m = 2048 / 128 = 16 micro-batches in flight at most.
    result = estimate(LLAMA3_1F1B)
    total = result["memory_per_gpu_gib"]["total"]
    assert total < 80.0
    assert result["fits_in_memory"] is True
    assert result["num_micro_batches"] == 16


def test_llama3_405b_memory_is_the_fullest_stages() -> None:
    parsed = validate_scenario(LLAMA3_1F1B)
    assert parsed.parallelism is not None
    assert parsed.parallelism.sequence_parallel  # defaults on with tp > 1
    model = parsed.model
    per_layer = float(activations.activation_bytes_per_layer(model, 8192.0, 8, True, 0))
    logits = 4.0 * 8192 * model.vocab_size / 8  # fp32 logits on the last stage
    expected = {
        "first": 16 * 7 * per_layer,  # 16 micro-batches x 7 layers
        "second": 15 * 8 * per_layer,  # p - 1 = 15 micro-batches x k = 8 layers
        "last": 1 * 7 * per_layer + logits,
    }
    held = {
        stage: float(
            activations.activation_bytes(
                model, 8192.0, 8, 16, True, 0, 16, 1, 2.0, 0.0, 4.0, stage=stage
            )
        )
        for stage in pipeline.STAGES
    }
    assert_allclose(list(held.values()), list(expected.values()), rtol=1e-12)
    # The second stage (120 layer-micro-batches) beats the first (112); its weights are
    # 8 layers without an embedding against 7 with one (8 x 3.22 GB > 7 x 3.22 + 2.1 GB).
    result = estimate(LLAMA3_1F1B)
    assert_allclose(
        result["memory_per_gpu_gib"]["activations"] * memory.GIB, expected["second"], rtol=1e-12
    )
    dense, _ = memory.stage_parameters(model, 8, 16, 1, "second")
    assert_allclose(result["memory_per_gpu_gib"]["weights"] * memory.GIB, 2 * dense, rtol=1e-12)


@pytest.mark.parametrize(
    ("changes", "worst"),
    [
        # a 4 M-token vocabulary: the first stage's embedding and 16 micro-batches in flight
        ({"model": {"vocab_size": 4_000_000}}, "first"),
        ({}, "second"),  # as trained: 15 micro-batches x 8 layers
        # one micro-batch per step and a 1 M vocabulary: the last stage's head and logits
        ({"model": {"vocab_size": 1_000_000}, "training": {"global_batch_size": 128}}, "last"),
    ],
)
def test_memory_takes_the_worst_of_first_second_and_last_stage(changes: dict, worst: str) -> None:
    parsed = validate_scenario(scenario(LLAMA3_1F1B, **changes))
    w = build_workload(parsed)
    assert parsed.parallelism is not None
    lay = Layouts.single(parsed.parallelism)
    m = np.ceil(w.global_batch_size / 128)
    e = w.efficiency
    per_stage = {}
    for stage in pipeline.STAGES:
        states = memory.model_state_bytes(
            w.model, w.precision, lay.tp, lay.pp, lay.dp, lay.ep, lay.zero_stage, "none", stage
        )
        acts = activations.activation_bytes(
            w.model, 8192.0, lay.tp, lay.pp, lay.sequence_parallel, lay.recompute, m,
            lay.virtual_stages, w.activation_bytes, 0.0, e.logits_bytes, stage,
        )  # fmt: skip
        tensors = float((sum(states) + acts)[0])
        # allowance: fixed reserve + fragmentation share of the tensors (memory.allowance_bytes)
        per_stage[stage] = tensors * (1 + e.fragmentation) + e.reserved_memory_gib * memory.GIB
    assert max(per_stage, key=lambda s: per_stage[s]) == worst
    total = evaluate_layouts(w, lay).total_memory[0]
    assert_allclose(total, per_stage[worst], rtol=1e-12)


# Margins: framework overhead on every step, network jitter growing with the cluster.

BASE_PARTS = ("compute", "recompute", "tp_communication", "pp_bubble", "exposed_communication")


@pytest.mark.parametrize(
    "data",
    [
        SMALL,
        GPT3_175B,
        LLAMA3_1F1B,
        scenario(SMALL, cluster={"num_gpus": 8}, parallelism={"dp": 2}),
        scenario(GPT3_175B, margins={"framework_overhead": 0.25, "network_jitter": 0.2}),
    ],
    ids=["16-gpus", "1024-gpus", "16384-gpus", "one-node", "large-margins"],
)
def test_margins_are_shares_of_the_margin_free_step(data: dict) -> None:
    result = estimate(data)
    parts = result["time_per_step_breakdown_s"]
    base = sum(parts[k] for k in BASE_PARTS)
    parsed = validate_scenario(data)
    workload = build_workload(parsed)
    # The stack assumed pays its share of the framework-overhead margin.
    stack_share = workload.efficiency.overhead_scale
    o = parsed.margins.framework_overhead * stack_share
    j, scale = parsed.margins.network_jitter, workload.jitter_scale
    assert_allclose(parts["framework_overhead"], o * base, rtol=1e-12)
    assert_allclose(parts["network_jitter"], j * scale * base, rtol=1e-12, atol=1e-300)
    assert_allclose(
        parts["overheads"], parts["framework_overhead"] + parts["network_jitter"], rtol=1e-12
    )
    assert_allclose(result["step_time_s"], base * (1 + o + j * scale), rtol=1e-12)
    assert result["margins_applied"] == {
        "framework_overhead": o,
        "framework_overhead_scale": stack_share,
        "network_jitter": j * scale,
        "network_jitter_scale": scale,
    }


def test_network_jitter_costs_nothing_inside_one_node() -> None:
    one_node = scenario(SMALL, cluster={"num_gpus": 8}, parallelism={"dp": 2})
    default = estimate(one_node)
    doubled = estimate(scenario(one_node, margins={"network_jitter": 0.10}))
    assert default["time_per_step_breakdown_s"]["network_jitter"] == 0.0
    assert doubled["step_time_s"] == default["step_time_s"]
    assert doubled["training_days"] == default["training_days"]


def test_network_jitter_at_1024_gpus_is_the_stated_margin() -> None:
    # 1,024 GPUs, 8 per node: the scale is 1, so doubling j = 0.05 adds 0.05 x base.
    default = estimate(GPT3_175B)
    doubled = estimate(scenario(GPT3_175B, margins={"network_jitter": 0.10}))
    base = sum(default["time_per_step_breakdown_s"][k] for k in BASE_PARTS)
    assert_allclose(doubled["step_time_s"] - default["step_time_s"], 0.05 * base, rtol=1e-9)
    assert_allclose(default["time_per_step_breakdown_s"]["network_jitter"], 0.05 * base, 1e-12)


def _moe(shared_experts: int, gpus_per_node: int = 8) -> dict[str, Any]:
    """SMALL as a fine-grained MoE (DeepSeekMoE-like: 64 experts, top 6) over 16 devices,
    ep 16 so the all-to-alls cross nodes of 8 and outlast the shared experts."""
    return scenario(
        SMALL,
        model={
            "gated_mlp": True,
            "moe": {
                "num_experts": 64,
                "top_k": 6,
                "expert_ffn_hidden_size": 1408,
                "num_shared_experts": shared_experts,
            },
        },
        cluster={"num_gpus": 16, "gpus_per_node": gpus_per_node},
        parallelism={
            "tp": 1, "pp": 1, "dp": 16, "ep": 16, "micro_batch_size": 2, "zero_stage": 1,
            "recompute": "none",
        },
    )  # fmt: skip


def _without_shared_expert_overlap(data: dict[str, Any]) -> LayoutResults:
    parsed = validate_scenario(data)
    workload = build_workload(parsed)
    framework = dataclasses.replace(workload.framework, shared_expert_overlap=False)
    workload = dataclasses.replace(workload, framework=framework)
    return evaluate_layouts(workload, Layouts.single(parsed.parallelism))  # type: ignore[arg-type]


def test_expert_all_to_alls_hide_behind_the_shared_experts() -> None:
    # DeepSeek-AI 2024 (arXiv 2405.04434), section 3.4: the shared experts' computation
    # overlaps the expert-parallel all-to-alls. Here the all-to-alls cross nodes and outlast
    # the shared experts, so the hidden time is overlap x (forward + backward of the shared
    # experts, 1 + 2 forward passes) on every MoE layer of every micro-batch.
    data = _moe(shared_experts=2)
    workload = build_workload(validate_scenario(data))
    assert workload.framework.shared_expert_overlap
    overlapped, exposed = evaluate(data), _without_shared_expert_overlap(data)
    tokens = 2 * SMALL["model"]["seq_len"]
    shared = 3 * SMALL["model"]["num_layers"] * gemm.shared_expert_time(workload, tokens, 1)
    hidden = overlapped.num_micro_batches * workload.software.overlap * shared
    assert_allclose(exposed.exposed_communication - overlapped.exposed_communication, hidden)
    assert exposed.exposed_communication[0] > hidden[0]  # the all-to-alls outlast them


def test_without_shared_experts_nothing_hides_the_all_to_alls() -> None:
    data = _moe(shared_experts=0)
    assert_allclose(
        evaluate(data).exposed_communication,
        _without_shared_expert_overlap(data).exposed_communication,
        rtol=1e-12,
    )


def test_shared_expert_time_is_linear_in_the_shared_experts_and_above_their_flops() -> None:
    one, two = (build_workload(validate_scenario(_moe(n))) for n in (1, 2))
    tokens = 4096.0
    time_one = gemm.shared_expert_time(one, tokens, 1)
    assert_allclose(gemm.shared_expert_time(two, tokens, 1), 2 * time_one, rtol=1e-12)
    # Gate + up (2 h f) and down (f h) matmuls, 2 FLOPs per multiply-add, on every token.
    flops = 2 * tokens * 3 * SMALL["model"]["hidden_size"] * 1408
    assert time_one > flops / one.peak_matmul_flops


def test_mcore_buckets_follow_megatron_cores_default_size() -> None:
    # DistributedDataParallelConfig.bucket_size: max(40 M, 1 M x dp) parameters, and each
    # model chunk has buffers of its own.
    params = np.array([7.4e9, 7.4e9, 7.4e9, 30e6, 0.0])
    dp = np.array([16.0, 484.0, 2048.0, 16.0, 16.0])
    chunks = np.array([1.0, 8.0, 1.0, 4.0, 1.0])
    assert_allclose(mcore_buckets(params, dp, chunks), [185.0, 16.0, 4.0, 4.0, 0.0])


def _with_and_without_mcore_ddp(data: dict[str, Any]) -> tuple[Any, Layouts, Any, Any]:
    """The scenario parsed, its layout, its workload, and the workload with the profile's
    Megatron-Core DDP switched off (per-layer collectives, one chunk)."""
    parsed = validate_scenario(data)
    assert parsed.parallelism is not None
    workload = build_workload(parsed)
    plain = dataclasses.replace(
        workload, framework=dataclasses.replace(workload.framework, mcore_ddp=False)
    )
    return parsed, Layouts.single(parsed.parallelism), workload, plain


def test_megatron_core_data_parallel_latency_shrinks_with_bigger_buckets() -> None:
    # A 175B stage reduced over 484 ranks (MLPerf's 11,616-GPU layout): the ring's latency
    # is paid once per bucket, and 16 buckets of 484 M parameters cost less than 17
    # per-layer collectives; the bytes are the same.
    data = scenario(
        GPT3_175B,
        cluster={"num_gpus": 11616, "accelerator": "H100-SXM"},
        training={"global_batch_size": 2904},
        parallelism={"tp": 4, "pp": 6, "dp": 484, "micro_batch_size": 1, "zero_stage": 1},
    )
    parsed, layouts, workload, plain = _with_and_without_mcore_ddp(data)
    params, grads = layout_comms._dp_gather_times(workload, layouts)
    plain_params, plain_grads = layout_comms._dp_gather_times(plain, layouts)
    _, latency = layout_comms._group_link(workload, layouts.dp, layouts.tp)
    steps = 483.0
    stage = memory.stage_parameters(parsed.model, 4.0, 6.0, 1.0)[0]
    buckets = mcore_buckets(stage, 484.0, 1.0)
    assert_allclose(plain_grads - grads, steps * latency * (17.0 - buckets), rtol=1e-9)
    assert_allclose(plain_params - params, steps * latency * (17.0 - buckets), rtol=1e-9)
    assert evaluate(data).dp_communication[0] == pytest.approx(params[0] + grads[0], rel=1e-12)


def test_chunked_exposure_is_one_pass_for_one_chunk_and_shrinks_with_chunks() -> None:
    comm, compute_s, overlap = 0.29, 0.028, 0.8
    one = chunked_exposed_time(comm, compute_s, 1.0, 6.0, overlap)
    assert_allclose(one, comms.exposed_time(comm, compute_s, overlap), rtol=1e-12)
    chunks = np.array([1.0, 2.0, 4.0, 8.0])
    exposed = chunked_exposed_time(comm, compute_s, chunks, 6.0, overlap)
    assert np.all(np.diff(exposed) < 0)
    # v = 8, six micro-batches per chunk turn: the window is 0.028 / 8 x (1 + 7 x 6).
    window = compute_s / 8 * (1 + 7 * 6)
    assert_allclose(exposed[-1], comm - overlap * window, rtol=1e-12)
    # However long the window, the first chunk's share has only its own pass to hide
    # behind: two chunks, a 0.2 s collective, 0.05 s passes eight micro-batches apart.
    first = comms.exposed_time(0.2 / 2, 0.05 / 2, overlap)
    assert first > comms.exposed_time(0.2, 0.05 / 2 * (1 + 8), overlap)
    assert_allclose(chunked_exposed_time(0.2, 0.05, 2.0, 8.0, overlap), first, rtol=1e-12)


def test_a_dense_model_pays_the_data_parallel_latency_once() -> None:
    # One reduce-scatter per layer of the stage (and one for the embeddings); no expert
    # collectives when there are no experts: (L + 1) (n - 1) alpha + (n - 1)/n M / beta.
    data = scenario(
        SMALL,
        cluster={"num_gpus": 16},
        training={"global_batch_size": 16},
        parallelism={"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 1, "zero_stage": 0},
        framework="torchtitan",
    )
    parsed = validate_scenario(data)
    assert parsed.parallelism is not None
    workload = build_workload(parsed)
    layouts = Layouts.single(parsed.parallelism)
    bandwidth, latency = layout_comms._group_link(workload, layouts.dp, layouts.tp)
    params = memory.stage_parameters(parsed.model, 1.0, 1.0, 1.0)[0]
    gradient_bytes = memory.bytes_per_parameter(workload.precision, workload.optimizer, False)[1]
    collectives = parsed.model.num_layers + 1.0
    expected = comms.reduce_scatter_time(
        params * gradient_bytes, 16.0, bandwidth, latency * collectives
    )
    _, grads = layout_comms._dp_gather_times(workload, layouts)
    assert_allclose(grads, expected, rtol=1e-12)


def test_megatron_cores_fsdp_gathers_are_not_synced_per_chunk() -> None:
    # The per-chunk syncs are the DDP's and the distributed optimizer's (ZeRO 0 and 1);
    # under its FSDP (stage 3) every micro-batch gathers the weights, as on any stack.
    data = scenario(
        GPT3_175B,
        training={"global_batch_size": 64},
        parallelism={
            "zero_stage": 3,
            "pipeline_schedule": "interleaved",
            "virtual_stages": 2,
        },
    )
    _, layouts, workload, plain = _with_and_without_mcore_ddp(data)
    ours, theirs = evaluate_layouts(workload, layouts), evaluate_layouts(plain, layouts)
    assert_allclose(ours.exposed_communication, theirs.exposed_communication, rtol=1e-12)
    # while ZeRO 1 on the same layout hides more behind the other chunks' passes
    one = Layouts.from_arrays(
        **{
            **{k: getattr(layouts, k) for k in layouts.__dataclass_fields__},
            "zero_stage": np.array([1.0]),
        }
    )
    assert (
        evaluate_layouts(workload, one).exposed_communication
        < evaluate_layouts(plain, one).exposed_communication
    )
