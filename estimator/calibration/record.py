"""The fit record, ``estimator/data/calibration.json``: writing it (the whole fit, the
cross-validation and the spreads) and checking that the estimator runs on it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from estimator.calibration.crossval import leave_one_source_out, leave_one_stack_out
from estimator.calibration.loading import family_of, prepare, scored, source_of, stack_of
from estimator.calibration.spread import Z_80, between_stack_spread, family_spread, stack_errors
from estimator.calibration.stacks import Fit, fit_calibration, pooled_stack
from estimator.core import calibration


def fit_record(
    cases: Sequence[dict[str, Any]],
    out_of_sample: dict[str, float | None],
    fit: Fit,
    out_of_stack: dict[str, float | None] | None = None,
) -> dict[str, Any]:
    """The content of ``estimator/data/calibration.json``: the whole fit
    (:func:`fit_calibration` on every scored case), the stacks' factors with the pooled
    stack, and each family's out-of-sample spread (leave-one-source-out, own stack).
    With ``out_of_stack`` (leave-one-stack-out predictions) the pooled stack's ``sigma``
    is :func:`between_stack_spread` of them, and ``sigma_without`` gives, by stack, the
    tau fitted without that stack's cases; without it, the factors' log-sd."""
    fits = fit.families
    counted = [c for c in cases if scored(c)]
    families: dict[str, Any] = {}
    family_by_id = {c["id"]: family_of(c) for c in counted}
    for family in sorted(set(family_by_id.values())):
        mine = [c for c in counted if family_by_id[c["id"]] == family]
        errors = [
            math.log(p / float(c["measured"]["tokens_per_s_per_gpu"]))
            for c in mine
            if (p := out_of_sample.get(c["id"])) is not None and p > 0
        ]
        sigma, bias = family_spread(errors)
        families[family] = {
            "fitted": fits.get(family, {}),
            "cases": len(mine),
            "sources": len({source_of(c) for c in mine}),
            "sigma": round(sigma, 4),
            "bias": round(bias, 4),
        }
    pooled: dict[str, Any] = dict(pooled_stack(fit.stacks))
    if out_of_stack is not None:
        sigmas = {name: float(entry["sigma"]) for name, entry in families.items()}
        by_stack = stack_errors(cases, out_of_stack, sigmas)
        pooled["sigma"] = round(between_stack_spread(by_stack), 4)
        pooled["sigma_without"] = {
            stack: round(between_stack_spread(by_stack, leave_out=stack), 4)
            for stack in sorted({stack_of(c) for c in counted})
        }
    return {
        "generated_by": "python -m estimator calibrate",
        "cases": len(counted),
        "families": families,
        "stacks": {"fitted": fit.stacks, "pooled": pooled},
    }


def load_fit() -> dict[str, Any]:
    """The fit record the estimator runs on (``estimator/data/calibration.json``).

    Returns
    -------
    dict
        ``families``, ``unmeasured`` and ``out_of_sample`` among others.
    """
    return json.loads(calibration.FIT_PATH.read_text(encoding="utf-8"))


#: Resolution at which the spread of prior-only predictions is kept: it rests on the few
#: cases of the families that a single source measures, so finer digits would be noise.
UNMEASURED_SIGMA_STEP = 0.05


def prior_only_errors(
    cases: Sequence[dict[str, Any]], out_of_sample: Mapping[str, float | None]
) -> tuple[list[str], list[float]]:
    """The out-of-sample predictions that came from a family's prior alone.

    Leaving out the only source of a family leaves it no measurements: its cases are then
    predicted from the family's prior, as any family without measurements is. Their log
    errors measure the spread an unmeasured family's estimates carry.

    Parameters
    ----------
    cases : sequence of dict
        Every case (unscored ones are skipped).
    out_of_sample : dict of str to float or None
        Leave-one-source-out tokens/s/GPU by case id (the fit's ``out_of_sample``).

    Returns
    -------
    families : list of str
        The families measured by a single source, sorted.
    errors : list of float
        ln(predicted / measured) of each of their scored cases, in case order. [1]
    """
    counted = [c for c in cases if scored(c)]
    sources: dict[str, set[str]] = {}
    for case in counted:
        sources.setdefault(family_of(case), set()).add(source_of(case))
    single = sorted(family for family, found in sources.items() if len(found) == 1)
    errors = [
        math.log(predicted / float(case["measured"]["tokens_per_s_per_gpu"]))
        for case in counted
        if family_of(case) in single
        and (predicted := out_of_sample.get(case["id"])) is not None
        and predicted > 0
    ]
    return single, errors


def unmeasured_spread(
    cases: Sequence[dict[str, Any]], out_of_sample: Mapping[str, float | None]
) -> dict[str, Any]:
    """The ``unmeasured`` entry of ``calibration.json``: the Monte Carlo's efficiency
    spread for a family without measurements, measured on the prior-only predictions
    (:func:`prior_only_errors`) as each family's spread is (P80 of |log error| / 1.2816)
    and kept to :data:`UNMEASURED_SIGMA_STEP`.

    Parameters
    ----------
    cases : sequence of dict
        Every case (unscored ones are skipped).
    out_of_sample : dict of str to float or None
        Leave-one-source-out tokens/s/GPU by case id.

    Returns
    -------
    dict
        ``sigma`` (the value the estimator must run on) [1], ``measured`` (before
        rounding) [1], ``cases`` and ``families`` (what it was measured on).

    Raises
    ------
    ValueError
        When no family has a single source, so that no prediction came from a prior.
    """
    families, errors = prior_only_errors(cases, out_of_sample)
    if not errors:
        raise ValueError("no family is measured by a single source: nothing measures the "
                         "spread of predictions made from priors alone")  # fmt: skip
    measured = float(np.percentile(np.abs(errors), 80)) / Z_80
    steps = round(measured / UNMEASURED_SIGMA_STEP)
    return {
        "sigma": round(steps * UNMEASURED_SIGMA_STEP, 4),
        "measured": round(measured, 4),
        "cases": len(errors),
        "families": families,
    }


def unmeasured_sigma_problem(record: dict[str, Any]) -> str | None:
    """Why the estimator's :data:`~estimator.core.calibration.UNMEASURED_SIGMA` is not the
    spread the fit measured (None when it is).

    Parameters
    ----------
    record : dict
        The fit record (``calibration.json``).

    Returns
    -------
    str or None
        What differs and what to do, or None when the estimator runs on the measurement.
    """
    entry = record.get("unmeasured")
    if entry is None:
        return (
            f"{calibration.FIT_PATH.name} has no 'unmeasured' spread: run `make accuracy` "
            "(python -m estimator calibrate)"
        )
    if entry["sigma"] != calibration.UNMEASURED_SIGMA:
        return (
            f"the fit measures the spread of prior-only predictions at sigma {entry['sigma']} "
            f"({entry['measured']} over {entry['cases']} cases of {', '.join(entry['families'])}"
            f"), but the estimator runs on UNMEASURED_SIGMA "
            f"{calibration.UNMEASURED_SIGMA}: it reads calibration.json when imported, so "
            "run the report in a fresh process (`make accuracy` does)"
        )
    return None


def run_fit(cases: list[dict[str, Any]]) -> None:
    """Fit every family, cross-validate by source and write ``calibration.json``, with the
    spread of the prior-only predictions (:func:`unmeasured_spread`).

    Parameters
    ----------
    cases : list of dict
        Every case (unscored ones are skipped).
    """
    whole = fit_calibration(prepare([c for c in cases if scored(c)]), processes=2)
    print(f"  stacks {whole.stacks}", flush=True)
    out_of_sample = leave_one_source_out(
        cases, whole, progress=lambda source: print(f"leaving out {source}", flush=True)
    )
    out_of_stack = leave_one_stack_out(
        cases, whole, progress=lambda stack: print(f"leaving out stack {stack}", flush=True)
    )
    record = fit_record(cases, out_of_sample, whole, out_of_stack)
    record["unmeasured"] = unmeasured_spread(cases, out_of_sample)
    record["out_of_sample"] = dict(sorted(out_of_sample.items()))
    record["out_of_stack"] = dict(sorted(out_of_stack.items()))
    calibration.FIT_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for family, entry in record["families"].items():
        print(f"  {family:18s} {entry['fitted']} sigma {entry['sigma']}")
    print(f"  {'unmeasured':18s} sigma {record['unmeasured']['sigma']}")
