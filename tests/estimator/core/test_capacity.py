"""Capacity planning: the deadline and budget are respected and the frontier is Pareto."""

from __future__ import annotations

from typing import Any

from estimator.core import search
from estimator.core.capacity import (
    ClusterOption,
    capacity_points,
    cluster_sizes,
    meets_limits,
    pareto_frontier,
    plan_capacity,
)

from .scenarios import SMALL

MODEL_AND_TRAINING: dict[str, Any] = {
    "format_version": 1,
    "model": SMALL["model"],
    "training": {"tokens": 2e10, "global_batch_size": 256, "precision": "bf16"},
}
OPTIONS = [
    ClusterOption("H100-SXM", price_per_gpu_hour=2.5, max_gpus=64),
    ClusterOption("A100-80GB-SXM", price_per_gpu_hour=1.2, max_gpus=64),
]


def dominated(point: dict[str, Any], others: list[dict[str, Any]]) -> bool:
    return any(
        o["training_days"] <= point["training_days"]
        and o["cost"] <= point["cost"]
        and (o["training_days"], o["cost"]) != (point["training_days"], point["cost"])
        for o in others
    )


def test_cluster_sizes_are_powers_of_two_and_node_multiples() -> None:
    assert cluster_sizes(100, 8) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]
    assert cluster_sizes(96, 8)[-1] == 96


def test_meets_limits_needs_both_and_a_point_on_a_limit_meets_it() -> None:
    point = {"training_days": 10.0, "cost": 500.0}
    assert meets_limits(point, deadline_days=10.0, budget=500.0)
    assert meets_limits(point, deadline_days=None, budget=None)
    assert not meets_limits(point, deadline_days=9.99, budget=None)
    assert not meets_limits(point, deadline_days=None, budget=499.99)
    assert not meets_limits(point, deadline_days=9.0, budget=1e9)
    assert not meets_limits(point, deadline_days=1e9, budget=400.0)


def test_plan_capacity_feasible_is_every_point_meeting_the_limits() -> None:
    everything = plan_capacity(MODEL_AND_TRAINING, OPTIONS)["frontier"]
    deadline = sorted(p["training_days"] for p in everything)[len(everything) // 2]
    budget = sorted(p["cost"] for p in everything)[-2]
    plan = plan_capacity(MODEL_AND_TRAINING, OPTIONS, deadline_days=deadline, budget=budget)
    met = [p for p in everything if meets_limits(p, deadline_days=deadline, budget=budget)]
    assert met
    assert {(p["accelerator"], p["num_gpus"]) for p in met} <= {
        (p["accelerator"], p["num_gpus"]) for p in plan["feasible"]
    }
    assert all(meets_limits(p, deadline_days=deadline, budget=budget) for p in plan["feasible"])


def test_plan_capacity_frontier_is_pareto() -> None:
    plan = plan_capacity(MODEL_AND_TRAINING, OPTIONS)
    frontier = plan["frontier"]
    assert len(frontier) >= 2
    assert not any(dominated(p, frontier) for p in frontier)
    days = [p["training_days"] for p in frontier]
    assert days == sorted(days)


def test_plan_capacity_respects_deadline_cheapest_first() -> None:
    everything = plan_capacity(MODEL_AND_TRAINING, OPTIONS)["frontier"]
    deadline = sorted(p["training_days"] for p in everything)[len(everything) // 2]
    plan = plan_capacity(MODEL_AND_TRAINING, OPTIONS, deadline_days=deadline)
    assert plan["feasible"]
    assert all(p["training_days"] <= deadline for p in plan["feasible"])
    costs = [p["cost"] for p in plan["feasible"]]
    assert costs == sorted(costs)


def test_plan_capacity_budget_and_impossible_deadline() -> None:
    plan = plan_capacity(MODEL_AND_TRAINING, OPTIONS, deadline_days=1e-6)
    assert plan["feasible"] == []
    budget_plan = plan_capacity(MODEL_AND_TRAINING, OPTIONS, budget=1e12)
    assert (
        len(budget_plan["feasible"])
        == budget_plan["points_evaluated"] - (budget_plan["sizes_without_fitting_layout"])
    )


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
