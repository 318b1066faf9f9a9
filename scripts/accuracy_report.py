"""Score the estimator against the published measurements and write docs/accuracy.md.

    python scripts/accuracy_report.py [CALIBRATION_DIR] [--jobs 2] [--output docs/accuracy.md]
    python scripts/accuracy_report.py --fit      # refit every family first (make accuracy)

CALIBRATION_DIR defaults to ``../shared/calibration`` relative to the repository root and
must hold ``cases.jsonl`` and ``score.py``; the project's own cases are
``estimator/calibration/cases/*.jsonl``. ``--fit`` fits each family
(``scripts/calibration_fit.py``), cross-validates by leaving one source out at a time and
writes both to ``estimator/data/calibration.json``, with the spread of the predictions made
from priors alone (``unmeasured``: the Monte Carlo's efficiency spread for a family without
measurements); the report then runs in a fresh process so that the estimator loads the new
fit, and fails when ``calibration.UNMEASURED_SIGMA`` differs from that measured spread.
In-sample figures run score.py exactly as CI would, through the command line
(``<this python> -m estimator estimate``), on every case file, stated layouts and
``"auto"`` apart; out-of-sample figures are the leave-one-source-out predictions stored
with the fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WHOLE_RUN_FIT = ROOT / "estimator" / "data" / "whole_run.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import calibration_fit as fitting  # noqa: E402
import finetune_checks  # noqa: E402

from estimator.core import (  # noqa: E402
    ScenarioError,
    calibration,
    estimate,
    validate_scenario,
)


@dataclasses.dataclass
class CaseResult:
    """One scored case: measured and predicted tokens/s/GPU (None when it failed)."""

    case: dict[str, Any]
    measured: float
    predicted: float | None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured


def run_score(
    calibration_dir: Path, jobs: int, layout: str, cases_file: Path | None = None
) -> tuple[dict[str, float], dict]:
    """Run score.py through the CLI on one case file.

    Parameters
    ----------
    calibration_dir : Path
        Directory holding ``score.py`` (and, by default, ``cases.jsonl``).
    jobs : int
        Parallel estimator processes score.py runs.
    layout : {"explicit", "auto"}
        Which cases score.py runs: stated layouts or ``"auto"`` ones.
    cases_file : Path, optional
        The JSON Lines file to score; ``calibration_dir / "cases.jsonl"`` by default.

    Returns
    -------
    predicted : dict of str to float
        Predicted tokens/s/GPU by case id. [tokens/s]
    summary : dict
        score.py's summary JSON.
    """
    cases_file = cases_file or calibration_dir / "cases.jsonl"
    command = [
        sys.executable, str(calibration_dir / "score.py"), str(cases_file),
        "--cmd", f"{sys.executable} -m estimator estimate", "--cwd", str(ROOT), "--json",
        "--jobs", str(jobs), "--layout", layout,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    predicted: dict[str, float] = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) >= 4 and parts[3].endswith("%"):
            predicted[parts[0]] = float(parts[2])
    return predicted, json.loads(lines[-1])


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as score.py (NaN without values).

    Parameters
    ----------
    values : sequence of float
        The sample.
    fraction : float
        The quantile, 0 to 1. [1]

    Returns
    -------
    float
    """
    return float(np.percentile(np.asarray(values), fraction * 100)) if values else math.nan


def _errors(results: list[CaseResult]) -> list[float]:
    return [r.error for r in results if r.error is not None]


def stats(results: list[CaseResult]) -> str:
    """'median abs | P90 abs | mean signed' cells of a group of cases (or dashes).

    Parameters
    ----------
    results : list of CaseResult
        The group.

    Returns
    -------
    str
        Three Markdown table cells of relative errors, in per cent.
    """
    errors = _errors(results)
    if not errors:
        return "- | - | -"
    absolute = [abs(e) for e in errors]
    return (
        f"{percentile(absolute, 0.5):.1%} | {percentile(absolute, 0.9):.1%} | "
        f"{statistics.mean(errors):+.1%}"
    )


def _stated(result: CaseResult) -> bool:
    return result.case["scenario"].get("parallelism") != "auto"


def family_of(case: dict[str, Any]) -> str:
    """The accelerator family of a case's scenario.

    Parameters
    ----------
    case : dict
        A case in the calibration format.

    Returns
    -------
    str
    """
    return validate_scenario(case["scenario"]).cluster.spec.family


def band_covered(results: list[CaseResult], fit: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per family, (covered, scored): whether each case's measurement lies in the P10-P90
    band a user would have been shown had its source been unseen: the band is centred on
    the leave-one-source-out prediction with the spread of the family's *other* sources'
    out-of-sample errors (or the unmeasured spread when there are none).

    Parameters
    ----------
    results : list of CaseResult
        Cases predicted out of sample.
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    dict of str to (int, int)
        Cases inside the band and cases scored, by family.
    """
    by_family: dict[str, list[tuple[str, float]]] = {}
    for r in results:
        if r.error is not None and r.predicted:
            family = family_of(r.case)
            error = math.log(r.predicted / r.measured)
            by_family.setdefault(family, []).append((fitting.source_of(r.case), error))
    out = {}
    for family, rows in by_family.items():
        covered = 0
        for source, error in rows:
            others = [e for s, e in rows if s != source]
            sigma = fitting.family_spread(others)[0] if others else calibration.UNMEASURED_SIGMA
            covered += abs(error) <= fitting.Z_80 * sigma
        out[family] = (covered, len(rows))
    return out


def stack_band_covered(results: list[CaseResult], fit: dict[str, Any]) -> tuple[int, int]:
    """(covered, scored) of leave-one-stack-out predictions: the band an estimate without a
    stated framework shows, centred on the pooled-stack prediction with the family's spread
    and the between-stack spread, sqrt(sigma_f^2 + tau^2); tau as fitted without the
    case's own stack (``sigma_without``), since tau comes from these very errors.

    Parameters
    ----------
    results : list of CaseResult
        Cases predicted with their stack left out.
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    (int, int)
    """
    pooled = fit.get("stacks", {}).get("pooled", {})
    covered = total = 0
    for r in results:
        if r.error is None or not r.predicted:
            continue
        stack = fitting.stack_of(r.case)
        tau = float(pooled.get("sigma_without", {}).get(stack, pooled.get("sigma", 0.0)))
        family = fit["families"].get(family_of(r.case), {})
        sigma = float(family.get("sigma", calibration.UNMEASURED_SIGMA))
        total += 1
        covered += abs(math.log(r.predicted / r.measured)) <= fitting.Z_80 * math.hypot(sigma, tau)
    return covered, total


def _stated_coverage(results: list[CaseResult], fit: dict[str, Any]) -> tuple[int, int]:
    """(covered, scored) of the stated-layout cases by :func:`band_covered`."""
    found = band_covered([r for r in results if _stated(r)], fit).values()
    return sum(c for c, _ in found), sum(t for _, t in found)


def _coverage(covered: int, total: int) -> str:
    return f"{covered / total:.0%} ({covered}/{total})" if total else "-"


def stack_rows(
    out_of_sample: list[CaseResult], out_of_stack: list[CaseResult], fit: dict[str, Any]
) -> list[str]:
    """Markdown rows of the per-stack table: factor, leave-one-source-out (own stack) and
    leave-one-stack-out (pooled stack) errors of the stated-layout cases, band coverage.

    Parameters
    ----------
    out_of_sample, out_of_stack : list of CaseResult
        The scored cases predicted leaving out their source, and their stack.
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    list of str
    """
    fitted = fit.get("stacks", {}).get("fitted", {})
    rows = []
    for stack in sorted({fitting.stack_of(r.case) for r in out_of_sample}):
        mine = [r for r in out_of_sample if fitting.stack_of(r.case) == stack and _stated(r)]
        theirs = [r for r in out_of_stack if fitting.stack_of(r.case) == stack and _stated(r)]
        sources = len({fitting.source_of(r.case) for r in mine})
        factor = fitted.get(stack, {}).get("factor")
        shown = f"{factor:.3f}" if factor else "pooled"
        band = _coverage(*stack_band_covered(theirs, fit))
        rows.append(
            f"| {stack} | {len(mine)} | {sources} | {shown} | {stats(mine)} | {stats(theirs)} "
            f"| {band} |"
        )
    return rows


def biased_groups(
    out_of_sample: list[CaseResult], out_of_stack: list[CaseResult], limit: float = 0.15
) -> list[str]:
    """Sources and stacks (5 or more stated-layout cases) whose out-of-sample mean signed
    error passes ``limit``: '- source `x`: +17.8 % (leave-one-source-out)'."""
    lines = []
    groups = (
        ("source", fitting.source_of, out_of_sample, "leave-one-source-out"),
        ("stack", fitting.stack_of, out_of_sample, "leave-one-source-out"),
        ("stack", fitting.stack_of, out_of_stack, "leave-one-stack-out"),
    )
    for kind, key, results, label in groups:
        for name in sorted({key(r.case) for r in results}):
            errors = _errors([r for r in results if key(r.case) == name and _stated(r)])
            if len(errors) >= 5 and abs(statistics.mean(errors)) > limit:
                lines.append(
                    f"- {kind} `{name}`: {statistics.mean(errors):+.1%} mean signed over "
                    f"{len(errors)} cases ({label})"
                )
    return lines


def family_rows(
    results: list[CaseResult], out_of_sample: list[CaseResult], fit: dict[str, Any]
) -> list[str]:
    """Markdown rows of the per-family table: fit, errors in and out of sample, sigma, band.

    Parameters
    ----------
    results : list of CaseResult
        Scored cases, predicted in sample (the shipped fit).
    out_of_sample : list of CaseResult
        The same cases predicted out of sample (fit without their source).
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    list of str
    """
    coverage = band_covered(out_of_sample, fit)
    rows = []
    for family, entry in fit["families"].items():
        mine = [r for r in results if family_of(r.case) == family]
        theirs = [r for r in out_of_sample if family_of(r.case) == family]
        fitted = ", ".join(f"{k} {v:.3g}" for k, v in entry["fitted"].items()) or "prior"
        covered, total = coverage.get(family, (0, 0))
        band = f"{covered / total:.0%} ({covered}/{total})" if total else "-"
        rows.append(
            f"| {family} | {entry['cases']} | {entry['sources']} | {fitted} | {stats(mine)} "
            f"| {stats(theirs)} | {entry['sigma']:.3f} | {band} |"
        )
    return rows


def per_source_rows(results: list[CaseResult], out_of_sample: list[CaseResult]) -> list[str]:
    """Markdown rows of the per-source table: errors in and out of sample.

    Parameters
    ----------
    results : list of CaseResult
        Scored cases, predicted in sample (the shipped fit).
    out_of_sample : list of CaseResult
        The same cases predicted out of sample (fit without their source).

    Returns
    -------
    list of str
    """
    rows = []
    for source in sorted({fitting.source_of(r.case) for r in results}):
        mine = [r for r in results if fitting.source_of(r.case) == source]
        theirs = [r for r in out_of_sample if fitting.source_of(r.case) == source]
        families = ", ".join(sorted({family_of(r.case) for r in mine}))
        auto = sum(not _stated(r) for r in mine)
        rows.append(
            f"| `{source}` | {families} | {len(mine)} | {auto} | {stats(mine)} | {stats(theirs)} |"
        )
    return rows


def summary_lines(results: list[CaseResult], out_of_sample: list[CaseResult]) -> list[str]:
    """One console line each for stated and ``"auto"`` layouts: counts and errors.

    Parameters
    ----------
    results : list of CaseResult
        Scored cases, predicted in sample (the shipped fit).
    out_of_sample : list of CaseResult
        The same cases predicted out of sample (fit without their source).

    Returns
    -------
    list of str
    """
    lines = []
    for label, keep in (
        ("stated layouts", _stated),
        ("auto layouts", lambda result: not _stated(result)),
    ):
        mine = [r for r in results if keep(r)]
        theirs = [r for r in out_of_sample if keep(r)]
        failed = sum(r.error is None for r in mine)
        lines.append(
            f"{label}: {len(mine)} cases, {failed} failed; in-sample median/P90/mean "
            f"{stats(mine).replace(' | ', ' / ')}; leave-one-source-out "
            f"{stats(theirs).replace(' | ', ' / ')}"
        )
    return lines


def table2_split(results: list[CaseResult]) -> str:
    """Median |error| of Narayanan table 2 split into ZeRO-3 and PTD-P rows.

    Parameters
    ----------
    results : list of CaseResult
        Scored cases (only ``narayanan21-t2-*`` ones count).

    Returns
    -------
    str
        One clause per method, joined by "; ".
    """
    parts = []
    for label, zero3 in (("ZeRO-3", True), ("PTD-P", False)):
        errors = [
            abs(r.error)
            for r in results
            if r.error is not None
            and r.case["id"].startswith("narayanan21-t2-")
            and (r.case["scenario"]["parallelism"]["zero_stage"] == 3) == zero3
        ]
        if errors:
            parts.append(
                f"{label} {len(errors)} rows, median |error| {percentile(errors, 0.5):.1%}"
                f", largest {max(errors):.1%}"
            )
    return "; ".join(parts)


def group_mfu_outlier(result: CaseResult, results: list[CaseResult]) -> str | None:
    """For tables of one model on one GPU type: is this row's measurement out of line?

    Parameters
    ----------
    result : CaseResult
        The row.
    results : list of CaseResult
        Every scored case (its peers are those with the same model, GPU, precision and
        recompute setting).

    Returns
    -------
    str or None
        A sentence when measured / predicted departs from its peers' median by 12 % or
        more (at least three peers), else None.
    """

    def key(case_result: CaseResult) -> tuple:
        scenario = case_result.case["scenario"]
        model = scenario["model"]
        return (
            model["hidden_size"],
            model["num_layers"],
            scenario["cluster"]["accelerator"],
            scenario["training"]["precision"],
            scenario["parallelism"]["recompute"],
        )

    def efficiency(case_result: CaseResult) -> float:
        if not case_result.predicted:
            return math.nan
        return case_result.measured / case_result.predicted

    peers = [efficiency(r) for r in results if key(r) == key(result) and r is not result]
    if len(peers) < 3:
        return None
    typical, own = statistics.median(peers), efficiency(result)
    if abs(own / typical - 1) < 0.12:
        return None
    return (
        f"the row is out of line with its table: measured/predicted is {own:.2f} here "
        f"against a median of {typical:.2f} over the {len(peers)} rows with the same "
        "model, GPU, precision and recompute setting"
    )


EXPLANATIONS: list[tuple[Callable[[dict[str, Any]], bool], str]] = [
    (
        lambda case: (
            case["id"].startswith("narayanan21-t2-")
            and case["scenario"]["parallelism"]["zero_stage"] == 3
        ),
        "DeepSpeed ZeRO-3 (2021) on 384-2,240 A100s: the measured step time hardly changes "
        "with the per-GPU batch (about 81 s for 175B, 180-250 s for 530B), i.e. it is bound "
        "by parameter gathers at roughly one 200 Gb/s NIC per GPU, the rate the 2021-22 "
        "stack (megatron-deepspeed-2022) gives its ZeRO-3 collectives; today's FSDP "
        "(llm-foundry, fms-fsdp) reaches the node's aggregate NIC bandwidth. Layout flagged "
        "config_assumed by the source.",
    ),
    (
        lambda case: (
            case["id"].startswith("nanotron-") and case["scenario"]["cluster"]["num_gpus"] >= 512
        ),
        "nanotron's 64-node points fall 2-4x below its 32-node points at similar per-GPU work; "
        "the layout's traffic (a DP reduction of at most a few GB over 32-128 ranks) does not "
        "account for that in an alpha-beta model. Likely fabric or framework effects at that "
        "scale; layout flagged config_assumed.",
    ),
    (
        lambda case: (
            case["id"].startswith("nanotron-") and case["scenario"]["parallelism"]["dp"] == 1
        ),
        "80B with dp = 1 and 256 micro-batches per step through nanotron's "
        "all-forward-all-backward pipeline engine, which the scenario cannot express (the "
        "contract has only 1F1B and interleaved); recompute and layout flagged config_assumed.",
    ),
]


def explain(result: CaseResult, results: list[CaseResult]) -> str:
    """A sentence on why this case is missed (rules on the case's metadata, not its id).

    Parameters
    ----------
    result : CaseResult
        The missed case.
    results : list of CaseResult
        Every scored case (for :func:`group_mfu_outlier`).

    Returns
    -------
    str
    """
    for applies, text in EXPLANATIONS:
        if applies(result.case):
            return text
    outlier = group_mfu_outlier(result, results)
    if outlier:
        return outlier
    direction = "slower" if (result.error or 0) > 0 else "faster"
    flags = ", ".join(result.case.get("flags") or []) or "none"
    return (
        f"the run was {direction} than the fitted family efficiencies predict for its "
        f"shapes; no specific cause identified (source flags: {flags})."
    )


def misses_rows(results: list[CaseResult], count: int) -> list[str]:
    """Markdown rows of the largest in-sample misses, largest first, with their explanation.

    Parameters
    ----------
    results : list of CaseResult
        Scored cases with stated layouts.
    count : int
        How many rows.

    Returns
    -------
    list of str
    """
    ranked = sorted((r for r in results if r.error is not None), key=lambda r: -abs(r.error or 0))
    rows = []
    for r in ranked[:count]:
        s = r.case["scenario"]
        p = s["parallelism"]
        layout = (
            f"{s['cluster']['num_gpus']}x {s['cluster']['accelerator']}, tp{p['tp']} "
            f"pp{p['pp']} dp{p['dp']} mb{p['micro_batch_size']} z{p['zero_stage']} "
            f"{p['recompute']}"
        )
        rows.append(
            f"| `{r.case['id']}` | {layout} | {r.measured:g} | {r.predicted:.4g} | "
            f"{r.error:+.1%} | {explain(r, results)} |"
        )
    return rows


def auto_rows(results: list[CaseResult]) -> list[str]:
    """Markdown rows of the cases whose layout the search chose, largest miss first.

    Parameters
    ----------
    results : list of CaseResult
        Cases with ``"parallelism": "auto"``.

    Returns
    -------
    list of str
    """
    rows = []
    for r in sorted(results, key=lambda r: -abs(r.error or math.inf)):
        s = r.case["scenario"]
        stated = r.case.get("stated_parallelism") or {}
        known = " ".join(f"{k}{v}" for k, v in stated.items()) or "-"
        predicted = f"{r.predicted:.4g}" if r.predicted is not None else "failed"
        error = f"{r.error:+.1%}" if r.error is not None else "-"
        rows.append(
            f"| `{r.case['id']}` | {s['cluster']['num_gpus']}x {s['cluster']['accelerator']} "
            f"| {known} | {r.measured:g} | {predicted} | {error} |"
        )
    return rows


def auto_section(results: list[CaseResult]) -> list[str]:
    """The report's section on the cases whose layout is left to the search.

    Parameters
    ----------
    results : list of CaseResult
        Cases with ``"parallelism": "auto"``, predicted in sample.

    Returns
    -------
    list of str
        Markdown lines.
    """
    return [
        "## Layout left to the search",
        "",
        f'Cases with `"parallelism": "auto"`: **{len(results)}**; median abs / P90 abs / mean '
        f"signed error in-sample: {stats(results).replace(' | ', ' / ')}. "
        "The estimate is that of the fastest layout that fits "
        "(`python -m estimator search`), so these rows also test that the search finds "
        "layouts as good as the published ones; the stated part of the layout is not imposed.",
        "",
        "| case | cluster | stated layout | measured | predicted | error |",
        "| --- | --- | --- | ---: | ---: | ---: |",
        *auto_rows(results),
        "",
    ]


@dataclasses.dataclass
class SearchGain:
    """A stated-layout case: predicted tokens/s/GPU of its stated layout and of the search's."""

    case: dict[str, Any]
    stated: float
    searched: float
    searched_layout: dict[str, Any]

    @property
    def gain(self) -> float:
        return self.searched / self.stated - 1


#: Rows a source itself presents as untuned baselines, not the layouts its authors tuned:
#: Narayanan et al. 2021 table 2's ZeRO-3 rows (DeepSpeed ZeRO-3 without model
#: parallelism, run to show what PTD-P gains over it).
UNTUNED_BASELINES = tuple(f"narayanan21-t2-0{i}" for i in range(1, 7))


def auto_results(
    cases: list[dict[str, Any]], out_of_sample: dict[str, float | None]
) -> tuple[list[CaseResult], list[CaseResult]]:
    """Every scored case with its layout left to the search: (in-sample, out-of-sample).

    In-sample runs the search with the shipped fit; out-of-sample reads the
    leave-one-source-out predictions stored with the fit (``<id>@auto``; a case whose layout
    is already ``"auto"`` is its own prediction).

    Parameters
    ----------
    cases : list of dict
        Scored cases.
    out_of_sample : dict of str to float or None
        Leave-one-source-out tokens/s/GPU by key (the fit's ``out_of_sample``).

    Returns
    -------
    in_sample_results, out_of_sample_results : list of CaseResult
    """
    in_sample_results, out_of_sample_results = [], []
    for case in cases:
        measured = float(case["measured"]["tokens_per_s_per_gpu"])
        try:
            predicted = estimate(fitting.as_auto(case)["scenario"])["tokens_per_s_per_gpu"]
        except ScenarioError:
            predicted = None
        in_sample_results.append(CaseResult(case, measured, predicted))
        auto = case["scenario"].get("parallelism") == "auto"
        key = case["id"] if auto else case["id"] + fitting.AUTO_SUFFIX
        out_of_sample_results.append(CaseResult(case, measured, out_of_sample.get(key)))
    return in_sample_results, out_of_sample_results


def auto_everywhere_section(
    in_sample_results: list[CaseResult], out_of_sample_results: list[CaseResult]
) -> list[str]:
    """Every measurement predicted with ``"auto"``: what a planner who leaves the layout to
    the search sees against what expert teams measured with their own layouts.

    Parameters
    ----------
    in_sample_results, out_of_sample_results : list of CaseResult
        :func:`auto_results`.

    Returns
    -------
    list of str
        Markdown lines.
    """

    def tuned(group: list[CaseResult]) -> list[CaseResult]:
        return [r for r in group if r.case["id"] not in UNTUNED_BASELINES]

    rows = [
        f"| `{r.case['id']}` | {r.measured:g} | "
        + (f"{r.predicted:.4g} | {r.error:+.1%} |" if r.error is not None else "failed | - |")
        + (f" {o.error:+.1%} |" if o.error is not None else " - |")
        for r, o in sorted(
            zip(in_sample_results, out_of_sample_results, strict=True),
            key=lambda pair: -abs(pair[0].error or math.inf),
        )[:15]
    ]
    return [
        "## Every measurement with the layout left to the search",
        "",
        'Planners leave the layout to `"auto"`. Here every measured case, stated layouts '
        "included, is predicted as they would see it: the search picks the layout, within "
        "the default framework profile and its memory headroom "
        "(`estimator/core/frameworks.py`), and the prediction is compared with what the "
        "publishing team measured with its own tuned layout. Out of sample, each source's "
        "cases are searched with the fit made without that source.",
        "",
        "| cases | count | in-sample median | in-sample P90 | in-sample mean signed "
        "| out-of-sample median | out-of-sample P90 | out-of-sample mean signed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| tuned layouts (all but the untuned baselines) | {len(tuned(in_sample_results))} "
        f"| {stats(tuned(in_sample_results))} | {stats(tuned(out_of_sample_results))} |",
        f"| every case | {len(in_sample_results)} | {stats(in_sample_results)} "
        f"| {stats(out_of_sample_results)} |",
        "",
        "The untuned baselines are the rows a source presents as such: "
        + ", ".join(f"`{i}`" for i in UNTUNED_BASELINES)
        + " (DeepSpeed ZeRO-3 without model parallelism in Narayanan et al. 2021, table 2, "
        "run to show what PTD-P gains over it; the search rightly prefers model parallelism "
        "there).",
        "",
        "Largest in-sample misses:",
        "",
        "| case | measured | auto predicts | in-sample error | out-of-sample error |",
        "| --- | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def whole_run_section(path: Path) -> list[str]:
    """The published whole runs against the whole-run model (``scripts/whole_run_fit.py``).

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


def finetune_section() -> list[str]:
    """Fine-tuning memory, fits and throughput against published figures
    (``scripts/finetune_checks.py``).

    Returns
    -------
    list of str
        Markdown lines.
    """
    results = finetune_checks.checked_rows()
    summary = finetune_checks.summary(results)
    listed = len(finetune_checks.load_checks())
    median = summary["memory_median_abs_error"]
    return [
        "## Fine-tuning: LoRA, QLoRA, optimizers",
        "",
        f"`estimator/calibration/finetune_checks.jsonl` holds {listed} published figures of "
        "fine-tuning memory, fits and throughput (the QLoRA paper, torchtune's READMEs and "
        "tutorials, PEFT, the Hugging Face 4-bit blog, LLaMA-Factory, Unsloth, DeepSpeed, "
        f"the optimizer papers), each with its source and quote. {summary['rows']} carry a "
        "scenario that expresses their setup (the rest are bytes-per-parameter rules the "
        "unit tests check, or encoder models). A row is **asserted** - the tests hold the "
        "estimator to it - when the source states the statistic it measured and every "
        "setting that moves the figure, and the estimator models them all; the others are "
        "**reported**, with what the estimator leaves out (paged optimizers, the optimizer "
        "step fused into the backward, chunked cross-entropy, activation offloading, "
        "attention without FlashAttention, unstated settings). Memory is compared as the "
        "source measured it: the whole device for reserved figures, the tensors alone "
        "(without the CUDA context and allocator reserve) for allocated or active peaks "
        "and for figures that do not say; `difference` rows compare the change from a "
        "baseline row of the same table, which cancels any constant of the statistic.",
        "",
        f"Asserted: **{summary['asserted_ok']} of {summary['asserted']}** hold. Reported: "
        f"{summary['reported_ok']} of {summary['rows'] - summary['asserted']} within the "
        "row's tolerance or verdict. Median absolute error of the asserted memory rows: "
        + (f"**{median:.0%}**." if median is not None else "-."),
        "",
        "| row | published | estimate | error | tolerance | holds | source | setup and "
        "assumptions |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |",
        *finetune_checks.table_rows(results),
        "",
    ]


def search_gains(cases: list[dict]) -> list[SearchGain]:
    """Estimate every stated-layout case twice: as stated, and with ``"auto"``.

    Parameters
    ----------
    cases : list of dict
        Scored cases (``"auto"`` ones are skipped).

    Returns
    -------
    list of SearchGain
        One per case the search finds a layout for.
    """
    gains = []
    for case in cases:
        scenario = case["scenario"]
        if scenario.get("parallelism") == "auto":
            continue
        stated = estimate(scenario)["tokens_per_s_per_gpu"]
        try:
            searched = estimate({**scenario, "parallelism": "auto"})
        except ScenarioError:  # no layout of the search fits (e.g. an odd device count)
            continue
        gains.append(
            SearchGain(case, stated, searched["tokens_per_s_per_gpu"], searched["parallelism"])
        )
    return gains


def _layout_text(layout: dict[str, Any]) -> str:
    keys = ("tp", "pp", "dp", "cp", "micro_batch_size", "zero_stage", "recompute")
    short = {"micro_batch_size": "mb", "zero_stage": "z"}
    return " ".join(f"{short.get(k, k)}{layout[k]}" for k in keys if k in layout)


def search_section(gains: list[SearchGain]) -> list[str]:
    """The search against the published layouts: it must never predict less than they do.

    Parameters
    ----------
    gains : list of SearchGain
        :func:`search_gains`.

    Returns
    -------
    list of str
        Markdown lines.
    """
    values = [g.gain for g in gains]
    worse = sum(v < -1e-9 for v in values)
    same = sum(abs(v) <= 1e-3 for v in values)
    rows = [
        f"| `{g.case['id']}` | {_layout_text(g.case['scenario']['parallelism'])} "
        f"| {_layout_text(g.searched_layout)} | {g.stated:.4g} | {g.searched:.4g} "
        f"| {g.gain:+.1%} |"
        for g in sorted(gains, key=lambda g: -g.gain)[:15]
    ]
    return [
        "## The search against the published layouts",
        "",
        f"On the **{len(gains)}** cases that state their layout, the same scenario with "
        '`"parallelism": "auto"` predicts a throughput at least as high as the stated layout '
        f"in **{len(gains) - worse}** cases (lower in {worse}); {same} are within 0.1 %, the "
        f"median gain is **{statistics.median(values):+.1%}** and the largest "
        f"**{max(values):+.1%}**. A large gain means the search found a layout the published "
        "run did not use, or that the model rates too kindly (usually: no activation "
        "recomputation where the run recomputed everything, as the 2021 Megatron-LM runs "
        "did at every size although the memory model says the smaller ones fit without "
        "it, even with the s x s scores stored).",
        "",
        "| case | stated layout | layout found | stated predicts | found predicts | gain |",
        "| --- | --- | --- | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def not_scored_section(unscored: Sequence[dict[str, Any]]) -> list[str]:
    """The cases listed in the files that neither count nor take part in the fit, and why
    (``calibration_fit.unscored_reason``, with the case's ``excluded_because``)."""
    if not unscored:
        return []
    rows = [
        f"| `{c['id']}` | {fitting.unscored_reason(c)} | {c.get('excluded_because', '')} |"
        for c in unscored
    ]
    return [
        "## Cases not scored",
        "",
        "Listed in the case files but neither scored nor fitted: the reason, and for an "
        "excluding flag the evidence.",
        "",
        "| case | reason | evidence |",
        "| --- | --- | --- |",
        *rows,
        "",
    ]


def write_report(
    path: Path,
    results: list[CaseResult],
    out_of_sample: list[CaseResult],
    fit: dict[str, Any],
    gains: list[SearchGain],
    auto_everywhere: tuple[list[CaseResult], list[CaseResult]],
    unscored: Sequence[dict[str, Any]] = (),
    out_of_stack: Sequence[CaseResult] = (),
) -> None:
    """Write ``docs/accuracy.md``.

    Parameters
    ----------
    path : Path
        Where to write it.
    results : list of CaseResult
        Scored cases, predicted in sample (the shipped fit).
    out_of_sample : list of CaseResult
        The same cases predicted out of sample (fit without their source).
    fit : dict
        The fit record (``calibration.json``).
    gains : list of SearchGain
        :func:`search_gains`.
    auto_everywhere : (list of CaseResult, list of CaseResult)
        :func:`auto_results`.
    unscored : sequence of dict
        The cases that do not count (:func:`not_scored_section`).
    out_of_stack : sequence of CaseResult
        The same cases predicted at the pooled stack with their own stack left out.
    """
    out_of_stack = list(out_of_stack)
    stated_stack = [r for r in out_of_stack if _stated(r)]
    stack_hits, stack_total = stack_band_covered(stated_stack, fit)
    pooled = fit.get("stacks", {}).get("pooled", {"factor": 1.0, "sigma": 0.0})
    biased = biased_groups(out_of_sample, out_of_stack)
    stated = [r for r in results if _stated(r)]
    stated_out = [r for r in out_of_sample if _stated(r)]
    auto = [r for r in results if not _stated(r)]
    auto_out = [r for r in out_of_sample if not _stated(r)]
    covered = band_covered(out_of_sample, fit).values()
    hits, total = sum(c for c, _ in covered), sum(t for _, t in covered)
    lines = [
        "# Estimator accuracy",
        "",
        "Generated by `make accuracy` (`scripts/accuracy_report.py --fit`; do not edit by",
        "hand). Every case of `../shared/calibration/cases.jsonl` and of",
        "`estimator/calibration/cases/*.jsonl` is scored: the predicted `tokens_per_s_per_gpu`",
        "(default margins) against the measured one, error = (predicted - measured) / measured.",
        "",
        "* **Leave-one-stack-out** (out of sample, first): for each software stack",
        "  (`estimator/core/frameworks.py`, `STACKS`), every case run on it is left out, every",
        "  family it measured is refitted from its prior on the rest, and its cases are",
        "  predicted at the pooled stack of the others: what a user of a stack the calibration",
        "  never saw gets, and what an estimate without a stated framework assumes.",
        "* **Leave-one-source-out** (out of sample): for each source (a paper, a README, one",
        "  MLPerf round...), every family it measured is refitted from its prior without it,",
        "  its stack's factor re-estimated without it, and its cases are predicted at their",
        "  stack. A family whose only source is left out is predicted from its prior.",
        "* **In-sample**: the estimator as shipped, run through the command line by the shared",
        "  `score.py`; the cases name no framework, so they run at the pooled stack.",
        "",
        "| stated layouts | count | median | P90 | mean signed | band covers |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| leave-one-stack-out (pooled stack) | {len(stated_stack)} | {stats(stated_stack)} "
        f"| {_coverage(stack_hits, stack_total)} |",
        f"| leave-one-source-out (own stack) | {len([r for r in out_of_sample if _stated(r)])} "
        f"| {stats([r for r in out_of_sample if _stated(r)])} "
        f"| {_coverage(*_stated_coverage(out_of_sample, fit))} |",
        "",
        f"The pooled stack's factor on kernel efficiency is **{pooled['factor']:.3f}** (the "
        "median of the current stacks'), and the between-stack log-sd it adds to the band is "
        f"**{pooled['sigma']:.3f}**: the spread of the leave-one-stack-out errors beyond the "
        "families' own, on the families measured on two or more stacks, each stack weighing "
        "the same (`calibration_fit.between_stack_spread`). Each stack's band coverage below "
        "uses the spread fitted without that stack.",
        "",
        "### Per software stack",
        "",
        "`factor` multiplies the family's kernel fractions (matmul, fp8 matmul, attention, "
        "memory bandwidth), each capped at its hardware limit, and divides the software "
        "overheads; it is fitted on the families measured on two or more stacks and shrunk "
        "towards the pooled value by its evidence (one pseudo-source). Errors are of "
        "stated-layout cases.",
        "",
        "| stack | cases | sources | factor | leave-one-source-out median abs | P90 abs "
        "| mean signed | leave-one-stack-out median abs | P90 abs | mean signed "
        "| band covers (stack out) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *stack_rows(out_of_sample, out_of_stack, fit),
        "",
        "Sources and stacks whose out-of-sample mean signed error passes 15 %:",
        "",
        *(biased or ["- none"]),
        "",
        "## All cases, in and out of sample",
        "",
        "| cases | count | failed | in-sample median | in-sample P90 | in-sample mean signed "
        "| out-of-sample median | out-of-sample P90 | out-of-sample mean signed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| stated layout | {len(stated)} | {sum(r.error is None for r in stated)} "
        f"| {stats(stated)} | {stats(stated_out)} |",
        f'| `"auto"` layout | {len(auto)} | {sum(r.error is None for r in auto)} '
        f"| {stats(auto)} | {stats(auto_out)} |",
        "",
        f"The Monte Carlo's P10-P90 band of tokens/s covers **{hits / max(total, 1):.0%}** "
        f"({hits} of {total}) of the measurements out of sample (nominal 80 %): the band is "
        "centred on the leave-one-source-out prediction with the spread of the family's "
        "other sources' out-of-sample errors.",
        "",
        "## Per family",
        "",
        "`sigma` is the log-sd of the efficiency factor the Monte Carlo samples for the "
        "family (80th percentile of its out-of-sample |log error| / 1.2816); `band covers` "
        "is the out-of-sample coverage described above. Families not listed have no "
        "measurements: they run on their priors (`estimator/core/calibration.py`), every "
        f"estimate says so, and their band uses sigma {calibration.UNMEASURED_SIGMA}.",
        "",
        "| family | cases | sources | fitted | in-sample median abs | P90 abs | mean signed "
        "| out-of-sample median abs | P90 abs | mean signed | sigma | band covers |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *family_rows(results, out_of_sample, fit),
        "",
        "## Per source",
        "",
        "| source | families | cases | of which auto | in-sample median abs | P90 abs "
        "| mean signed | out-of-sample median abs | P90 abs | mean signed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *per_source_rows(results, out_of_sample),
        "",
        "Narayanan et al. table 2 by method: " + table2_split(results) + ".",
        "",
        "## Largest misses (in-sample)",
        "",
        "| case | layout | measured | predicted | error | why |",
        "| --- | --- | ---: | ---: | ---: | --- |",
        *misses_rows(stated, 15),
        "",
        *auto_everywhere_section(*auto_everywhere),
        *whole_run_section(WHOLE_RUN_FIT),
        *finetune_section(),
        *auto_section(auto),
        *search_section(gains),
        *not_scored_section(unscored),
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


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
    counted = [c for c in cases if fitting.scored(c)]
    sources: dict[str, set[str]] = {}
    for case in counted:
        sources.setdefault(family_of(case), set()).add(fitting.source_of(case))
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
    measured = float(np.percentile(np.abs(errors), 80)) / fitting.Z_80
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
            "(scripts/accuracy_report.py --fit)"
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
    whole = fitting.fit_calibration(
        fitting.prepare([c for c in cases if fitting.scored(c)]), processes=2
    )
    print(f"  stacks {whole.stacks}", flush=True)
    out_of_sample = fitting.leave_one_source_out(
        cases, whole, progress=lambda source: print(f"leaving out {source}", flush=True)
    )
    out_of_stack = fitting.leave_one_stack_out(
        cases, whole, progress=lambda stack: print(f"leaving out stack {stack}", flush=True)
    )
    record = fitting.fit_record(cases, out_of_sample, whole, out_of_stack)
    record["unmeasured"] = unmeasured_spread(cases, out_of_sample)
    record["out_of_sample"] = dict(sorted(out_of_sample.items()))
    record["out_of_stack"] = dict(sorted(out_of_stack.items()))
    calibration.FIT_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for family, entry in record["families"].items():
        print(f"  {family:18s} {entry['fitted']} sigma {entry['sigma']}")
    print(f"  {'unmeasured':18s} sigma {record['unmeasured']['sigma']}")


def in_sample(calibration_dir: Path, jobs: int) -> tuple[dict[str, float], list[dict]]:
    """Predictions of every case file through score.py (stated and auto apart).

    Parameters
    ----------
    calibration_dir : Path
        Directory holding ``score.py`` and ``cases.jsonl``.
    jobs : int
        Parallel estimator processes.

    Returns
    -------
    predicted : dict of str to float
        Predicted tokens/s/GPU by case id. [tokens/s]
    summaries : list of dict
        score.py's summary of each file and layout kind.
    """
    predicted: dict[str, float] = {}
    summaries = []
    files = [calibration_dir / "cases.jsonl", *sorted(fitting.PROJECT_CASES.glob("*.jsonl"))]
    for path in files:
        for layout in ("explicit", "auto"):
            found, summary = run_score(calibration_dir, jobs, layout, path)
            predicted.update(found)
            summaries.append({"file": path.name, "layout": layout, **summary})
    return predicted, summaries


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring).

    Parameters
    ----------
    argv : list of str, optional
        Arguments; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        Exit status: 0, or 1 when ``calibration.UNMEASURED_SIGMA`` differs from the
        measured spread (:func:`unmeasured_sigma_problem`).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "calibration_dir", nargs="?", type=Path, default=ROOT.parent / "shared" / "calibration"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "accuracy.md")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fit", action="store_true", help="refit every family first")
    args = parser.parse_args(argv)
    cases = fitting.load_cases(args.calibration_dir / "cases.jsonl")
    if args.fit:
        run_fit(cases)
        # Fresh processes: the estimator reads calibration.json when it is imported, and the
        # whole-run fit builds on the new steady state.
        subprocess.run([sys.executable, str(ROOT / "scripts" / "whole_run_fit.py")], check=True)
        again = [sys.executable, __file__, str(args.calibration_dir), "--output", str(args.output)]
        return subprocess.run([*again, "--jobs", str(args.jobs)], check=False).returncode
    fit = load_fit()
    problem = unmeasured_sigma_problem(fit)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    predicted, _ = in_sample(args.calibration_dir, args.jobs)
    counted: list[dict[str, Any]] = []
    unscored: list[dict[str, Any]] = []
    for case in cases:  # one validation per case: scored() validates the scenario
        (counted if fitting.scored(case) else unscored).append(case)
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
    write_report(args.output, results, out_results, fit, gains, everywhere, unscored, stack_results)
    print("leave-one-stack-out, stated layouts:", stats([r for r in stack_results if _stated(r)]))
    for line in summary_lines(results, out_results):
        print(line)
    print(
        "auto everywhere, in-sample:", stats(everywhere[0]), "out of sample:", stats(everywhere[1])
    )
    print(f"search vs stated layouts: {sum(g.gain < -1e-9 for g in gains)} worse of {len(gains)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
