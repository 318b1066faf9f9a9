"""Fit the whole-run model to published whole-run GPU-hours, with leave-one-source-out.

Reads ``estimator/calibration/whole_runs.jsonl`` (one published run per line: a scenario
with the run's token count and cluster, the GPU-hours the publication reports and what they
cover). For every run it estimates the whole run with no allocation idle (steady state,
checkpoints, failures, evaluation, ramp-up, stragglers: :mod:`estimator.core.wholerun`) and
fits the one free figure, the saturated share s of the allocation held idle. A run that
expects E interruptions holds s (1 - e^-E) idle, so each run implies
s = (1 - modelled / measured wall clock) / (1 - e^-E); the fit balances these over
publications: each publication's median, then the Hodges-Lehmann estimate of their centre
(the median of all pairwise means). With a
dozen publications the plain median of medians jumps with whichever one is left out; the
Hodges-Lehmann estimate is as robust to one wild publication and far steadier (Hollander
and Wolfe, "Nonparametric Statistical Methods", 3rd ed., section 3.2). The spread of
published runs around the model that the efficiency spread does not explain becomes the
Monte Carlo's ``whole_run_sigma``.

Leave-one-source-out: each publication's runs are predicted with the idle share fitted on
the other publications, and the Monte Carlo band is checked on them. Runs whose figure is
not a whole pre-training run (flags ``throughput_based``: computed from steady-state
throughput; ``includes_other_phases``: pre-training plus post-training or distillation) or
that another publication of the same team contradicts (``contradicted_by_publication``)
are listed and scored but not fitted.

Writes ``estimator/data/whole_run.json``; :func:`whole_run_section` renders it in the
accuracy report.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator.calibration.results import percentile
from estimator.core import estimate
from estimator.core.calibration import family_sigma
from estimator.core.montecarlo import Uncertainty, monte_carlo
from estimator.core.validation import validate_scenario
from estimator.core.wholerun import FIT_PATH, idle_share

RUNS = Path(__file__).resolve().parent / "whole_runs.jsonl"
NOT_FITTED_FLAGS = ("throughput_based", "includes_other_phases", "contradicted_by_publication")
Z_80 = 1.2816
MAX_IDLE = 0.5
SAMPLES = 2000


def load_runs(path: Path = RUNS) -> list[dict[str, Any]]:
    """Every published run of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def fitted(run: dict[str, Any]) -> bool:
    """Whether a run's figure is a whole pre-training run (see the module docstring)."""
    return not set(run.get("flags") or ()) & set(NOT_FITTED_FLAGS)


def with_idle(scenario: dict[str, Any], idle: float) -> dict[str, Any]:
    """The scenario with ``run.allocation_idle`` set."""
    out = copy.deepcopy(scenario)
    out["run"] = {**(out.get("run") or {}), "allocation_idle": idle}
    return out


def measured_days(run: dict[str, Any]) -> float:
    return float(run["measured"]["gpu_hours"]) / 24.0 / run["scenario"]["cluster"]["num_gpus"]


def balanced_centre(values: dict[str, list[float]]) -> float:
    """Hodges-Lehmann centre of the sources' medians: the median of the means of every pair
    of sources, each source with itself included."""
    medians = [statistics.median(v) for v in values.values()]
    walsh = [(a + b) / 2.0 for i, a in enumerate(medians) for b in medians[i:]]
    return statistics.median(walsh)


@dataclass(frozen=True)
class Modelled:
    """A run estimated with no allocation idle: wall clock [days] and the interruptions it
    expects [1]."""

    days: float
    interruptions: float

    def share(self, saturated: float) -> float:
        """The idle share this run holds at saturated share ``saturated``. [1]"""
        return float(idle_share(self.interruptions, saturated))

    def days_at(self, saturated: float) -> float:
        """Whole-run wall clock with the idle share of ``saturated``. [days]"""
        return self.days / (1.0 - self.share(saturated))


def modelled(scenario: dict[str, Any]) -> Modelled:
    """``scenario`` estimated with no allocation idle."""
    out = estimate(with_idle(scenario, 0.0))
    days = float(out["training_days"])
    return Modelled(days, days * 24.0 / float(out["goodput_details"]["mtbf_hours"]))


def fit(runs: list[dict[str, Any]], busy: dict[str, Modelled]) -> float:
    """The saturated idle share, within [0, MAX_IDLE], each run implying
    (1 - modelled / measured) / (1 - e^-E)."""
    implied: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        m = busy[run["id"]]
        implied[run["source_group"]].append(
            (1.0 - m.days / measured_days(run)) / -math.expm1(-m.interruptions)
        )
    return min(MAX_IDLE, max(0.0, balanced_centre(implied))) if implied else 0.0


def write_fit(output: Path = FIT_PATH) -> None:
    """Fit the idle share and the whole-run spread, score every run, write ``output`` and
    print the errors (``python -m estimator calibrate --whole-runs-only``)."""
    runs = load_runs()
    busy = {r["id"]: modelled(r["scenario"]) for r in runs}
    pool = [r for r in runs if fitted(r)]
    idle = fit(pool, busy)
    loo_idle = {
        group: fit([r for r in pool if r["source_group"] != group], busy)
        for group in {r["source_group"] for r in runs}
    }
    residuals, efficiency = [], []
    for run in pool:
        predicted = busy[run["id"]].days_at(loo_idle[run["source_group"]])
        residuals.append(math.log(predicted / measured_days(run)))
        family = validate_scenario(run["scenario"]).cluster.spec.family
        efficiency.append(family_sigma(family))
    spread = sorted(abs(e) for e in residuals)
    total = spread[min(len(spread) - 1, round(0.8 * (len(spread) - 1)))] / Z_80
    mean_eff = statistics.fmean(s * s for s in efficiency)
    sigma = round(math.sqrt(max(0.0025, total * total - mean_eff)), 4)
    rows = []
    for run in runs:
        group, days = run["source_group"], measured_days(run)
        loo = loo_idle[group] if fitted(run) else idle
        # The Monte Carlo runs at this run's idle share (what the estimate holds it at).
        scenario = with_idle(run["scenario"], busy[run["id"]].share(loo))
        spread_out = monte_carlo(
            scenario, seed=1, samples=SAMPLES, uncertainty=Uncertainty(whole_run_sigma=sigma)
        )
        gpus = run["scenario"]["cluster"]["num_gpus"]
        p10, p90 = (spread_out["gpu_hours"][p] for p in ("p10", "p90"))
        measured = float(run["measured"]["gpu_hours"])
        rows.append(
            {
                "id": run["id"],
                "source_group": group,
                "source": run["source"],
                "accelerator": run["scenario"]["cluster"]["accelerator"],
                "num_gpus": gpus,
                "tokens": run["scenario"]["training"]["tokens"],
                "fitted": fitted(run),
                "flags": run.get("flags") or [],
                "measured_gpu_hours": measured,
                "in_sample_gpu_hours": busy[run["id"]].days_at(idle) * 24.0 * gpus,
                "out_of_sample_gpu_hours": busy[run["id"]].days_at(loo) * 24.0 * gpus,
                "expected_interruptions": busy[run["id"]].interruptions,
                "idle_share": busy[run["id"]].share(idle),
                "steady_state_gpu_hours": float(
                    estimate(run["scenario"])["whole_run"]["steady_state_gpu_hours"]
                ),
                "band_gpu_hours": [p10, p90],
                "band_covers": p10 <= measured <= p90,
                "measured_days": days,
            }
        )
    record = {
        "generated_by": "python -m estimator calibrate --whole-runs-only",
        "allocation_idle": round(idle, 4),
        "sigma": sigma,
        "runs": rows,
    }
    output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    scored = [r for r in rows if r["fitted"]]
    for kind in ("in_sample", "out_of_sample"):
        errors = [r[f"{kind}_gpu_hours"] / r["measured_gpu_hours"] - 1 for r in scored]
        ab = sorted(abs(e) for e in errors)
        # P90 as docs/accuracy.md computes it (numpy's default, linear between ranks).
        p90 = statistics.quantiles(ab, n=10, method="inclusive")[8]
        print(
            f"{kind}: n={len(ab)} median {statistics.median(ab):.1%} "
            f"P90 {p90:.1%} mean {statistics.fmean(errors):+.1%}"
        )
    covered = sum(r["band_covers"] for r in scored)
    print(f"allocation_idle {idle:.3f} sigma {sigma} band covers {covered}/{len(scored)}")


def whole_run_section(path: Path) -> list[str]:
    """The published whole runs against the whole-run model (:func:`write_fit`).

    Parameters
    ----------
    path : Path
        ``estimator/data/whole_run.json``.

    Returns
    -------
    list of str
        Markdown lines (none when the file is absent).
    """
    if not path.exists():
        return []
    record = json.loads(path.read_text(encoding="utf-8"))
    runs = record["runs"]
    scored = [r for r in runs if r["fitted"]]

    def cells(kind: str) -> str:
        errors = [r[f"{kind}_gpu_hours"] / r["measured_gpu_hours"] - 1 for r in scored]
        absolute = [abs(e) for e in errors]
        return (
            f"{percentile(absolute, 0.5):.1%} | {percentile(absolute, 0.9):.1%} | "
            f"{statistics.mean(errors):+.1%}"
        )

    covered = sum(r["band_covers"] for r in scored)
    rows = []
    for r in sorted(runs, key=lambda r: (not r["fitted"], r["source_group"], r["id"])):
        measured = r["measured_gpu_hours"]
        low, high = r["band_gpu_hours"]
        note = "fitted" if r["fitted"] else "not fitted: " + ", ".join(r["flags"])
        rows.append(
            f"| `{r['id']}` | {r['num_gpus']}x {r['accelerator']} | {r['tokens']:.3g} "
            f"| {measured:,.0f} | {r['expected_interruptions']:.1f} | {r['idle_share']:.1%} "
            f"| {r['steady_state_gpu_hours'] / measured - 1:+.1%} "
            f"| {r['in_sample_gpu_hours'] / measured - 1:+.1%} "
            f"| {r['out_of_sample_gpu_hours'] / measured - 1:+.1%} "
            f"| {low / measured - 1:+.0%} to {high / measured - 1:+.0%} "
            f"| {'yes' if r['band_covers'] else 'no'} | {note} | {r['source']} |"
        )
    return [
        "## Whole runs: GPU-hours of published training runs",
        "",
        "`gpu_hours` and `training_days` are whole-run figures: the steady state plus "
        "checkpoint writes, failures and restarts, spot preemptions, evaluation, ramp-up, "
        "stragglers and allocation idle (`estimator/core/wholerun.py`). Each published run "
        "(`estimator/calibration/whole_runs.jsonl`, with its source and what its figure "
        "covers) is estimated with its layout left to the search. Idle time comes with "
        "incidents, so a run that expects E interruptions (its held hours x devices x the "
        "interruption rate) holds s (1 - e^-E) of its allocation idle. The one fitted figure, "
        f"the saturated idle share s, is **{record['allocation_idle']:.1%}** (Hodges-Lehmann "
        "centre of the publications' median implied shares); out of sample, each "
        "publication's runs use the share fitted on the others. The Monte Carlo adds a "
        "lognormal whole-run factor of log-sd "
        f"**{record['sigma']}** (the scatter of the out-of-sample residuals beyond the "
        "efficiency spread); its P10-P90 band of GPU-hours, centred on the out-of-sample "
        f"prediction, covers **{covered} of {len(scored)}** fitted runs.",
        "",
        "| runs | count | in-sample median abs | P90 abs | mean signed "
        "| out-of-sample median abs | P90 abs | mean signed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| fitted (whole pre-training runs) | {len(scored)} | {cells('in_sample')} "
        f"| {cells('out_of_sample')} |",
        "",
        "Runs whose figure is not a whole pre-training run are listed but not fitted: "
        "`throughput_based` (the publication computed it from steady-state throughput) and "
        "`includes_other_phases` (post-training or distillation included); and runs another "
        "publication of the same team contradicts (`contradicted_by_publication`).",
        "",
        "| run | cluster | tokens | published GPU-hours | interruptions expected "
        "| idle share | steady state | whole run in-sample | out-of-sample | band (P10 to P90) "
        "| covered | fit | source |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
        *rows,
        "",
    ]
