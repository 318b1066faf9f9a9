"""The estimate's step-time margins and whole-run wall clock, shaped for pages and documents.

The run page and the sign-off pack show the same lines from the same functions (pure: no
database). Estimates stored before the estimator reported these figures lack their keys:
every function here then returns nothing to show, and callers fall back to what exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.labels import STEP_MARGINS, STEP_PARTS, WHOLE_RUN_PARTS

#: The step-time part that the two margins split into when the estimate reports them apart.
OVERHEADS = "overheads"


def percent_text(fraction: float) -> str:
    """A share as text with at most one decimal: ``0.1`` -> ``10 %``, ``0.0571`` -> ``5.7 %``."""
    text = f"{100 * fraction:.1f}"
    return f"{text.removesuffix('.0')} %"


# --- Step-time margins -----------------------------------------------------------------------


@dataclass(frozen=True)
class MarginLine:
    """One margin of the step time, as this cluster pays it."""

    key: str
    name: str
    #: Seconds per optimizer step. [s]
    seconds: float
    #: Share of the margin-free step time; None when the estimate does not say. [1]
    share: float | None
    #: Network jitter only: the multiple of the stated margin paid at this cluster size. [1]
    scale: float | None = None

    @property
    def label(self) -> str:
        """``Framework overhead (10 %)``, ``Network jitter (5.7 % at this cluster size)``."""
        if self.share is None:
            return self.name
        where = " at this cluster size" if self.scale is not None else ""
        return f"{self.name} ({percent_text(self.share)}{where})"

    @property
    def share_text(self) -> str:
        return "" if self.share is None else percent_text(self.share)

    @property
    def stated(self) -> float | None:
        """The margin as stated before scaling with the cluster (None when not scaled)."""
        if self.share is None or not self.scale:
            return None
        return self.share / self.scale

    @property
    def scale_note(self) -> str | None:
        """``1.14 times the stated 5 %``: how the cluster size scaled a stated margin."""
        if self.stated is None or self.scale is None:
            return None
        return f"{self.scale:.2f} times the stated {percent_text(self.stated)}"


def margin_lines(
    breakdown: Mapping[str, Any] | None, margins: Mapping[str, Any] | None
) -> list[MarginLine]:
    """Framework overhead and network jitter apart; empty when the estimate lumps them."""
    breakdown, margins = breakdown or {}, margins or {}
    if not all(key in breakdown for key, _ in STEP_MARGINS):
        return []
    scale = margins.get("network_jitter_scale")
    return [
        MarginLine(
            key=key,
            name=name,
            seconds=float(breakdown[key]),
            share=None if margins.get(key) is None else float(margins[key]),
            scale=None if key != "network_jitter" or scale is None else float(scale),
        )
        for key, name in STEP_MARGINS
    ]


def step_parts(
    breakdown: Mapping[str, Any] | None, margins: Mapping[str, Any] | None
) -> tuple[tuple[str, str], ...]:
    """The step-time parts in stacking order, with the margins as two lines when reported."""
    lines = margin_lines(breakdown, margins)
    if not lines:
        return STEP_PARTS
    split = [(line.key, line.label) for line in lines]
    parts: list[tuple[str, str]] = []
    for key, label in STEP_PARTS:
        parts.extend(split if key == OVERHEADS else [(key, label)])
    return tuple(parts)


# --- Whole run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WholeRunLine:
    key: str
    label: str
    days: float
    gpu_hours: float
    #: Share of the whole run's wall clock. [1]
    share: float

    @property
    def percent(self) -> float:
        return 100 * self.share


@dataclass(frozen=True)
class WholeRun:
    """Steady-state training, each part beyond it, and their total (the training time)."""

    steady: WholeRunLine
    parts: tuple[WholeRunLine, ...]
    total: WholeRunLine
    capacity: str

    @property
    def goodput(self) -> float:
        """Steady-state share of the wall clock. [1]"""
        return self.steady.share

    @property
    def rows(self) -> tuple[WholeRunLine, ...]:
        """Steady state, then each part: the lines that add up to the total."""
        return (self.steady, *self.parts)


def _part_labels(parts_days: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Known parts in order, then any the estimator added since, named from their keys."""
    known = [(key, label) for key, label in WHOLE_RUN_PARTS if key in parts_days]
    named = {key for key, _ in WHOLE_RUN_PARTS}
    extra = [(key, key.replace("_", " ").capitalize()) for key in parts_days if key not in named]
    return known + extra


def _shown(key: str, days: float, capacity: str) -> bool:
    # Preemptions only happen on spot capacity: a dedicated run would show a line of zeros.
    return key != "preemptions" or days > 0 or capacity == "spot"


def whole_run_table(whole_run: Mapping[str, Any] | None) -> WholeRun | None:
    """The estimate's ``whole_run`` as lines with their share of the total; None if absent."""
    if not whole_run or "parts_days" not in whole_run:
        return None
    days, hours = whole_run["parts_days"], whole_run.get("parts_gpu_hours") or {}
    capacity = str(whole_run.get("capacity") or "dedicated")
    steady_days, steady_hours = (
        float(whole_run["steady_state_days"]),
        float(whole_run.get("steady_state_gpu_hours") or 0.0),
    )
    total_days = steady_days + sum(float(value) for value in days.values())
    total_hours = steady_hours + sum(float(value) for value in hours.values())

    def line(key: str, label: str, day: float, hour: float) -> WholeRunLine:
        return WholeRunLine(key, label, day, hour, day / total_days if total_days else 0.0)

    parts = tuple(
        line(key, label, float(days[key]), float(hours.get(key, 0.0)))
        for key, label in _part_labels(days)
        if _shown(key, float(days[key]), capacity)
    )
    return WholeRun(
        steady=line("steady_state", "Steady-state training", steady_days, steady_hours),
        parts=parts,
        total=line("total", "Total", total_days, total_hours),
        capacity=capacity,
    )
