"""Capacity planning: which cluster trains a model by a deadline, or within a budget, cheapest.

For every candidate accelerator option and every cluster size up to its ``max_gpus`` the
layout search (:func:`estimator.core.search.search`) finds the fastest layout that fits;
each size becomes a point (training days, cost). Cluster sizes tried are the powers of two
and the node multiples ``node x 2^k`` and ``node x 3 x 2^k`` (k >= 0), plus ``max_gpus``
itself when it is a node multiple: a geometric ladder, since throughput changes slowly
between neighbouring sizes and each size costs one whole search.

Cost is ``gpu_hours x price_per_gpu_hour`` in the caller's currency (floats: this is a
planning figure, not an invoice).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from estimator.core.catalog import load_catalog
from estimator.core.costing import cost_of
from estimator.core.errors import ScenarioError
from estimator.core.search import search


@dataclass(frozen=True)
class ClusterOption:
    """One way to buy compute: an accelerator, its price and how many can be had.

    Attributes
    ----------
    accelerator : str
        Catalog id.
    price_per_gpu_hour : float
        Price of one device for one hour. [currency / h]
    max_gpus : int
        Most devices available.
    gpus_per_node : int or None
        Devices per node; None takes the catalog's.
    """

    accelerator: str
    price_per_gpu_hour: float
    max_gpus: int
    gpus_per_node: int | None = None


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


def _node_size(option: ClusterOption) -> int:
    if option.gpus_per_node is not None:
        return option.gpus_per_node
    catalog = load_catalog()
    if option.accelerator not in catalog:
        raise ScenarioError("options.accelerator", f"unknown accelerator {option.accelerator!r}")
    return catalog[option.accelerator].devices_per_node


def _searched_point(scenario: Mapping[str, Any], cluster: dict[str, Any]) -> dict[str, Any] | None:
    data = {**scenario, "format_version": 1, "cluster": cluster, "parallelism": "auto"}
    found = search(data, top_k=1)
    if not found["results"]:
        return None
    best = found["results"][0]
    return {
        "accelerator": cluster["accelerator"],
        "num_gpus": cluster["num_gpus"],
        "training_days": best["training_days"],
        "gpu_hours": best["gpu_hours"],
        "mfu": best["mfu"],
        "parallelism": best["parallelism"],
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
    anywhere (a worker each) and :func:`plan_capacity` is exactly their union, priced.

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
        ``gpu_hours``, ``mfu`` and ``parallelism`` (the search's best layout), in the order
        of ``sizes``; ``misses``: the sizes with no layout that fits.
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


def priced_point(point: Mapping[str, Any], price_per_gpu_hour: float) -> dict[str, Any]:
    """A point of :func:`capacity_points` with its price and ``cost = gpu_hours x price``."""
    return {
        **point,
        "price_per_gpu_hour": price_per_gpu_hour,
        "cost": cost_of(point["gpu_hours"], price_per_gpu_hour),
    }


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


def meets_limits(
    point: Mapping[str, Any], *, deadline_days: float | None, budget: float | None
) -> bool:
    """Whether a point finishes within the deadline and costs at most the budget.

    Parameters
    ----------
    point : mapping
        ``training_days`` [days] and ``cost`` [currency], as :func:`plan_capacity` gives.
    deadline_days : float or None
        Latest acceptable wall-clock training time; None: no deadline. [days]
    budget : float or None
        Highest acceptable cost; None: no budget. [currency]

    Returns
    -------
    bool
        True when both limits hold; a point exactly on a limit meets it.
    """
    on_time = deadline_days is None or point["training_days"] <= deadline_days
    affordable = budget is None or point["cost"] <= budget
    return on_time and affordable


def plan_capacity(
    scenario: Mapping[str, Any],
    options: Iterable[ClusterOption],
    *,
    deadline_days: float | None = None,
    budget: float | None = None,
) -> dict[str, Any]:
    """Cluster options that meet a deadline and/or a budget, cheapest first.

    Parameters
    ----------
    scenario : dict
        ``model``, ``training`` (its ``tokens`` is what must be trained) and optional
        ``margins`` in the contract's format; ``cluster`` and ``parallelism`` are replaced.
    options : iterable of ClusterOption
        Accelerators to consider, with price and availability.
    deadline_days : float, optional
        Latest acceptable wall-clock training time. [days]
    budget : float, optional
        Highest acceptable cost. [currency]

    Returns
    -------
    dict
        ``feasible``: points meeting both limits, cheapest first (then fastest);
        ``frontier``: the cost-versus-days Pareto frontier of every point, fastest first;
        ``points_evaluated``, ``sizes_without_fitting_layout`` and ``seconds``.
    """
    began = time.perf_counter()
    points, misses = [], 0
    for option in options:
        sizes = cluster_sizes(option.max_gpus, _node_size(option))
        found = capacity_points(
            scenario, option.accelerator, sizes, gpus_per_node=option.gpus_per_node
        )
        points += [priced_point(p, option.price_per_gpu_hour) for p in found["points"]]
        misses += len(found["misses"])
    feasible = sorted(
        (p for p in points if meets_limits(p, deadline_days=deadline_days, budget=budget)),
        key=lambda p: (p["cost"], p["training_days"]),
    )
    return {
        "feasible": feasible,
        "frontier": pareto_frontier(points),
        "points_evaluated": len(points) + misses,
        "sizes_without_fitting_layout": misses,
        "seconds": time.perf_counter() - began,
    }
