"""Why one layout loses to another: the step-time parts that make the difference.

Two estimates of the same scenario are compared per token (layouts differ in tokens per
step), part by part of ``time_per_step_breakdown_s``; the parts that grow the most are the
reasons, each as a share of the better layout's time per token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Step-time parts that add up to the step, with how a reason names them.
PARTS = {
    "compute": "compute",
    "recompute": "activation recomputation",
    "tp_communication": "tensor-parallel communication",
    "pp_bubble": "pipeline bubble",
    "exposed_communication": "exposed data/context/expert-parallel communication",
    "overheads": "margins",
}
#: Differences below this share of the better layout's time are not worth naming. [1]
NEGLIGIBLE = 0.005
SHAPE_KEYS = ("tp", "pp", "dp", "cp", "ep", "zero_stage", "recompute", "virtual_stages")


def _per_token(result: Mapping[str, Any]) -> dict[str, float]:
    tokens = float(result["tokens_per_step"])
    parts = result["time_per_step_breakdown_s"]
    return {name: float(parts[name]) / tokens for name in PARTS}


def explain(best: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """How much slower ``other`` is than ``best`` and which parts of the step make it so.

    Parameters
    ----------
    best, other : mapping
        Two estimates of one scenario (``estimate`` output): ``step_time_s`` [s],
        ``tokens_per_step`` [tokens], ``time_per_step_breakdown_s`` [s] and
        ``memory_per_gpu_gib`` [GiB].

    Returns
    -------
    dict
        ``slower_by`` (fraction of ``best``'s time per token), ``reasons`` (list of
        ``{"part", "label", "share"}``, largest first, share of ``best``'s time per token)
        and ``why`` (one sentence).
    """
    a, b = _per_token(best), _per_token(other)
    total = sum(a.values())
    slower = (
        float(other["step_time_s"])
        / float(other["tokens_per_step"])
        / (float(best["step_time_s"]) / float(best["tokens_per_step"]))
        - 1.0
    )
    growth = sorted(((b[k] - a[k]) / total, k) for k in PARTS)
    reasons = [
        {"part": k, "label": PARTS[k], "share": share}
        for share, k in reversed(growth)
        if share > NEGLIGIBLE
    ]
    memory = float(other["memory_per_gpu_gib"]["total"]) - float(
        best["memory_per_gpu_gib"]["total"]
    )
    if reasons:
        named = ", ".join(f"more {r['label']} (+{r['share']:.1%})" for r in reasons[:2])
        why = f"{slower:.1%} slower per token: {named}"
    else:
        why = f"{slower:.1%} slower per token, spread over every part of the step"
    if memory > 1.0:
        why += f"; needs {memory:.0f} GiB more per device"
    return {"slower_by": slower, "reasons": reasons, "why": why}


def _shape(result: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(result["parallelism"][k] for k in SHAPE_KEYS)


def with_comparisons(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``results`` (best first) with ``comparison`` on every result after the first.

    Parameters
    ----------
    results : list of dict
        Estimates of one scenario, best first; changed in place.

    Returns
    -------
    list of dict
        ``results``, each after the first carrying :func:`explain` against the first.
    """
    for other in results[1:]:
        other["comparison"] = explain(results[0], other)
    return results


def alternatives(
    best: Mapping[str, Any], others: Sequence[Mapping[str, Any]], count: int
) -> list[dict[str, Any]]:
    """Up to ``count`` runners-up of different shapes (more than the micro-batch differs).

    Parameters
    ----------
    best : mapping
        The chosen estimate.
    others : sequence of mapping
        Other estimates of the same scenario, best first.
    count : int
        Most runners-up to return.

    Returns
    -------
    list of dict
        Each runner-up's ``parallelism``, ``tokens_per_s_per_gpu`` [tokens/s], ``mfu`` [1],
        ``training_days`` [days] and ``memory_total_gib`` [GiB], with :func:`explain`'s
        ``slower_by`` [1], ``reasons`` and ``why``.
    """
    seen: set[tuple[Any, ...]] = {_shape(best)}
    out: list[dict[str, Any]] = []
    for other in others:
        if len(out) >= count:
            break
        if _shape(other) in seen:
            continue
        seen.add(_shape(other))
        out.append(
            {
                "parallelism": dict(other["parallelism"]),
                "tokens_per_s_per_gpu": other["tokens_per_s_per_gpu"],
                "mfu": other["mfu"],
                "training_days": other["training_days"],
                "memory_total_gib": other["memory_per_gpu_gib"]["total"],
                **explain(best, other),
            }
        )
    return out
