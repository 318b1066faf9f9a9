"""The pack's tables and cells: the rows of the summary and of each table, and how each kind
of figure is rounded and shown (:data:`KINDS`), shared by the XLSX, the CSV and the PDF."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from estimator.core.memory import result_memory_verdict
from planner.budgets.models import BudgetRequest
from planner.budgets.warnings import BLOCK
from planner.common.labels import MEMORY_VERDICTS
from planner.scenarios.commitments import commitment_of, commitment_sentences
from planner.scenarios.models import PriceSource
from pricing.models import PricingType

#: Characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """Prefix a text cell that a spreadsheet would run as a formula with a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


# --- Cells: how each kind of figure is rounded and shown ----------------------------------------


@dataclass(frozen=True)
class Kind:
    """How a kind of figure is rounded (``places``), formatted in the XLSX (``excel``) and
    written as text in the PDF (``spec``, Python's format mini-language)."""

    excel: str
    places: int | None
    spec: str


TEXT, WARNING, BOOL, DATE, DATETIME = "text", "warning", "bool", "date", "datetime"


KINDS: dict[str, Kind] = {
    "id": Kind("0", 0, "d"),
    "count": Kind("#,##0", 0, ",d"),
    "money": Kind("#,##0.00", 2, ",.2f"),
    "price": Kind("#,##0.0000", 4, ",.4f"),  # per accelerator-hour: the hundredth of a cent
    "days": Kind("0.0", 1, ",.1f"),
    "gpu_hours": Kind("#,##0", 0, ",d"),
    "share": Kind("0.0%", 3, ".1%"),
    "fine_share": Kind("0.00%", 4, ".2%"),  # a LoRA's trainable share is well under 1 %
    "seconds": Kind("0.000", 3, ",.3f"),
    "gib": Kind("#,##0.0", 1, ",.1f"),
    "quantity": Kind("#,##0.00", 2, ",.2f"),  # GB-months, GB, kWh, tonnes: the bill's units
    DATE: Kind("yyyy-mm-dd", None, "%Y-%m-%d"),
    DATETIME: Kind("yyyy-mm-dd hh:mm:ss", None, "%Y-%m-%d %H:%M:%S"),
}


#: The kind of each table column, by its header (a header means the same in every table).
COLUMN_KINDS = {
    "Run": "id", "GPUs": "count", "Cost P10": "money", "Cost P50": "money",
    "Cost P90": "money", "Days P10": "days", "Days P50": "days", "Days P90": "days",
    "GPU-hours P50": "gpu_hours", "Cost per M tokens": "money", "MFU": "share",
    "Memory": TEXT, "Chosen": BOOL, "Chance in time": "share", "Days": "days",
    "GPU-hours": "gpu_hours",
    "Share of total": "share", "Share of margin-free step time": "share",
    "Seconds per step": "seconds", "LoRA rank": "id", "Trainable parameters": "count",
    "Trainable share": "fine_share", "Host memory per node (GiB)": "gib", "When": DATETIME,
    "Cost": "money", "Cost saved": "money", "Amount": "money", "Unit price": "price",
    "Quantity": "quantity",
    "In total": BOOL,
}  # fmt: skip


NUMBER = int | float | Decimal


def cell_value(value: Any, kind: str, *, rounded: bool = True) -> Any:
    """``value`` as a cell holds it: rounded to its kind's places (a Decimal exactly, half
    up), a time in local time without its zone (a spreadsheet has none) to the second."""
    if isinstance(value, datetime):
        local = timezone.localtime(value) if timezone.is_aware(value) else value
        return local.replace(tzinfo=None, microsecond=0)
    places = KINDS[kind].places if kind in KINDS else None
    if isinstance(value, bool) or not isinstance(value, NUMBER) or places is None or not rounded:
        return value
    if isinstance(value, Decimal):
        exact = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        return int(exact) if places == 0 else exact
    return round(value) if places == 0 else round(float(value), places)


def cell_text(value: Any, kind: str) -> str:
    """``value`` as the PDF writes it: rounded, with thousands separators."""
    shown = cell_value(value, kind)
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "yes" if shown else "no"
    if isinstance(shown, date | NUMBER) and kind in KINDS:
        return format(shown, KINDS[kind].spec)
    return str(shown)


# --- The summary: warnings, request, price, snapshot ---------------------------------------------

Row = tuple[str, Any, str]  # label, value, kind


@dataclass(frozen=True)
class PackWarning:
    """A warning as the pack shows it: kept in the snapshot, or arisen since submission."""

    code: str
    severity: str
    message: str
    since_submission: bool = False

    @property
    def label(self) -> str:
        label = "Blocking warning" if self.severity == BLOCK else "Warning"
        return f"{label} (since submission)" if self.since_submission else label


def _warning_rows(context: Mapping[str, Any]) -> list[Row]:
    warnings: list[PackWarning] = context["pack_warnings"]
    blocking = sum(warning.severity == BLOCK for warning in warnings)
    count = f"{len(warnings)} ({blocking} blocking)" if warnings else "none"
    rows: list[Row] = [("Warnings", count, WARNING if warnings else TEXT)]
    rows += [(w.label, w.message[:1].upper() + w.message[1:], WARNING) for w in warnings]
    if context["warnings_checked_now"]:
        rows.append(("Warnings checked", "at export: the snapshot predates kept warnings", TEXT))
    if context["override_reason"]:
        rows.append(("Override reason", context["override_reason"], WARNING))
    return rows


def _date(text: str | None) -> date | None:
    """The local date of an ISO timestamp (or the date of an ISO date)."""
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    return timezone.localdate(moment) if timezone.is_aware(moment) else moment.date()


def price_rows(document: Mapping[str, Any]) -> list[Row]:
    """What the budget's price is and where it comes from, as the snapshot keeps it."""
    price, record = document.get("price") or {}, document.get("price_record") or {}
    per_hour = price.get("price_per_gpu_hour") or record.get("price_per_accelerator_hour")
    source = price.get("source")
    rows: list[Row] = [
        ("Price per accelerator-hour", Decimal(per_hour) if per_hour else None, "price"),
        ("Price currency", price.get("currency") or record.get("currency"), TEXT),
        ("Price source", PriceSource(source).label if source in PriceSource.values else "", TEXT),
        ("Price", price.get("label"), TEXT),
    ]
    rows += _commitment_rows(price, (document.get("results") or {}).get("budget"))
    if source == PriceSource.PRICE_ENTRY:
        return [*rows, *_entry_rows(record)]
    if source == PriceSource.VENDOR_QUOTE:
        return [*rows, *_quote_rows(record)]
    return [*rows, ("On-prem profile", record.get("name"), TEXT)]


def _commitment_rows(price: Mapping[str, Any], budget: Mapping[str, Any] | None) -> list[Row]:
    """A committed price as the commitment it is: the minimum spend, its term and hours, the
    share this run uses and what a GPU-hour it uses costs (``planner.scenarios.commitments``)."""
    use = commitment_of(price, budget)
    if not use:
        return []
    rows: list[Row] = [
        ("Commitment (minimum spend)", Decimal(use["minimum_spend"]), "money"),
        ("Commitment term (months)", use.get("term_months"), TEXT),
    ]
    if "used_share" in use:
        rows += [
            ("Committed GPU-hours", Decimal(use["committed_gpu_hours"]), "gpu_hours"),
            ("GPU-hours this run uses (P50)", Decimal(use["used_gpu_hours"]), "gpu_hours"),
            ("Share of the commitment used", use["used_share"], "share"),
            ("Idle share (paid, unused by this run)", use["idle_share"], "share"),
            (
                "Cost per GPU-hour used",
                _decimal_or_none(use.get("cost_per_used_gpu_hour")),
                "price",
            ),
        ]
    return [*rows, ("Commitment", " ".join(commitment_sentences(price, budget)), TEXT)]


def _decimal_or_none(value: Any) -> Decimal | None:
    return None if value is None else Decimal(value)


def _quote_rows(record: Mapping[str, Any]) -> list[Row]:
    return [
        ("Vendor", record.get("vendor"), TEXT),
        ("Quote reference", record.get("reference"), TEXT),
        ("Quote valid from", _date(record.get("valid_from")), DATE),
        ("Quote valid until", _date(record.get("valid_until")), DATE),
    ]


def _entry_rows(record: Mapping[str, Any]) -> list[Row]:
    book, flag = record.get("book") or {}, record.get("data_flag")
    pricing_type = record.get("pricing_type")
    return [
        ("Provider", record.get("provider"), TEXT),
        ("Region", record.get("region"), TEXT),
        ("Pricing type", PricingType(pricing_type).label if pricing_type in PricingType.values
         else pricing_type, TEXT),
        ("Instance type", record.get("instance_type") or "", TEXT),
        ("Price book", book.get("name"), TEXT),
        ("Price book date", _date(book.get("fetched_at")), DATE),
        ("Price book source", book.get("source"), TEXT),
        ("Price data flag",
         "(not in this snapshot: frozen before data flags)" if flag is None
         else flag.strip() or "none", WARNING if flag and flag.strip() else TEXT),
    ]  # fmt: skip


def summary_rows(context: dict[str, Any]) -> list[Row]:
    request, snapshot = context["request"], context["snapshot"]
    asked = snapshot["request"]  # the figures of the document the hash covers
    frozen = not context["is_preview"]
    return [
        ("Project", snapshot["project"]["name"], TEXT),
        ("Organisation", snapshot["project"]["organisation"], TEXT),
        ("Request", asked["title"], TEXT),
        ("State", request.get_state_display(), TEXT),
        *_warning_rows(context),
        ("Amount", Decimal(asked["amount"]), "money"),
        ("Contingency", Decimal(asked["contingency"]), "money"),
        ("Currency", asked["currency"], TEXT),
        ("Basis", BudgetRequest.Basis(asked["basis"]).label, TEXT),
        ("Justification", asked["justification"], TEXT),
        ("Approvals required", asked["approvals_required"], "count"),
        *price_rows(snapshot),
        ("Snapshot SHA-256",
         request.snapshot_sha256 if frozen else "(not frozen: a preview)", TEXT),
        ("Submission", snapshot.get("submission") if frozen else None, "count"),
        ("Frozen at", datetime.fromisoformat(snapshot["frozen_at"]) if frozen else None,
         DATETIME),
        ("Estimator version", snapshot.get("estimator_version"), TEXT),
        ("Monte Carlo seed", snapshot["montecarlo"]["seed"], "id"),
        ("Monte Carlo samples", snapshot["montecarlo"]["samples"], "count"),
        ("Times in", settings.TIME_ZONE, TEXT),
    ]  # fmt: skip


def memory_label(figures: Mapping[str, Any]) -> str:
    """The memory verdict of a run's or a lever's figures in words, as the pages give it."""
    return {code: label for code, label, _tone in MEMORY_VERDICTS}[result_memory_verdict(figures)]


COMPARISON_HEADER = (
    "Scenario", "Accelerator", "GPUs", "Currency", "Cost P10", "Cost P50", "Cost P90",
    "Days P10", "Days P50", "Days P90", "GPU-hours P50", "Cost per M tokens", "MFU",
    "Memory", "Bottleneck", "Chosen", "Deadline", "Chance in time",
)  # fmt: skip


def comparison_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for run, chosen in [(context["chosen"], True)] + [(a, False) for a in context["alternatives"]]:
        cost, days = run.get("cost") or {}, run.get("training_days") or {}
        deadline = run.get("deadline") or {}  # absent from snapshots frozen before it
        rows.append([
            run["scenario"], run["accelerator"], run["num_gpus"], run.get("currency"),
            *(Decimal(cost[k]) if k in cost else None for k in ("p10", "p50", "p90")),
            *(days.get(k) for k in ("p10", "p50", "p90")),
            Decimal((run.get("gpu_hours") or {}).get("p50", "0")),
            Decimal(run["cost_per_million_tokens"]) if run.get("cost_per_million_tokens") else None,
            run.get("mfu"), memory_label(run), run.get("bottleneck"), chosen,
            deadline.get("text"), deadline.get("probability"),
        ])  # fmt: skip
    return rows


WHOLE_RUN_HEADER = ("Scenario", "Run", "Part", "Days", "GPU-hours", "Share of total")


MARGINS_HEADER = (
    "Scenario", "Run", "Margin", "Share of margin-free step time", "Seconds per step",
    "Scaled with cluster size",
)  # fmt: skip


def _whole_run_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for details in context["run_details"]:
        run, table = details["run"], details["whole_run"]
        lines = [*table.rows, table.total] if table else []
        rows += [
            [run["scenario"], run["run"], line.label, line.days, line.gpu_hours, line.share]
            for line in lines
        ]
    return rows


def _margin_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            details["run"]["scenario"],
            details["run"]["run"],
            margin.name,
            margin.share,
            margin.seconds,
            margin.scale_note or "",
        ]
        for details in context["run_details"]
        for margin in details["margins"]
    ]


TRAINING_METHOD_HEADER = (
    "Scenario", "Run", "Method", "LoRA rank", "LoRA targets", "Frozen", "Optimizer",
    "CPU offload", "Trainable parameters", "Trainable share", "Host memory per node (GiB)",
)  # fmt: skip


def _method_rows(context: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for details, method in zip(context["run_details"], context["training_methods"], strict=True):
        run = details["run"]
        if method is None:
            rows.append([run["scenario"], run["run"], "(not in this snapshot)"])
            continue
        rows.append([
            run["scenario"], run["run"], method.name, method.rank, method.targets_text,
            method.frozen_text, method.optimizer_label, method.offload_label,
            method.trainable_count, method.trainable_share, method.host_memory_per_node_gib,
        ])  # fmt: skip
    return rows


def sections(context: dict[str, Any]) -> list[tuple[str, tuple[str, ...], list[list[Any]]]]:
    """The pack's tables after the summary: one sheet each in the XLSX, one block in the CSV;
    the training method's only where some run is not plain full training."""
    methods = (
        [("Training method", TRAINING_METHOD_HEADER, _method_rows(context))]
        if context["training_methods"]
        else []
    )
    return [
        ("Comparison", COMPARISON_HEADER, comparison_rows(context)),
        *methods,
        ("Whole run", WHOLE_RUN_HEADER, _whole_run_rows(context)),
        ("Step margins", MARGINS_HEADER, _margin_rows(context)),
        *([("Whole bill", BILL_HEADER, _bill_rows(context))] if context["bill"] else []),
        *([("Levers", LEVERS_HEADER, _lever_rows(context))] if context["levers"] else []),
        ("Timeline", TIMELINE_HEADER, _timeline_rows(context)),
    ]


BILL_HEADER = ("Line", "Quantity", "Unit", "Unit price", "Amount", "In total", "Formula")


def _bill_rows(context: dict[str, Any]) -> list[list[Any]]:
    bill = context["bill"] or {}
    rows: list[list[Any]] = [
        [
            line["label"],
            line["quantity"],
            line["unit"],
            None if line["unit_price"] is None else Decimal(line["unit_price"]),
            None if line["amount"] is None else Decimal(line["amount"]),
            line["in_total"],
            line["formula"],
        ]
        for line in bill.get("lines", [])
    ]
    if bill:
        label = bill.get("total_label") or "Total of priced lines"
        rows.append([label, None, "", None, Decimal(bill["total"]), True, ""])
    return rows


LEVERS_HEADER = (
    "Change", "Memory", "Days", "GPU-hours", "Cost", "Cost saved", "Why",
)  # fmt: skip


def _lever_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            lever["change"],
            memory_label(lever),
            lever["training_days"],
            Decimal(str(lever["gpu_hours"])),
            Decimal(lever["cost"]),
            Decimal(lever["cost_saved"]),
            lever["reason"],
        ]
        for lever in context["levers"]
    ]


TIMELINE_HEADER = ("When", "Who", "Action", "From", "To", "Comment")


def _timeline_rows(context: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            event.created_at,
            event.actor.get_username() if event.actor else "",
            event.action,
            event.from_state,
            event.to_state,
            event.comment,
        ]
        for event in context["timeline"]
    ]
