"""The estimate's step-time margins, whole-run wall clock and training method, shaped for
pages and documents.

The run page and the sign-off pack show the same lines from the same functions (pure: no
database). Estimates stored before the estimator reported these figures lack their keys:
every function here then returns nothing to show, and callers fall back to what exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.common.labels import (
    LORA_TARGETS,
    OFFLOAD_MODES,
    OPTIMIZERS,
    STEP_MARGINS,
    STEP_PARTS,
    TRAINING_METHODS,
    WHOLE_RUN_PARTS,
)

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
    #: The multiple of the stated margin paid: network jitter at this cluster size, the
    #: framework overhead on this software stack (None when it is the stated margin). [1]
    scale: float | None = None
    #: What the scale follows: ``at this cluster size`` or ``on this software stack``.
    where: str = ""

    @property
    def label(self) -> str:
        """``Framework overhead (10 %)``, ``Network jitter (5.7 % at this cluster size)``."""
        if self.share is None:
            return self.name
        where = f" {self.where}" if self.scale is not None else ""
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
    scales = {
        "network_jitter": (margins.get("network_jitter_scale"), "at this cluster size"),
        "framework_overhead": (margins.get("framework_overhead_scale"), "on this software stack"),
    }
    lines = []
    for key, name in STEP_MARGINS:
        scale, where = scales.get(key, (None, ""))
        if key == "framework_overhead" and scale is not None and abs(scale - 1.0) < 1e-9:
            scale = None  # the stated margin, as estimates before stacks reported it
        lines.append(
            MarginLine(
                key=key,
                name=name,
                seconds=float(breakdown[key]),
                share=None if margins.get(key) is None else float(margins[key]),
                scale=None if scale is None else float(scale),
                where=where,
            )
        )
    return lines


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


# --- Training method -------------------------------------------------------------------------

ADAPTER_METHODS = ("lora", "qlora")


def count_text(count: float) -> str:
    """A parameter count with three significant digits: ``41943040`` -> ``41.9 M``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            return f"{count / scale:.3g} {suffix}"
    return f"{count:,.0f}"


def share_text(fraction: float) -> str:
    """A share that may be far below one percent: ``0.00522`` -> ``0.52 %``."""
    return percent_text(fraction) if fraction >= 0.1 else f"{100 * fraction:.2g} %"


def _label(labels: tuple[tuple[str, str], ...], key: str) -> str:
    return dict(labels).get(key, key)


@dataclass(frozen=True)
class TrainingMethod:
    """How an estimate trains the weights: its ``training_method``, for pages and documents."""

    type: str
    optimizer: str
    offload: str
    #: Parameters the optimizer updates. [parameters]
    trainable_parameters: float
    #: Their share of all parameters. [1]
    trainable_share: float
    #: Host memory the offloaded states take on each node. [GiB]
    host_memory_per_node_gib: float = 0.0
    rank: int | None = None
    targets: tuple[str, ...] = ()
    frozen_layers: int = 0
    frozen_embeddings: bool = False

    @property
    def adapters(self) -> bool:
        return self.type in ADAPTER_METHODS

    @property
    def offloads(self) -> bool:
        return self.offload != "none"

    @property
    def plain(self) -> bool:
        """Every weight trained with AdamW, nothing offloaded: pre-training, as pages were."""
        frozen = self.frozen_layers or self.frozen_embeddings
        full = self.type == "full" and not frozen
        return full and self.optimizer == "adamw" and not self.offloads

    @property
    def name(self) -> str:
        return _label(TRAINING_METHODS, self.type)

    @property
    def targets_text(self) -> str:
        """``attention and MLP``."""
        names = [_label(LORA_TARGETS, target) for target in self.targets]
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 2 else names)

    @property
    def frozen_text(self) -> str:
        """``the bottom 8 layers and the embeddings`` (empty when nothing is frozen)."""
        parts = []
        if self.frozen_layers:
            plural = "s" if self.frozen_layers != 1 else ""
            parts.append(f"the bottom {self.frozen_layers} layer{plural}")
        if self.frozen_embeddings:
            parts.append("the embeddings")
        return " and ".join(parts)

    @property
    def label(self) -> str:
        """``LoRA r=16 on attention and MLP``, ``Full training, the embeddings frozen``."""
        if self.adapters:
            base = " over 4-bit NF4 weights" if self.type == "qlora" else ""
            return f"{self.name} r={self.rank} on {self.targets_text}{base}"
        return f"{self.name}, {self.frozen_text} frozen" if self.frozen_text else self.name

    @property
    def optimizer_label(self) -> str:
        return _label(OPTIMIZERS, self.optimizer)

    @property
    def offload_label(self) -> str:
        return _label(OFFLOAD_MODES, self.offload)

    @property
    def offload_text(self) -> str:
        """``offload optimizer states to CPU`` (empty when nothing is offloaded)."""
        label = self.offload_label
        return f"offload {label[:1].lower()}{label[1:]}" if self.offloads else ""

    @property
    def trainable_count(self) -> int:
        return round(self.trainable_parameters)

    @property
    def trainable_text(self) -> str:
        """``41.9 M (0.52 %)``."""
        return f"{count_text(self.trainable_parameters)} ({share_text(self.trainable_share)})"

    @property
    def summary(self) -> str:
        """The method on one line: ``LoRA r=16 on attention and MLP · AdamW``."""
        parts = [self.label, self.optimizer_label]
        if self.offloads:
            parts.append(self.offload_text)
        return " · ".join(parts)


def training_method(data: Mapping[str, Any] | None) -> TrainingMethod | None:
    """The estimate's ``training_method``; None for estimates made before it was reported."""
    if not data or "type" not in data:
        return None
    adapters = data["type"] in ADAPTER_METHODS
    return TrainingMethod(
        type=str(data["type"]),
        optimizer=str(data.get("optimizer", "adamw")),
        offload=str(data.get("offload", "none")),
        trainable_parameters=float(data.get("trainable_parameters") or 0.0),
        trainable_share=float(data.get("trainable_share") or 0.0),
        host_memory_per_node_gib=float(data.get("host_memory_per_node_gib") or 0.0),
        rank=int(data["rank"]) if adapters and data.get("rank") is not None else None,
        targets=tuple(data.get("targets") or ()) if adapters else (),
        frozen_layers=int(data.get("frozen_layers") or 0),
        frozen_embeddings=bool(data.get("frozen_embeddings")),
    )


def training_method_shown(data: Mapping[str, Any] | None) -> TrainingMethod | None:
    """The training method when it is worth a block of its own: not plain full training."""
    method = training_method(data)
    return None if method is None or method.plain else method


def training_summary(training: Mapping[str, Any]) -> str:
    """A scenario's ``training`` method, optimizer and offload on one line, at the contract's
    defaults where it leaves keys out; empty for plain full training with AdamW."""
    method = training.get("method") or {}
    adapters = method.get("type") in ADAPTER_METHODS
    described = training_method(
        {
            "rank": 16 if adapters else None,
            "targets": ["attention", "mlp"] if adapters else [],
            **method,
            "type": method.get("type", "full"),
            "optimizer": training.get("optimizer", "adamw"),
            "offload": training.get("offload", "none"),
        }
    )
    return "" if described is None or described.plain else described.summary


def software_stack_shown(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The software stack an estimate assumed and how the same layout runs on each
    calibrated stack ("NVIDIA-tuned: 23 % faster"); None for estimates that predate it."""
    stack = result.get("software_stack")
    if not stack:
        return None
    others = [
        {
            "name": other["name"],
            "change": other["relative_speed"] - 1.0,
            "text": _speed_text(other["relative_speed"]),
        }
        for key, other in sorted(stack.get("alternatives", {}).items())
        if key != stack["id"]
    ]
    return {"name": stack["name"], "named": stack["calibrated"], "others": others}


def _speed_text(relative: float) -> str:
    change = relative - 1.0
    if abs(change) < 0.005:
        return "the same speed"
    return f"{percent_text(abs(change))} {'faster' if change > 0 else 'slower'}"
