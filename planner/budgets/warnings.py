"""What a budget must not rest on unawares: the warnings of an estimation run, in one place.

:func:`run_warnings` reads a finished run's stored estimate and budget, its price record and
the project: the run does not fit in memory, its figures come from an estimator family with
no measurements, its price carries a data-quality flag, its price book is stale, its vendor
quote is an example (not a real offer) or has expired, its P90 cost is above the project's
budget ceiling, or it misses the project's deadline (blocking at P50, a note at P90 only).
The run page, the budget form, the request page,
the API and the snapshot document all call it; :func:`warnings_override_check` is the one
rule that refuses a budget resting on a blocking warning unless the requester says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.utils import timezone

from estimator.core.deadline import MISSES_P50, MISSES_P90
from estimator.core.memory import DOES_NOT_FIT as MEMORY_DOES_NOT_FIT
from estimator.core.memory import TIGHT as MEMORY_TIGHT
from estimator.core.memory import result_memory_verdict
from planner.budgets.models import BudgetRequest
from planner.common.errors import PlannerError
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import EstimationRun, Project
from planner.scenarios.prices import PriceObject, price_get, prices_get
from pricing.errors import PricingError
from pricing.models import PriceEntry, VendorQuote
from pricing.selectors import money_convert

Severity = Literal["block", "warn"]
BLOCK: Severity = "block"
WARN: Severity = "warn"

DOES_NOT_FIT = "does_not_fit"
TIGHT = "tight_on_memory"
UNCALIBRATED = "uncalibrated"
PRICE_FLAGGED = "price_flagged"
PRICE_BOOK_STALE = "price_book_stale"
ABOVE_CEILING = "above_ceiling"
CEILING_UNCHECKED = "ceiling_unchecked"
MISSES_DEADLINE = "misses_deadline"
DEADLINE_AT_RISK = "deadline_at_risk"
QUOTE_EXAMPLE = "quote_example"
QUOTE_EXPIRED = "quote_expired"

#: A warning in two or three words, for a badge in a table row.
LABELS = {
    DOES_NOT_FIT: "does not fit",
    TIGHT: "tight on memory",
    UNCALIBRATED: "uncalibrated",
    PRICE_FLAGGED: "flagged price",
    PRICE_BOOK_STALE: "stale price book",
    ABOVE_CEILING: "above ceiling",
    CEILING_UNCHECKED: "ceiling unchecked",
    MISSES_DEADLINE: "misses deadline",
    DEADLINE_AT_RISK: "late at P90",
    QUOTE_EXAMPLE: "example quote",
    QUOTE_EXPIRED: "expired quote",
}

#: What :func:`run_warnings` checks, in words, for a pack that found nothing to warn of.
CHECKED = (
    "memory",
    "estimator calibration",
    "the price's data-quality flag",
    "the price book's age",
    "whether a vendor quote is an example or has expired",
    "the project's budget ceiling",
    "the project's deadline (at P50 and P90)",
)

#: How the estimator words a family without measurements (``estimator.core.estimate``).
UNCALIBRATED_PREFIX = "uncalibrated: "
FAMILY_NAMED = re.compile(r"of the (\S+) family")


@dataclass(frozen=True)
class BudgetWarning:
    """One thing a requester and an approver should know before money is committed.

    ``severity`` ``block`` refuses a budget request unless it gives an override reason;
    ``warn`` is shown wherever the run's budget is.
    """

    code: str
    severity: Severity
    message: str

    @property
    def label(self) -> str:
        """The warning in a few words (``does not fit``), for a badge."""
        return LABELS.get(self.code, self.code.replace("_", " "))

    def as_json(self) -> dict[str, str]:
        """``{"code", "severity", "message"}``, as the snapshot document keeps it."""
        return asdict(self)


def money_text(amount: Decimal, currency: str) -> str:
    """``10.8 M USD`` from a million up, ``600,000 USD`` below."""
    if abs(amount) >= 1_000_000:
        return f"{amount / 1_000_000:,.1f} M {currency}"
    return f"{amount:,.0f} {currency}"


def _price_key(run: EstimationRun) -> tuple[Any, Any]:
    return (run.price or {}).get("source"), (run.price or {}).get("id")


def run_warnings(
    run: EstimationRun,
    *,
    project: Project | None = None,
    today: date | None = None,
    prices: Mapping[tuple[str, int], PriceObject] | None = None,
) -> list[BudgetWarning]:
    """The warnings of ``run``'s figures, blocking ones first; empty before it succeeds.

    ``project`` defaults to the run's; ``today`` (for the price book's age and the exchange
    rate) to the local date; ``prices`` are records already read (:func:`runs_warnings`),
    else the run's price is read here.
    """
    project = project or run.scenario.project
    today = today or timezone.localdate()
    result, budget = run.result or {}, run.budget or {}
    key = _price_key(run)
    price = prices.get(key) if prices is not None else price_get(*key)
    found = [
        _memory_warning(result),
        *_calibration_warnings(result),
        _flag_warning(price),
        _stale_warning(price, today),
        *_quote_warnings(price, today),
        _ceiling_warning(budget, project, today),
        _deadline_warning(run, project, today),
    ]
    warnings = [warning for warning in found if warning is not None]
    return sorted(warnings, key=lambda warning: warning.severity != BLOCK)


def runs_warnings(
    runs: Iterable[tuple[EstimationRun, Project]], *, today: date | None = None
) -> dict[int, list[BudgetWarning]]:
    """:func:`run_warnings` of each ``(run, its project)`` by run id, reading the prices in
    one query per source (a comparison of many runs costs as many queries as one)."""
    pairs = list(runs)
    prices = prices_get(_price_key(run) for run, _project in pairs)
    return {
        run.pk: run_warnings(run, project=project, today=today, prices=prices)
        for run, project in pairs
    }


def _memory_warning(result: Mapping[str, Any]) -> BudgetWarning | None:
    verdict = result_memory_verdict(result)
    needed = float(result["memory_per_gpu_gib"]["total"])
    have = float(result["accelerator_memory_gib"])
    if verdict == MEMORY_TIGHT:
        usable = float((result.get("memory_headroom") or {}).get("usable_gib", have))
        return BudgetWarning(
            TIGHT,
            WARN,
            f"tight on memory: needs {needed:,.1f} GiB per GPU, {needed - usable:,.1f} GiB over "
            f"the {usable:,.1f} GiB the framework leaves usable of {have:,.0f} GiB, so the run "
            "may stop with out-of-memory errors",
        )
    if verdict != MEMORY_DOES_NOT_FIT:
        return None
    return BudgetWarning(
        DOES_NOT_FIT,
        BLOCK,
        f"does not fit in memory: needs {needed:,.0f} GiB per GPU of {have:,.0f} GiB, so the "
        "training cannot run as estimated and its days and cost mean nothing",
    )


def _calibration_warnings(result: Mapping[str, Any]) -> list[BudgetWarning]:
    warnings = []
    for text in result.get("warnings") or ():
        if not str(text).startswith(UNCALIBRATED_PREFIX):
            continue
        named = FAMILY_NAMED.search(str(text))
        family = f" ({named.group(1)})" if named else ""
        warnings.append(
            BudgetWarning(
                UNCALIBRATED,
                WARN,
                f"figures come from an uncalibrated estimator family{family}: its efficiency "
                "is assumed, not fitted to measurements, so treat the days and cost as a "
                "rough guide",
            )
        )
    return warnings


def _flag_warning(price: PriceObject | None) -> BudgetWarning | None:
    if not isinstance(price, PriceEntry) or not price.data_flag.strip():
        return None
    where = f"{price.provider.name} {price.region}, {price.get_pricing_type_display()}"
    return BudgetWarning(
        PRICE_FLAGGED, WARN, f"the price ({where}) is flagged: {price.data_flag.strip()}"
    )


def _stale_warning(price: PriceObject | None, today: date) -> BudgetWarning | None:
    if not isinstance(price, PriceEntry):
        return None
    book = price.book
    fetched = timezone.localdate(book.fetched_at)
    days = (today - fetched).days
    if days <= settings.PRICE_BOOK_STALE_DAYS:
        return None
    return BudgetWarning(
        PRICE_BOOK_STALE,
        WARN,
        f"price book '{book.name}' fetched {fetched:%Y-%m-%d}, {days} days ago (stale after "
        f"{settings.PRICE_BOOK_STALE_DAYS} days): check the price still holds",
    )


def _quote_warnings(price: PriceObject | None, today: date) -> list[BudgetWarning]:
    """A quote marked as an example is no offer to fund; an expired one no longer holds."""
    if not isinstance(price, VendorQuote):
        return []
    found = []
    name = f"{price.vendor} {price.reference}".strip()
    if price.is_example:
        found.append(
            BudgetWarning(
                QUOTE_EXAMPLE,
                WARN,
                f"the quote ({name}) is an example, not a real offer: get a real quote "
                "before money is committed on it",
            )
        )
    if price.validity_on(today) == "expired":
        found.append(
            BudgetWarning(
                QUOTE_EXPIRED,
                WARN,
                f"the quote ({name}) expired on {price.valid_until:%Y-%m-%d}: ask the vendor "
                "whether its price still holds",
            )
        )
    return found


def _ceiling_warning(
    budget: Mapping[str, Any], project: Project, today: date
) -> BudgetWarning | None:
    """P90 above the ceiling, in the project's currency (converted at ``today``'s rate)."""
    ceiling = project.budget_ceiling
    if ceiling is None or not budget:
        return None
    p90, currency = Decimal(budget["cost"]["p90"]), str(budget["currency"])
    ceiling_text = f"the project's ceiling of {money_text(ceiling, project.currency)}"
    try:
        converted = money_convert(
            amount=p90, from_currency=currency, to_currency=project.currency, on=today
        )
    except PricingError as error:
        return BudgetWarning(
            CEILING_UNCHECKED,
            WARN,
            f"P90 {money_text(p90, currency)} cannot be compared with {ceiling_text}: "
            f"{error.message}",
        )
    if converted.amount <= ceiling:
        return None
    via = ""
    if currency != project.currency:
        via = (
            f" ({money_text(p90, currency)} at {converted.rate} {project.currency} per "
            f"{currency}, {converted.rate_date:%Y-%m-%d})"
        )
    return BudgetWarning(
        ABOVE_CEILING,
        WARN,
        f"P90 {money_text(converted.amount, project.currency)}{via} is above {ceiling_text}",
    )


def _deadline_warning(run: EstimationRun, project: Project, today: date) -> BudgetWarning | None:
    """Late at P50 blocks (the budget would pay for a run that, more likely than not, ends
    after the deadline); late at P90 only is a note."""
    check = run_deadline(run, project=project, today=today)
    if check is None or check.verdict not in (MISSES_P50, MISSES_P90):
        return None
    assert project.deadline is not None
    assert check.days_available is not None
    chance = (
        f"; {check.probability_text} chance of finishing in time" if check.probability_text else ""
    )
    left = f"{check.days_available:,.0f} days from {today:%Y-%m-%d}"
    due = f"the project's deadline ({project.deadline:%Y-%m-%d}, {left})"
    if check.verdict == MISSES_P50:
        return BudgetWarning(
            MISSES_DEADLINE,
            BLOCK,
            f"misses {due} at P50: {check.p50_days:,.0f} days (P90 {check.p90_days:,.0f}){chance}",
        )
    return BudgetWarning(
        DEADLINE_AT_RISK,
        WARN,
        f"meets {due} at P50 ({check.p50_days:,.0f} days) but misses it at P90 "
        f"({check.p90_days:,.0f} days){chance}",
    )


# --- The rule ----------------------------------------------------------------------------------


def warnings_blocking(warnings: Iterable[BudgetWarning]) -> list[BudgetWarning]:
    return [warning for warning in warnings if warning.severity == BLOCK]


def warnings_override_check(warnings: Sequence[BudgetWarning], override_reason: str) -> str:
    """The override reason, stripped; refused (on ``run``) when a blocking warning has none.

    A budget request for a run that does not fit in memory, say, is saved and submitted only
    when the requester says why it should be funded all the same.
    """
    reason = override_reason.strip()
    blocking = warnings_blocking(warnings)
    if blocking and not reason:
        what = "; ".join(warning.message for warning in blocking)
        raise PlannerError(
            f"the run {what}. To request its budget anyway, give an override reason: why "
            "finance should fund it as it is",
            field="run",
        )
    return reason


def warnings_json(warnings: Iterable[BudgetWarning]) -> list[dict[str, str]]:
    return [warning.as_json() for warning in warnings]


def warnings_from_json(items: Iterable[Mapping[str, Any]]) -> list[BudgetWarning]:
    """Warnings as a snapshot document keeps them, read back."""
    return [
        BudgetWarning(str(item["code"]), BLOCK if item["severity"] == BLOCK else WARN,
                      str(item["message"]))
        for item in items
    ]  # fmt: skip


@dataclass(frozen=True)
class RequestWarnings:
    """What a request page shows: the warnings of its document (frozen at submission, or a
    draft's live preview) and, once frozen, those that have arisen since."""

    shown: list[BudgetWarning]
    since_submission: list[BudgetWarning]

    @property
    def blocking(self) -> list[BudgetWarning]:
        return warnings_blocking([*self.shown, *self.since_submission])


def request_warnings(
    request: BudgetRequest, document: Mapping[str, Any], *, today: date | None = None
) -> RequestWarnings:
    """The warnings of ``request`` as its page shows them, read from ``document`` (its
    snapshot or preview); a snapshot frozen before warnings were kept gets today's."""
    if "warnings" not in document:
        return RequestWarnings(run_warnings(request.run, project=request.project, today=today), [])
    kept = warnings_from_json(document["warnings"])
    if not request.is_frozen:
        return RequestWarnings(kept, [])
    codes = {warning.code for warning in kept}
    live = run_warnings(request.run, project=request.project, today=today)
    return RequestWarnings(kept, [warning for warning in live if warning.code not in codes])
