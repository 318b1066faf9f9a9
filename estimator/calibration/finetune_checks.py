"""Check the estimator's fine-tuning figures against published ones.

Reads ``estimator/calibration/finetune_checks.jsonl``: published memory, fits/out-of-memory
and throughput figures of LoRA, QLoRA and full fine-tuning (the QLoRA paper, torchtune,
PEFT, the Hugging Face 4-bit blog, LLaMA-Factory, Unsloth, DeepSpeed, optimizer papers),
each with its source and quote. A row with a ``check`` carries the scenario that expresses
its setup (``assumptions`` say what the source leaves open), what to compare and, for
asserted rows, the tolerance the tests hold the estimator to. Rows without a ``check``
(encoder models, rules of bytes per parameter the unit tests cover) are listed only.

``python -m estimator accuracy --finetune-only`` prints the table; the accuracy report
renders it (:func:`finetune_section`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from estimator.core import estimate

CHECKS_PATH = Path(__file__).resolve().parent / "finetune_checks.jsonl"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One published figure against the estimate of its scenario."""

    row: dict[str, Any]
    predicted: float | bool
    error: float | None
    ok: bool

    @property
    def check(self) -> dict[str, Any]:
        return dict(self.row["check"])


def load_checks(path: Path = CHECKS_PATH) -> list[dict[str, Any]]:
    """Every published row, in file order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _memory(check: dict[str, Any]) -> float:
    """The estimate's memory as the source measured it: the whole device for reserved
    figures (and nvidia-smi), the tensors alone - no CUDA context, workspace or allocator
    reserve - for PyTorch's allocated/active peaks and for figures that do not say. [GiB]"""
    memory = estimate(check["scenario"])["memory_per_gpu_gib"]
    if check.get("metric") == "reserved":
        return float(memory["total"])
    return float(memory["total"] - memory["other"])


def evaluate(row: dict[str, Any], rows: dict[str, dict[str, Any]]) -> CheckResult:
    """Estimate the row's scenario and compare it with the published figure.

    ``difference`` rows compare the change from their ``baseline`` row (same table, same
    statistic), so whatever constant the statistic holds cancels."""
    check = row["check"]
    compare, published = check["compare"], check["published"]
    tolerance = check.get("tolerance")
    if compare == "fits":
        fits = bool(estimate(check["scenario"])["fits_in_memory"])
        return CheckResult(row, fits, None, fits == published)
    if compare == "model_states_at_least":
        memory = estimate(check["scenario"])["memory_per_gpu_gib"]
        states = float(sum(memory[k] for k in ("weights", "gradients", "optimizer")))
        return CheckResult(row, states, states / published - 1, states >= published)
    if compare == "tokens_per_s_per_gpu":
        predicted = float(estimate(check["scenario"])["tokens_per_s_per_gpu"])
    elif check.get("metric") == "difference":
        base = rows[check["baseline"]]["check"]
        predicted = _memory(check) - _memory(base)
        published = published - base["published"]
    else:
        predicted = _memory(check)
    error = predicted / published - 1
    return CheckResult(row, predicted, error, tolerance is None or abs(error) <= tolerance)


def checked_rows(path: Path = CHECKS_PATH) -> list[CheckResult]:
    """Every row that has a check, evaluated."""
    rows = load_checks(path)
    by_id = {row["id"]: row for row in rows}
    return [evaluate(row, by_id) for row in rows if row.get("check")]


def _value(compare: str, value: float | bool) -> str:
    if compare == "fits":
        return "fits" if value else "out of memory"
    if compare == "tokens_per_s_per_gpu":
        return f"{value:,.0f} tokens/s"
    return f"{value:.1f} GiB"


def summary(results: list[CheckResult]) -> dict[str, Any]:
    """Counts and the median absolute error of the asserted memory rows."""
    asserted = [r for r in results if r.check["asserted"]]
    errors = sorted(
        abs(r.error)
        for r in asserted
        if r.error is not None and r.check["compare"] == "memory_total_gib"
    )
    return {
        "rows": len(results),
        "asserted": len(asserted),
        "asserted_ok": sum(r.ok for r in asserted),
        "reported_ok": sum(r.ok for r in results if not r.check["asserted"]),
        "memory_median_abs_error": errors[len(errors) // 2] if errors else None,
    }


def table_rows(results: list[CheckResult]) -> list[str]:
    """Markdown rows: figure, published, predicted, error, tolerance, agreement, source."""
    lines = []
    for r in results:
        c = r.check
        published = _value(c["compare"], c["published"])
        if c["compare"] == "model_states_at_least":
            published = f"more than {c['published']:.0f} GiB of model state"
        predicted = _value(c["compare"], r.predicted)
        if c.get("metric") == "difference":
            published = f"{published} ({c['published'] - c['baseline_published']:+.2f} GiB)"
            predicted = f"{r.predicted:+.2f} GiB more than `{c['baseline']}`"
        error = f"{r.error:+.0%}" if r.error is not None else "-"
        tolerance = f"±{c['tolerance']:.0%}" if c.get("tolerance") else "-"
        held = "yes" if r.ok else "no"
        kind = "asserted" if c["asserted"] else "reported"
        lines.append(
            f"| `{r.row['id']}` | {published} | {predicted} | {error} "
            f"| {tolerance} | {held} ({kind}) | {r.row['source']} | {c['assumptions']} |"
        )
    return lines


def print_checks() -> None:
    """Print the table's rows and the summary (``python -m estimator accuracy
    --finetune-only``)."""
    results = checked_rows()
    for line in table_rows(results):
        print(line)
    print(json.dumps(summary(results)))


def finetune_section() -> list[str]:
    """Fine-tuning memory, fits and throughput against published figures: the accuracy
    report's section.

    Returns
    -------
    list of str
        Markdown lines.
    """
    results = checked_rows()
    counts = summary(results)
    listed = len(load_checks())
    median = counts["memory_median_abs_error"]
    return [
        "## Fine-tuning: LoRA, QLoRA, optimizers",
        "",
        f"`estimator/calibration/finetune_checks.jsonl` holds {listed} published figures of "
        "fine-tuning memory, fits and throughput (the QLoRA paper, torchtune's READMEs and "
        "tutorials, PEFT, the Hugging Face 4-bit blog, LLaMA-Factory, Unsloth, DeepSpeed, "
        f"the optimizer papers), each with its source and quote. {counts['rows']} carry a "
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
        f"Asserted: **{counts['asserted_ok']} of {counts['asserted']}** hold. Reported: "
        f"{counts['reported_ok']} of {counts['rows'] - counts['asserted']} within the "
        "row's tolerance or verdict. Median absolute error of the asserted memory rows: "
        + (f"**{median:.0%}**." if median is not None else "-."),
        "",
        "| row | published | estimate | error | tolerance | holds | source | setup and "
        "assumptions |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |",
        *table_rows(results),
        "",
    ]
