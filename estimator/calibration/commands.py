"""Score the estimator against the published measurements and write docs/accuracy.md:
``python -m estimator calibrate`` and ``accuracy`` (:mod:`estimator.calibration.cli`).

The project's own cases are ``estimator/calibration/cases/*.jsonl``, beside the shared
``cases.jsonl``. ``calibrate`` fits each family (:mod:`estimator.calibration.families`) and
stack (:mod:`estimator.calibration.stacks`), cross-validates by leaving one source and one
stack out at a time (:mod:`estimator.calibration.crossval`) and writes both to
``estimator/data/calibration.json``, with the spread of the predictions made from priors
alone (``unmeasured``: the Monte Carlo's efficiency spread for a family without
measurements); it then refits the whole-run model and runs ``accuracy`` in fresh processes
so that the estimator loads the new fit. ``accuracy`` fails when
``calibration.UNMEASURED_SIGMA`` differs from that measured spread. In-sample figures run
score.py exactly as CI would, through the command line (``<this python> -m estimator
estimate``), on every case file, stated layouts and ``"auto"`` apart; out-of-sample figures
are the leave-one-source-out predictions stored with the fit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from estimator.calibration.finetune_checks import print_checks
from estimator.calibration.layouts import auto_results, search_gains
from estimator.calibration.loading import ROOT, load_cases, scored
from estimator.calibration.record import load_fit, run_fit, unmeasured_sigma_problem
from estimator.calibration.report import write_report
from estimator.calibration.results import CaseResult, is_stated, stats
from estimator.calibration.scoring import in_sample
from estimator.calibration.tables import summary_lines
from estimator.calibration.whole_runs import write_fit


def calibrate(calibration_dir: Path, output: Path, jobs: int) -> int:
    """Refit everything, then write the report (``make accuracy``).

    Parameters
    ----------
    calibration_dir : Path
        Directory holding ``score.py`` and ``cases.jsonl``.
    output : Path
        Where the report goes.
    jobs : int
        Parallel estimator processes.

    Returns
    -------
    int
        The exit status of :func:`accuracy`, run in a fresh process.
    """
    run_fit(load_cases(calibration_dir / "cases.jsonl"))
    # Fresh processes: the estimator reads calibration.json when it is imported, and the
    # whole-run fit builds on the new steady state.
    estimator = [sys.executable, "-m", "estimator"]
    subprocess.run([*estimator, "calibrate", "--whole-runs-only"], cwd=ROOT, check=True)
    again = [*estimator, "accuracy", str(calibration_dir.resolve()), "--output"]
    again += [str(output.resolve()), "--jobs", str(jobs)]
    return subprocess.run(again, cwd=ROOT, check=False).returncode


def whole_runs(output: Path) -> int:
    """Refit the whole-run model alone (:func:`estimator.calibration.whole_runs.write_fit`)."""
    write_fit(output)
    return 0


def finetune() -> int:
    """Print the fine-tuning checks (:func:`estimator.calibration.finetune_checks.print_checks`)."""
    print_checks()
    return 0


def accuracy(calibration_dir: Path, output: Path, jobs: int) -> int:
    """Score the shipped fit and write the report (parameters as :func:`calibrate`'s).

    Returns
    -------
    int
        Exit status: 0, or 1 when ``calibration.UNMEASURED_SIGMA`` differs from the
        measured spread (:func:`~estimator.calibration.record.unmeasured_sigma_problem`).
    """
    cases = load_cases(calibration_dir / "cases.jsonl")
    fit = load_fit()
    problem = unmeasured_sigma_problem(fit)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    predicted, _ = in_sample(calibration_dir, jobs)
    counted: list[dict[str, Any]] = []
    unscored: list[dict[str, Any]] = []
    for case in cases:  # one validation per case: scored() validates the scenario
        (counted if scored(case) else unscored).append(case)
    results = [
        CaseResult(c, float(c["measured"]["tokens_per_s_per_gpu"]), predicted.get(c["id"]))
        for c in counted
    ]
    out_of_sample = dict(fit.get("out_of_sample", {}))
    out_results = [CaseResult(r.case, r.measured, out_of_sample.get(r.case["id"])) for r in results]
    out_of_stack = dict(fit.get("out_of_stack", {}))
    stack_results = [
        CaseResult(r.case, r.measured, out_of_stack.get(r.case["id"])) for r in results
    ]
    gains = search_gains(counted)
    everywhere = auto_results(counted, out_of_sample)
    write_report(output, results, out_results, fit, gains, everywhere, unscored, stack_results)
    print("leave-one-stack-out, stated layouts:", stats([r for r in stack_results if is_stated(r)]))
    for line in summary_lines(results, out_results):
        print(line)
    print(
        "auto everywhere, in-sample:", stats(everywhere[0]), "out of sample:", stats(everywhere[1])
    )
    print(f"search vs stated layouts: {sum(g.gain < -1e-9 for g in gains)} worse of {len(gains)}")
    return 0
