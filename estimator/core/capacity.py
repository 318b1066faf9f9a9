"""Capacity planning's estimator side: the fastest fitting layout at each cluster size.

For an accelerator and a list of cluster sizes the layout search
(:func:`estimator.core.search.search`) finds the fastest layout that fits; each size becomes
a point (training days, GPU-hours). Cluster sizes tried are the powers of two and the node
multiples ``node x 2^k`` and ``node x 3 x 2^k`` (k >= 0), plus ``max_gpus`` itself when it is
a node multiple: a geometric ladder, since throughput changes slowly between neighbouring
sizes and each size costs one whole search.

Each point also carries the Monte Carlo's spread of its training days (P10/P50/P90 and the
quantile grid of :mod:`estimator.core.deadline`), from :data:`SPREAD_SAMPLES` samples at the
fixed :data:`SPREAD_SEED`, so a plan can say how likely each option is to meet its deadline;
a sample costs microseconds beside the layout search.

The caller prices the points (``cost = gpu_hours x price``), keeps those that meet its
deadline and budget, and takes their cost-versus-days frontier (:func:`pareto_frontier`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from estimator.core.constants import (
    BACKWARD_TO_FORWARD,
    CAUSAL_FRACTION,
    FORWARD_BACKWARD_PASSES,
    TERA,
)
from estimator.core.finetune import backward_layer_share, training_flops_per_token
from estimator.core.gemm import matmul_efficiency
from estimator.core.model import attention_flops_per_token
from estimator.core.montecarlo import monte_carlo
from estimator.core.search import search
from estimator.core.validation import validate_scenario
from estimator.core.workload import Workload, build_workload

#: Samples and seed of each point's Monte Carlo: a run's default count, one seed for every
#: point so that a plan reproduces.
SPREAD_SAMPLES = 4000
SPREAD_SEED = 0


def cluster_sizes(max_gpus: int, node_size: int) -> list[int]:
    """Cluster sizes tried for one option, ascending (see the module docstring).

    Parameters
    ----------
    max_gpus : int
        Most devices the option offers. [devices]
    node_size : int
        Devices per node. [devices]

    Returns
    -------
    list of int
        Powers of two, node x 2^k and node x 3 x 2^k up to ``max_gpus``, and ``max_gpus``
        itself when it is a node multiple. [devices]
    """
    sizes = {1 << k for k in range(max_gpus.bit_length()) if 1 << k <= max_gpus}
    for base in (node_size, 3 * node_size):
        size = base
        while size <= max_gpus:
            sizes.add(size)
            size *= 2
    if max_gpus % node_size == 0:
        sizes.add(max_gpus)
    return sorted(sizes)


def _searched_point(scenario: Mapping[str, Any], cluster: dict[str, Any]) -> dict[str, Any] | None:
    data = {**scenario, "format_version": 1, "cluster": cluster, "parallelism": "auto"}
    found = search(data, top_k=1)
    if not found["results"]:
        return None
    best = found["results"][0]
    spread = monte_carlo(data, seed=SPREAD_SEED, samples=SPREAD_SAMPLES, baseline=best)
    days = spread["training_days"]
    return {
        "accelerator": cluster["accelerator"],
        "num_gpus": cluster["num_gpus"],
        "training_days": best["training_days"],
        "gpu_hours": best["gpu_hours"],
        "mfu": best["mfu"],
        "parallelism": best["parallelism"],
        "training_days_spread": {key: days[key] for key in ("p10", "p50", "p90")},
        "training_days_quantiles": spread["training_days_quantiles"],
    }


def capacity_points(
    scenario: Mapping[str, Any],
    accelerator: str,
    sizes: Iterable[int],
    *,
    gpus_per_node: int | None = None,
) -> dict[str, Any]:
    """The fastest fitting layout of ``scenario`` at each cluster size: one chunk of a plan.

    Unpriced: a point's cost is its GPU-hours times whatever price the caller applies, so
    every option of one accelerator shares these searches. The chunks of a plan can run
    anywhere (a worker each); their union is the plan's points.

    Parameters
    ----------
    scenario : mapping
        ``model``, ``training`` and optional ``margins``/``run`` in the contract's format;
        ``cluster`` and ``parallelism`` are replaced.
    accelerator : str
        Catalog id.
    sizes : iterable of int
        Cluster sizes to search. [devices]
    gpus_per_node : int, optional
        Devices per node; None takes the catalog's.

    Returns
    -------
    dict
        ``points``: per size that fits, ``accelerator``, ``num_gpus``, ``training_days``,
        ``gpu_hours``, ``mfu``, ``parallelism`` (the search's best layout) and the Monte
        Carlo's ``training_days_spread`` (``p10``, ``p50``, ``p90``) and
        ``training_days_quantiles``, in the order of ``sizes``; ``misses``: the sizes with
        no layout that fits.
    """
    points, misses = [], []
    for size in sizes:
        cluster: dict[str, Any] = {"accelerator": accelerator, "num_gpus": int(size)}
        if gpus_per_node is not None:
            cluster["gpus_per_node"] = gpus_per_node
        point = _searched_point(scenario, cluster)
        if point is None:
            misses.append(int(size))
        else:
            points.append(point)
    return {"points": points, "misses": misses}


SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0


def ideal_gpu_hours(scenario: Mapping[str, Any], cluster: Mapping[str, Any]) -> float:
    """A floor under the GPU-hours of every layout of ``scenario`` on ``cluster``'s accelerator.

    The model's training FLOPs per token F
    (:func:`estimator.core.finetune.training_flops_per_token`) are the weights' matmuls and
    the attention scores' F_s, counted non-causally. The estimate times a weight matmul at
    its padded FLOPs over ``P_m x e_m`` (:func:`estimator.core.gemm.gemm_time`: the matmul
    peak and efficiency of the workload, or the 16-bit ones ``P_16 x e_gemm`` for a matmul
    fp8 keeps in 16 bits), and attention at no less than ``CAUSAL_FRACTION x`` its counted
    FLOPs over ``P_a x e_a`` (FlashAttention computes half the causal tiles, its backward
    2.5 x the forward against 2 x counted; unfused attention all of them at ``P_a x e_gemm``:
    :func:`estimator.core.compute.attention_times`). Every other part of a step (elementwise
    passes, the optimizer, recomputation, bubbles, communication not hidden, margins) and of
    the whole run (:mod:`estimator.core.wholerun`) only adds time, and the layout only splits
    this work over the devices. So T tokens take at least
    ``T x ((F - F_s) / max(P_m e_m, P_16 e_gemm) + CAUSAL_FRACTION F_s / (P_a e))``
    device-seconds on any number of devices, e being e_a with FlashAttention and e_gemm
    without; gpu_hours = 24 n x training_days gives the floor
    of days on n devices (:func:`days_floor`).

    The peaks and efficiencies are the workload's own (power limit, stack and calibration
    included). A scenario with framework fallbacks may be searched on another stack, whose
    efficiencies may be higher: its floor takes every efficiency as 1 (MFU <= 1 at the
    datasheet peak), a floor for any stack.

    Parameters
    ----------
    scenario : mapping
        ``model``, ``training`` and optional ``margins``/``run`` in the contract's format.
    cluster : mapping
        ``accelerator``, ``num_gpus`` (any size: the floor does not depend on it) and
        optional ``gpus_per_node``.

    Returns
    -------
    float
        The floor; 0 when a peak is missing (a floor of nothing prunes nothing). [device-hours]

    Raises
    ------
    ScenarioError
        When the scenario or cluster is invalid, as the search would.
    """
    data = {**scenario, "format_version": 1, "cluster": dict(cluster), "parallelism": "auto"}
    validated = validate_scenario(data)
    workload = build_workload(validated)
    model, method = workload.model, workload.method
    backward = backward_layer_share(model, method)
    scores = (
        attention_flops_per_token(model)
        * (1.0 + BACKWARD_TO_FORWARD * backward)
        / FORWARD_BACKWARD_PASSES
    )
    weights = training_flops_per_token(model, method) - scores
    matmul_rate, attention_rate = _ceiling_rates(workload, bool(validated.framework_fallbacks))
    if matmul_rate <= 0 or attention_rate <= 0:
        return 0.0
    per_token = weights / matmul_rate + CAUSAL_FRACTION * scores / attention_rate
    return workload.tokens * per_token / SECONDS_PER_HOUR


def _ceiling_rates(workload: Workload, any_stack: bool) -> tuple[float, float]:
    """The fastest the estimate runs weight matmuls and attention FLOPs. [FLOP/s]"""
    if any_stack:
        peaks = workload.spec.datasheet().peak_tflops
        fastest = max(peaks.values(), default=0.0) * TERA
        return fastest, fastest
    efficiency = workload.efficiency
    matmul = max(
        workload.peak_matmul_flops * matmul_efficiency(workload),
        workload.peak_16bit_flops * efficiency.gemm,
    )
    flash = workload.framework.flash_attention
    attention = workload.peak_attention_flops * (efficiency.attention if flash else efficiency.gemm)
    return matmul, attention


def days_floor(gpu_hours_floor: float, num_gpus: int) -> float:
    """The fewest training days ``num_gpus`` devices can take, from :func:`ideal_gpu_hours`.

    Parameters
    ----------
    gpu_hours_floor : float
        :func:`ideal_gpu_hours` of the scenario and accelerator. [device-hours]
    num_gpus : int
        Cluster size. [devices]

    Returns
    -------
    float
        ``gpu_hours_floor / (24 num_gpus)``. [days]
    """
    return gpu_hours_floor / (HOURS_PER_DAY * num_gpus)


def pareto_frontier(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Points no other point beats on both cost and days, fastest first.

    Parameters
    ----------
    points : iterable of mapping
        Each with ``training_days`` [days] and ``cost`` [currency].

    Returns
    -------
    list of dict
        Copies of the points on the cost-versus-days Pareto frontier, fastest first (each
        strictly cheaper than every faster one).
    """
    frontier: list[dict[str, Any]] = []
    cheapest = float("inf")
    for point in sorted(points, key=lambda p: (p["training_days"], p["cost"])):
        if point["cost"] < cheapest:
            frontier.append(dict(point))
            cheapest = point["cost"]
    return frontier
