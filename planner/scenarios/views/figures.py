"""An estimation run's figures and a comparison's table and charts, shaped for templates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from estimator.core.memory import result_memory_verdict
from planner.budgets.warnings import BudgetWarning, runs_warnings
from planner.common.labels import MEMORY_PARTS, STEP_PARTS
from planner.scenarios.breakdowns import (
    margin_lines,
    percent_text,
    software_stack_shown,
    step_parts,
    training_method,
    training_method_shown,
    whole_run_table,
)
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.selectors import ComparisonRow, comparison_rows

BOTTLENECKS = {
    "compute": "Compute",
    "memory": "Memory bandwidth",
    "communication": "Communication",
    "pipeline_bubble": "Pipeline bubble",
}


def layout_parts(layout: Mapping[str, Any] | str) -> list[tuple[str, str]]:
    """The parallel layout as (name, value) pairs, for a compact line of badges."""
    if not isinstance(layout, Mapping):
        return [("Layout", str(layout))]
    parts = [(name.upper(), str(layout.get(name, 1))) for name in ("tp", "pp", "dp", "cp", "ep")]
    parts += [
        ("Micro batch", str(layout.get("micro_batch_size", ""))),
        ("ZeRO", str(layout.get("zero_stage", ""))),
        ("Recompute", str(layout.get("recompute", ""))),
    ]
    if layout.get("sequence_parallel"):
        parts.append(("Sequence parallel", "on"))
    if layout.get("pipeline_schedule") == "interleaved":
        parts.append(("Schedule", f"interleaved, {layout.get('virtual_stages', 1)}"))
    return parts


def layout_text(layout: Mapping[str, Any] | str) -> str:
    """The layout on one line, e.g. ``TP 2 · PP 4 · DP 64 · CP 1 · ZeRO 1 · micro batch 1``."""
    if not isinstance(layout, Mapping):
        return str(layout)
    sizes = " · ".join(f"{name.upper()} {layout.get(name, 1)}" for name in ("tp", "pp", "dp"))
    extra = [f"{name.upper()} {layout[name]}" for name in ("cp", "ep") if layout.get(name, 1) > 1]
    extra += [
        f"ZeRO {layout.get('zero_stage', 0)}",
        f"micro batch {layout.get('micro_batch_size')}",
    ]
    if layout.get("recompute", "none") != "none":
        extra.append(f"{layout['recompute']} recompute")
    return " · ".join([sizes, *extra])


def layout_compact(layout: Mapping[str, Any] | str) -> str:
    """A layout in a list of layouts: ``tp4 pp4 dp128 cp1 · mb1 · ZeRO-1 · no recompute``."""
    if not isinstance(layout, Mapping):
        return str(layout)
    names = ("tp", "pp", "dp", "cp") + (("ep",) if layout.get("ep", 1) > 1 else ())
    recompute = str(layout.get("recompute", "none"))
    parts = [
        " ".join(f"{name}{layout.get(name, 1)}" for name in names),
        f"mb{layout.get('micro_batch_size', 1)}",
        f"ZeRO-{layout.get('zero_stage', 0)}",
        "no recompute" if recompute == "none" else f"{recompute} recompute",
    ]
    if layout.get("activation_offload"):
        parts.append("activation offload")
    if layout.get("pp", 1) > 1:
        schedule = str(layout.get("pipeline_schedule", "1f1b"))
        interleaved = schedule == "interleaved"
        parts.append(f"interleaved v{layout.get('virtual_stages', 1)}" if interleaved else schedule)
    return " · ".join(parts)


def _shares(
    values: Mapping[str, float], parts: Iterable[tuple[str, str]], whole: float
) -> list[dict[str, Any]]:
    return [
        {
            "key": key,
            "label": label,
            "value": float(values.get(key, 0.0)),
            "percent": 100 * float(values.get(key, 0.0)) / whole if whole else 0.0,
        }
        for key, label in parts
    ]


def _memory_headroom(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """Used, usable under the framework's headroom, and what is left (negative when over)."""
    headroom = result.get("memory_headroom")
    if not headroom:
        return None
    framework = result.get("framework") or {}
    left = float(headroom["headroom_gib"])
    return {
        "used_gib": result["memory_per_gpu_gib"]["total"],
        "capacity_gib": result["accelerator_memory_gib"],
        "used_percent": 100 * float(headroom["used_fraction"]),
        "usable_gib": headroom["usable_gib"],
        "reserve": percent_text(float(framework["memory_headroom"]))
        if "memory_headroom" in framework
        else None,
        "left_gib": left,
        "over_gib": -left if left < 0 else None,
    }


def _layout_row(
    layout: Mapping[str, Any], figures: Mapping[str, Any], memory_gib: float, why: str
) -> dict[str, Any]:
    return {
        "layout": layout_compact(layout),
        "tokens_per_s_per_gpu": figures["tokens_per_s_per_gpu"],
        "mfu_percent": 100 * figures["mfu"],
        "days": figures["training_days"],
        "memory_gib": memory_gib,
        "why": why,
    }


def layouts_considered(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chosen layout, then the runners-up of the search and why each lost; empty when the
    scenario fixed its layout (or the estimate predates the list)."""
    alternatives = result.get("alternatives") or []
    if not alternatives:
        return []
    memory = result["memory_per_gpu_gib"]["total"]
    chosen = _layout_row(result["parallelism"], result, memory, "the fastest per token that fits")
    return [
        {**chosen, "chosen": True},
        *(
            _layout_row(alt["parallelism"], alt, alt["memory_total_gib"], alt["why"])
            for alt in alternatives
        ),
    ]


def _estimate_details(result: Mapping[str, Any]) -> dict[str, Any]:
    """What newer estimates add: margins apart, the whole run, headroom, layouts considered,
    the training method (only when it is not plain full training, as pre-training pages were)."""
    breakdown, margins = result["time_per_step_breakdown_s"], result.get("margins_applied")
    return {
        "training_method": training_method_shown(result.get("training_method")),
        "step": _shares(breakdown, step_parts(breakdown, margins), result["step_time_s"]),
        "margins": margin_lines(breakdown, margins),
        "whole_run": whole_run_table(result.get("whole_run")),
        "framework": (result.get("framework") or {}).get("name"),
        "software_stack": software_stack_shown(result),
        "headroom": _memory_headroom(result),
        "layouts_considered": layouts_considered(result),
    }


def run_figures(run: EstimationRun) -> dict[str, Any] | None:
    """Everything the run and scenario pages show of a successful run; None otherwise."""
    if run.status != RunStatus.SUCCEEDED or not run.result or not run.budget:
        return None
    result, budget = run.result, run.budget
    memory = result["memory_per_gpu_gib"]
    capacity = float(result["accelerator_memory_gib"])
    montecarlo = run.montecarlo or {}
    mfu_bf16 = result.get("mfu_bf16")
    return {
        "budget": budget,
        "days": budget["training_days"],
        "deadline": run_deadline(run),
        "converted": budget.get("converted"),
        "mfu_percent": result["mfu"] * 100,
        "mfu_precision": (result.get("mfu_peak") or {}).get("precision", "bf16").upper(),
        "mfu_bf16_percent": None if mfu_bf16 is None else mfu_bf16 * 100,
        "throughput_band": montecarlo.get("tokens_per_s_per_gpu"),
        "efficiency_sigma": (montecarlo.get("uncertainty") or {}).get("efficiency_sigma"),
        "warnings": [*result.get("warnings", []), *montecarlo.get("warnings", [])],
        "hfu_percent": result["hfu"] * 100,
        "goodput_percent": result.get("goodput", 1.0) * 100,
        "result": result,
        "layout": layout_parts(result["parallelism"]),
        "memory": _shares(memory, MEMORY_PARTS, capacity),
        "memory_total": memory["total"],
        "memory_capacity": capacity,
        "memory_percent": 100 * memory["total"] / capacity if capacity else 0.0,
        "dp_traffic_s": result["time_per_step_breakdown_s"].get("dp_communication", 0.0),
        "bottleneck": BOTTLENECKS.get(result["bottleneck"], result["bottleneck"]),
        "tokens": run.inputs["scenario"]["training"]["tokens"],
        **_estimate_details(result),
    }


# --- Comparisons ----------------------------------------------------------------------------


def _cost_per_million(row: ComparisonRow) -> Decimal | None:
    if row.cost_p50 is None or row.run is None:
        return None
    tokens = Decimal(repr(float(row.run.inputs["scenario"]["training"]["tokens"])))
    return (row.cost_p50 / tokens * Decimal(1_000_000)).quantize(Decimal("0.01"))


def _table_row(row: ComparisonRow, warnings: Mapping[int, list[BudgetWarning]]) -> dict[str, Any]:
    result, budget = row.result, row.budget
    memory = result.get("memory_per_gpu_gib", {})
    run = row.run
    return {
        "row": row,
        "scenario": row.scenario,
        "run": run,
        "layout": layout_compact(result["parallelism"]) if result else None,
        "tokens_per_s_per_gpu": result.get("tokens_per_s_per_gpu"),
        "deadline": run_deadline(run, project=row.scenario.project) if run else None,
        "days": budget.get("training_days"),
        "gpu_hours_p50": budget.get("gpu_hours", {}).get("p50"),
        "cost_per_million": _cost_per_million(row),
        "mfu_percent": result["mfu"] * 100 if result else None,
        "fits": result.get("fits_in_memory"),
        "memory_verdict": result_memory_verdict(result) if result else None,
        "memory_total": memory.get("total"),
        "memory_capacity": result.get("accelerator_memory_gib"),
        "bottleneck": BOTTLENECKS.get(result.get("bottleneck", ""), result.get("bottleneck")),
        "method": training_method(result.get("training_method")) if result else None,
        "unconverted": bool(row.run) and row.cost_p50 is None,
        "run_currency": budget.get("currency", ""),
        "warnings": warnings.get(row.run.pk, []) if row.run else [],
    }


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _chart_data(rows: list[ComparisonRow], currency: str) -> dict[str, Any]:
    done = [row for row in rows if row.run is not None]
    names = [row.scenario.name for row in done]
    return {
        "currency": currency,
        "points": [
            {
                "name": row.scenario.name,
                "days": [row.budget["training_days"][k] for k in ("p10", "p50", "p90")],
                "cost": [_float(c) for c in (row.cost_p10, row.cost_p50, row.cost_p90)],
                "cheapest": row.cheapest,
                "fastest": row.fastest,
            }
            for row in done
            if row.cost_p50 is not None
        ],
        "step": {
            "labels": names,
            "parts": [
                {
                    "label": label,
                    "values": [row.result["time_per_step_breakdown_s"][key] for row in done],
                }
                for key, label in STEP_PARTS
            ],
        },
        "memory": {
            "labels": names,
            "parts": [
                {"label": label, "values": [row.result["memory_per_gpu_gib"][key] for row in done]}
                for key, label in MEMORY_PARTS
            ],
            "capacity": [row.result["accelerator_memory_gib"] for row in done],
        },
    }


def comparison_context(scenarios: Iterable[Scenario], currency: str) -> dict[str, Any]:
    """The comparison table (cheapest and fastest marked) and its charts' data."""
    rows = comparison_rows(scenarios, currency)
    warnings = runs_warnings((row.run, row.scenario.project) for row in rows if row.run)
    table = [_table_row(row, warnings) for row in rows]
    return {
        "table": table,
        "any_warnings": any(item["warnings"] for item in table),
        # A training column only where some scenario is not plain full training.
        "show_methods": any(item["method"] and not item["method"].plain for item in table),
        "chart_data": _chart_data(rows, currency),
        "currency": currency,
        "missing_runs": [row.scenario for row in rows if row.run is None],
        "has_figures": any(row.run is not None for row in rows),
    }
