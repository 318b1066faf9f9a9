"""Per-scenario constants: the network-jitter scale and the usable device memory."""

from __future__ import annotations

import itertools
import math

import pytest
from numpy.testing import assert_allclose

from estimator.core import validate_scenario
from estimator.core.memory import GIB
from estimator.core.workload import build_workload, network_jitter_scale

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
