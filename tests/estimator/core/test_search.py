"""Layout search: agreement with estimate, fitting results, counts, chunks, CLI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, merge_search_results, search, search_chunk
from estimator.core.layout import evaluate_layouts
from estimator.core.search import _structural_slice, grid_size, layout_config, layouts_from_columns
from estimator.core.validation import validate_scenario
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario
from .test_cli import run

SMALL_AUTO = scenario(SMALL, parallelism="auto")
GPT3_AUTO = scenario(GPT3_175B, parallelism="auto")
TRILLION_ON_8 = scenario(
    GPT3_175B,
    model={"num_layers": 128, "hidden_size": 25600, "num_attention_heads": 160},
    cluster={"num_gpus": 8},
    parallelism="auto",
)


def without_timing(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "seconds"}


def test_search_agrees_with_estimate_on_random_layouts() -> None:
    parsed = validate_scenario(GPT3_AUTO)
    part = _structural_slice(parsed, 0, grid_size(parsed))
    rows = np.random.default_rng(7).choice(len(part.flat_index), size=40, replace=False)
    columns = {k: v[rows] for k, v in part.columns.items()}
    arrays = evaluate_layouts(build_workload(parsed), layouts_from_columns(columns))
    for i in range(len(rows)):
        explicit = scenario(GPT3_175B, parallelism=layout_config(columns, i).as_dict())
        single = estimate(explicit)
        assert_allclose(single["step_time_s"], arrays.step_time[i], rtol=1e-9)
        assert_allclose(
            single["memory_per_gpu_gib"]["total"] * 2**30, arrays.total_memory[i], rtol=1e-9
        )


def test_search_results_fit_and_are_ranked() -> None:
    found = search(GPT3_AUTO, top_k=5)
    days = [r["training_days"] for r in found["results"]]
    assert len(days) == 5
    assert days == sorted(days)
    assert all(r["fits_in_memory"] for r in found["results"])


def test_search_counts_add_up() -> None:
    found = search(SMALL_AUTO)
    rejected = sum(found["rejected"].values())
    assert found["layouts_considered"] == found["layouts_fitting"] + rejected
    assert found["layouts_considered"] > found["layouts_fitting"] > 0


def test_search_best_matches_every_fitting_layout() -> None:
    parsed = validate_scenario(SMALL_AUTO)
    part = _structural_slice(parsed, 0, grid_size(parsed))
    best = search(SMALL_AUTO, top_k=1)["results"][0]
    w = build_workload(parsed)
    r = evaluate_layouts(w, layouts_from_columns(part.columns))
    fits = r.total_memory / 2**30 <= w.spec.memory_gib
    assert_allclose(best["step_time_s"], r.step_time[fits].min(), rtol=1e-9)


def test_search_impossible_request_gives_reason() -> None:
    found = search(TRILLION_ON_8)
    assert found["results"] == []
    assert found["layouts_fitting"] == 0
    assert "no layout fits in memory" in found["reason"]


def test_search_chunks_merge_to_the_whole_search() -> None:
    whole = search(SMALL_AUTO, top_k=4)
    parts = [search_chunk(SMALL_AUTO, i, 7, top_k=4) for i in range(7)]
    assert without_timing(merge_search_results(parts, top_k=4)) == without_timing(whole)


def test_search_cost_objective_needs_price_and_prices_results() -> None:
    with pytest.raises(ScenarioError, match=r"cost\.price_per_gpu_hour"):
        search(SMALL_AUTO, objective="cost")
    priced = scenario(SMALL_AUTO, cost={"price_per_gpu_hour": 2.5})
    found = search(priced, top_k=3, objective="cost")
    result = found["results"][0]
    assert_allclose(result["cost"]["total"], result["gpu_hours"] * 2.5)
    by_time = search(priced, top_k=3)
    assert [r["parallelism"] for r in found["results"]] == [
        r["parallelism"] for r in by_time["results"]
    ]


def test_estimate_auto_returns_the_best_layout() -> None:
    best = search(SMALL_AUTO, top_k=1)["results"][0]
    assert estimate(SMALL_AUTO) == best


def test_estimate_auto_without_fitting_layout_reports_least_memory() -> None:
    result = estimate(TRILLION_ON_8)
    assert result["fits_in_memory"] is False
    assert result["warnings"][0].startswith("no layout fits in memory")


def test_cli_search_prints_top_k() -> None:
    done = run("search", "-", "--top", "2", stdin=json.dumps(SMALL_AUTO))
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["results"]) == 2


def test_cli_search_cost_without_price_exits_2() -> None:
    done = run("search", "-", "--objective", "cost", stdin=json.dumps(SMALL_AUTO))
    assert done.returncode == 2
    assert done.stderr.startswith("cost.price_per_gpu_hour: is required")
