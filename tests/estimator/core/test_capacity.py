"""Capacity planning's estimator side: the size ladder, the searched points, the frontier."""

from __future__ import annotations

from typing import Any

from estimator.core import search
from estimator.core.capacity import (
    SPREAD_SAMPLES,
    SPREAD_SEED,
    capacity_points,
    cluster_sizes,
    days_floor,
    ideal_gpu_hours,
    pareto_frontier,
)
from estimator.core.finetune import training_flops_per_token
from estimator.core.montecarlo import monte_carlo
from estimator.core.presets import preset_scenario
from estimator.core.validation import validate_scenario
from estimator.core.workload import build_workload

from .scenarios import SMALL

MODEL_AND_TRAINING: dict[str, Any] = {
    "format_version": 1,
    "model": SMALL["model"],
    "training": {"tokens": 2e10, "global_batch_size": 256, "precision": "bf16"},
}


def test_cluster_sizes_are_powers_of_two_and_node_multiples() -> None:
    assert cluster_sizes(100, 8) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]
    assert cluster_sizes(96, 8)[-1] == 96


def test_pareto_frontier_drops_dominated_points() -> None:
    points = [
        {"training_days": 1.0, "cost": 10.0},
        {"training_days": 2.0, "cost": 5.0},
        {"training_days": 2.0, "cost": 12.0},
        {"training_days": 3.0, "cost": 5.0},
    ]
    assert pareto_frontier(points) == points[:2]


def test_capacity_points_are_the_searchs_best_layout_at_each_size_in_any_split() -> None:
    sizes = cluster_sizes(64, 8)
    whole = capacity_points(MODEL_AND_TRAINING, "H100-SXM", sizes)
    halves = [
        capacity_points(MODEL_AND_TRAINING, "H100-SXM", part) for part in (sizes[::2], sizes[1::2])
    ]
    joined = sorted((p for half in halves for p in half["points"]), key=lambda p: p["num_gpus"])
    assert joined == whole["points"]
    assert sorted(m for half in halves for m in half["misses"]) == whole["misses"]
    for point in whole["points"]:
        cluster = {"accelerator": "H100-SXM", "num_gpus": point["num_gpus"]}
        best = search({**MODEL_AND_TRAINING, "cluster": cluster, "parallelism": "auto"}, top_k=1)
        assert point["gpu_hours"] == best["results"][0]["gpu_hours"]
        assert point["parallelism"] == best["results"][0]["parallelism"]


def test_each_capacity_point_carries_its_monte_carlo_days() -> None:
    (point,) = capacity_points(MODEL_AND_TRAINING, "H100-SXM", [64])["points"]
    cluster = {"accelerator": "H100-SXM", "num_gpus": 64}
    data = {**MODEL_AND_TRAINING, "format_version": 1, "cluster": cluster, "parallelism": "auto"}
    spread = monte_carlo(data, seed=SPREAD_SEED, samples=SPREAD_SAMPLES)
    assert point["training_days_spread"] == {
        key: spread["training_days"][key] for key in ("p10", "p50", "p90")
    }
    assert point["training_days_quantiles"] == spread["training_days_quantiles"]
    assert point["training_days_quantiles"][50] == point["training_days_spread"]["p50"]


def test_ideal_gpu_hours_is_the_model_flops_at_the_workloads_fastest_rates() -> None:
    cluster = {"accelerator": "H100-SXM", "num_gpus": 64}
    data = {**MODEL_AND_TRAINING, "cluster": cluster, "parallelism": "auto"}
    scenario = validate_scenario(data)
    workload = build_workload(scenario)
    model = scenario.model
    flops = training_flops_per_token(model, scenario.training.method)
    # Causal attention: half of the 12 l w s score FLOPs counted per token.
    scores = 12 * model.num_layers * model.score_width * model.seq_len
    bf16_peak = 989.4e12  # H100 SXM dense bf16, the catalog's datasheet figure
    gemm, attention = workload.efficiency.gemm, workload.efficiency.attention
    seconds = (flops - scores) / (bf16_peak * gemm) + 0.5 * scores / (bf16_peak * attention)
    expected = 2e10 * seconds / 3600
    assert abs(ideal_gpu_hours(MODEL_AND_TRAINING, cluster) / expected - 1) < 1e-9
    assert days_floor(2400.0, 100) == 1.0  # 2,400 device-hours on 100 devices: one day


def test_no_searched_point_beats_its_floor() -> None:
    """The floors prune a plan only because they are below every real point: checked on
    the ladder of sizes of several accelerators, precisions and a spot run."""
    cases = [
        (MODEL_AND_TRAINING, "H100-SXM"),
        (
            {
                **MODEL_AND_TRAINING,
                "training": {**MODEL_AND_TRAINING["training"], "precision": "fp8"},
            },
            "H100-SXM",
        ),
        ({**MODEL_AND_TRAINING, "run": {"capacity": "spot"}}, "A100-80GB-SXM"),
        (MODEL_AND_TRAINING, "MI300X"),
        (MODEL_AND_TRAINING, "TPU-v5p"),
        (MODEL_AND_TRAINING, "L4"),
    ]
    long_model = {**MODEL_AND_TRAINING["model"], "seq_len": 65536}
    cases.append(({**MODEL_AND_TRAINING, "model": long_model}, "H100-SXM"))
    llama = preset_scenario("llama3-70b", accelerator="H100-SXM", num_gpus=8)
    llama.pop("cluster")
    cases.append(({**llama, "training": {**llama["training"], "tokens": 2e12}}, "B200"))
    checked = 0
    for scenario, accelerator in cases:
        floor = ideal_gpu_hours(scenario, {"accelerator": accelerator, "num_gpus": 8})
        sizes = cluster_sizes(4096, 8)
        for point in capacity_points(scenario, accelerator, sizes)["points"]:
            assert point["gpu_hours"] >= floor
            assert point["training_days"] >= days_floor(floor, point["num_gpus"])
            checked += 1
    assert checked > 50
