"""Per-scenario constants: SI units from the catalog, peaks per precision, bytes per value,
parameter counts, tokens per step, the network-jitter scale and the usable device memory."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from numpy.testing import assert_allclose

from estimator.core import load_catalog, validate_scenario
from estimator.core.calibration import Efficiency
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.memory import GIB
from estimator.core.workload import (
    activation_bytes_for,
    attention_peak_tflops,
    build_workload,
    matmul_peak_tflops,
    network_jitter_scale,
    node_size_of,
    peak_16bit_tflops,
)

from .scenarios import GPT3_175B, SMALL, scenario


@pytest.mark.parametrize(
    ("devices", "node", "expected"),
    [
        (1, 8, 0.0),
        (8, 8, 0.0),  # one node: no scale-out network
        (72, 72, 0.0),  # one NVL72 rack
        (16, 8, 1 / 7),  # log2(2) / log2(128)
        (1024, 8, 1.0),  # the stated margin at 1,024 devices
        (16384, 8, 11 / 7),  # Llama 3 405B: log2(2048) / 7
        (131072, 8, 2.0),  # log2(16384) / 7 = 2, the cap
        (1 << 20, 8, 2.0),  # capped beyond
        (1024, 4, 8 / 7),  # log2(256) / 7: the reference is 128 nodes of 8
    ],
)
def test_network_jitter_scale_logarithmic_in_cluster_size(
    devices: int, node: int, expected: float
) -> None:
    assert_allclose(network_jitter_scale(devices, node), expected, rtol=1e-12, atol=0.0)


def test_network_jitter_scale_is_monotone_and_capped() -> None:
    values = [network_jitter_scale(n, 8) for n in range(1, 300_000, 997)]
    assert all(b >= a for a, b in itertools.pairwise(values))
    assert max(values) == 2.0
    for n, v in zip(range(1, 300_000, 997), values, strict=True):
        if 8 < n <= 131072:
            assert_allclose(v, math.log2(n / 8) / math.log2(128), rtol=1e-12)


@pytest.mark.parametrize(
    ("data", "framework", "headroom"),
    [
        (GPT3_175B, "megatron-lm", 0.10),  # "auto" on GPUs
        (scenario(GPT3_175B, framework="deepspeed"), "deepspeed", 0.10),
        (
            scenario(
                SMALL,
                cluster={"accelerator": "TPU-v5p", "num_gpus": 16},
                parallelism={"zero_stage": 3},
            ),
            "maxtext",  # "auto" on TPUs
            0.05,
        ),
    ],
)
def test_usable_memory_is_capacity_less_the_frameworks_headroom(
    data: dict, framework: str, headroom: float
) -> None:
    w = build_workload(validate_scenario(data))
    assert w.framework.id == framework
    assert_allclose(w.usable_memory, w.spec.memory_gib * GIB * (1 - headroom), rtol=1e-12)


def test_workload_jitter_scale_uses_the_node_size() -> None:
    w = build_workload(validate_scenario(GPT3_175B))  # 1,024 A100s, 8 per node
    assert w.jitter_scale == 1.0
    w = build_workload(validate_scenario(scenario(SMALL, cluster={"gpus_per_node": 16})))
    assert w.jitter_scale == 0.0


def test_build_workload_converts_the_h100_datasheet_to_si_units() -> None:
    """NVIDIA H100 SXM5 datasheet: 989.4 TFLOP/s dense BF16, 1,978.9 dense FP8, 3.35 TB/s
    HBM3, 450 GB/s NVLink per direction, one 400 Gbit/s NIC per GPU."""
    w = build_workload(validate_scenario(SMALL))  # 16 H100s, bf16
    assert_allclose(w.peak_matmul_flops, 989.4e12, rtol=1e-12)
    assert_allclose(w.peak_16bit_flops, 989.4e12, rtol=1e-12)
    assert_allclose(w.memory_bandwidth, 3.35e12, rtol=1e-12)
    assert_allclose(w.intra_node_bandwidth, 450e9, rtol=1e-12)
    assert_allclose(w.inter_node_bandwidth, 400e9 / 8, rtol=1e-12)  # bits to bytes
    assert_allclose(w.host_link_bandwidth, w.efficiency.host_link_gbs * 1e9, rtol=1e-12)
    assert (w.num_gpus, w.node_size, w.global_batch_size, w.tokens) == (16, 8, 256, 1e11)


def test_build_workload_fp8_keeps_attention_at_the_16bit_peak() -> None:
    w = build_workload(validate_scenario(scenario(SMALL, training={"precision": "fp8"})))
    assert_allclose(w.peak_matmul_flops, 1978.9e12, rtol=1e-12)
    assert_allclose(w.peak_attention_flops, 989.4e12, rtol=1e-12)


def test_build_workload_efficiency_override_replaces_the_calibration() -> None:
    mine = Efficiency(gemm=0.5, attention=0.25)
    assert build_workload(validate_scenario(SMALL), efficiency=mine).efficiency is mine
    assert build_workload(validate_scenario(SMALL)).efficiency != mine


def test_build_workload_counts_gpt3_parameters_as_12_l_h2_plus_v_h() -> None:
    """GPT-3 175B (Brown et al. 2020): 96 layers of 12 h^2 weights, h = 12288, plus the tied
    embedding V h, V = 51200: 174.6 B without biases and norms."""
    w = build_workload(validate_scenario(GPT3_175B))
    expected = 96 * 12 * 12288**2 + 51200 * 12288
    assert w.parameters == expected == 174_575_321_088
    assert w.active_parameters == expected


def test_build_workload_tokens_per_step_is_global_batch_times_sequence() -> None:
    """GPT-3 on 1,024 A100s: 1,536 sequences of 2,048 tokens per step."""
    data = validate_scenario(GPT3_175B)
    assert data.parallelism is not None
    result = evaluate_layouts(build_workload(data), Layouts.single(data.parallelism))
    assert result.tokens_per_step[0] == 1536 * 2048 == 3_145_728
    assert result.num_micro_batches[0] == 1536 / (16 * 1)


def test_build_workload_tokens_per_step_rounds_the_micro_batches_up() -> None:
    """B = 250 over dp 4 x b 2 runs ceil(250 / 8) = 32 micro-batches: 256 sequences."""
    data = validate_scenario(scenario(SMALL, training={"global_batch_size": 250}))
    assert data.parallelism is not None
    result = evaluate_layouts(build_workload(data), Layouts.single(data.parallelism))
    assert result.num_micro_batches[0] == 32
    assert result.tokens_per_step[0] == 32 * 4 * 2 * 2048


@pytest.mark.parametrize(
    ("precision", "expected"),
    [("fp32", 4.0), ("tf32", 4.0), ("fp16", 2.0), ("bf16", 2.0), ("fp8", 2.0)],
)
def test_activation_bytes_for_each_precision(precision: str, expected: float) -> None:
    assert activation_bytes_for(precision) == expected


def test_peak_tflops_per_precision_with_fallbacks() -> None:
    h100 = load_catalog()["H100-SXM"]
    assert matmul_peak_tflops(h100, "fp32") == 67.0  # true FP32, no tensor cores
    assert matmul_peak_tflops(h100, "tf32") == 494.5
    assert attention_peak_tflops(h100, "bf16") == 989.4
    assert attention_peak_tflops(h100, "fp8") == 989.4  # no fp8 FlashAttention
    fp16_only = dataclasses.replace(h100, peak_tflops={"fp16": 300.0, "fp8": 600.0})
    assert peak_16bit_tflops(fp16_only) == 300.0
    assert attention_peak_tflops(fp16_only, "fp8") == 300.0
    no_16bit = dataclasses.replace(h100, peak_tflops={"fp32": 10.0})
    assert peak_16bit_tflops(no_16bit) == 0.0
    assert matmul_peak_tflops(no_16bit, "bf16") == 0.0


def test_node_size_of_gpus_is_the_node_and_of_tpus_the_slice() -> None:
    assert node_size_of(validate_scenario(SMALL)) == 8
    assert node_size_of(validate_scenario(scenario(SMALL, cluster={"gpus_per_node": 4}))) == 4
    tpu = scenario(
        SMALL,
        cluster={"accelerator": "TPU-v5p", "num_gpus": 16, "num_slices": 2},
        parallelism={"tp": 1, "pp": 1, "dp": 16, "zero_stage": 3, "micro_batch_size": 1},
    )
    assert node_size_of(validate_scenario(tpu)) == 8  # 16 chips in 2 slices
