"""The report's sections on layouts left to the search: the cases stated as ``"auto"``,
every measurement predicted with ``"auto"``, and the search against the published
layouts."""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

from estimator.calibration.loading import AUTO_SUFFIX, as_auto
from estimator.calibration.results import CaseResult, stats
from estimator.core import ScenarioError, estimate


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
            predicted = estimate(as_auto(case)["scenario"])["tokens_per_s_per_gpu"]
        except ScenarioError:
            predicted = None
        in_sample_results.append(CaseResult(case, measured, predicted))
        auto = case["scenario"].get("parallelism") == "auto"
        key = case["id"] if auto else case["id"] + AUTO_SUFFIX
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
