"""Which cluster sizes of a plan can matter: the searches a plan may skip without changing it.

A plan's result (:func:`planner.capacity.search.plan_merge`) keeps two kinds of priced point:
the *feasible* ones (on time and within budget) and the *frontier* (no other point both
faster and at most as costly, among every priced point, feasible or not). A size is skipped
only when, for every option that offers it, the point it would give is provably neither:

* **not feasible**: its floor of training days (:func:`estimator.core.capacity.days_floor`)
  is past the deadline, or its floor of cost (the option's price, commitment included,
  applied to :func:`estimator.core.capacity.ideal_gpu_hours`) is over the budget; and
* **not on the frontier**: a point already searched is strictly faster than the floor of
  days and costs no more than the floor of cost, so it is faster and at most as costly as
  the real point, which :func:`estimator.core.capacity.pareto_frontier` then drops.

Both floors are true lower bounds (the MFU ceiling of 1 and the whole run's overheads only
adding: see :func:`~estimator.core.capacity.ideal_gpu_hours`; a cost is monotone in GPU-hours
and never below the commitment's minimum). A skipped point drops out of neither list, and
the points it would have dominated on the frontier are dominated by the searched point that
dominates it, so the plan is identical to the exhaustive one; only the count of sizes
searched changes. The test runs both on the same questions and compares them exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from estimator.core.capacity import days_floor

#: A search: its accelerator, its capacity ("" or "spot") and a cluster size.
SearchSize = tuple[str, str, int]


class Priced(Protocol):
    """What pruning needs of an option: its cost (original, in the plan's currency)."""

    def cost(self, gpu_hours: float, num_gpus: int) -> tuple[Decimal, Decimal]: ...


@dataclass
class Pruner:
    """Decides, size by size, whether a search can change the plan; learns from each point.

    ``offers`` maps each searched size to the options that offer it; ``known`` holds the
    (training days, cost) of every priced point searched so far, in any chunk.
    """

    offers: Mapping[SearchSize, Sequence[Priced]]
    deadline_days: float
    budget: Decimal | None
    known: list[tuple[float, Decimal]] = field(default_factory=list)

    def learn(self, accelerator: str, capacity: str, point: Mapping[str, Any]) -> None:
        """Price a searched point for every option offering its size, and remember it."""
        size = int(point["num_gpus"])
        for option in self.offers.get((accelerator, capacity, size), ()):
            cost = option.cost(point["gpu_hours"], size)[1]
            self.known.append((float(point["training_days"]), cost))

    def learn_chunks(self, results: Iterable[Mapping[str, Any]]) -> None:
        """Learn every point of chunk results already searched (another worker's too)."""
        for result in results:
            for point in result.get("points", []):
                self.learn(result["accelerator"], result["capacity"], point)

    def can_matter(self, accelerator: str, capacity: str, size: int, gpu_hours: float) -> bool:
        """Whether the point of ``size`` might be feasible or on the frontier for some option.

        ``gpu_hours`` is the accelerator's floor (:func:`~estimator.core.capacity.ideal_gpu_hours`).
        """
        offered = self.offers.get((accelerator, capacity, size), ())
        if not offered:  # a size no option offers: search it, as the exhaustive plan does
            return True
        days = days_floor(gpu_hours, size)
        for option in offered:
            cost = option.cost(gpu_hours, size)[1]
            if self._within(days, cost) or not self._dominated(days, cost):
                return True
        return False

    def may_meet(self, accelerator: str, capacity: str, size: int, gpu_hours: float) -> bool:
        """Whether the floors of ``size`` meet the deadline and budget for some option: such
        a size is always searched, so searching these first gives the others the most
        points to be ruled out by."""
        days = days_floor(gpu_hours, size)
        offered = self.offers.get((accelerator, capacity, size), ())
        return any(self._within(days, option.cost(gpu_hours, size)[1]) for option in offered)

    def _within(self, days: float, cost: Decimal) -> bool:
        return days <= self.deadline_days and (self.budget is None or cost <= self.budget)

    def _dominated(self, days: float, cost: Decimal) -> bool:
        return any(seen_days < days and seen_cost <= cost for seen_days, seen_cost in self.known)
