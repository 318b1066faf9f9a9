"""How a committed price is shown: as a commitment, never as a cheap hourly price.

A committed price (a vendor quote for a term, a reserved price-book entry) is owed in full
for its term, however little of it a run uses. Its hourly figure (the demo quote's 2.10
USD/GPU-h) holds only when every committed GPU-hour is used, so every page that shows a
committed price shows the minimum spend, the term, the committed GPU-hours, the share the
run uses and the idle share, and the cost per GPU-hour the run actually uses
(:func:`planner.scenarios.budget_figures.commitment_use` computes them). The run page, the
compare rows, the budget page and the sign-off pack call these; the figures travel in the
run's budget (``budget["commitment"]``), so the API carries them too.

The honest reading of a small run on a large commitment (64 of a quote's 256 H100): if this
run is the commitment's only use, the whole minimum spend is its cost, and the idle share
says how much of it is paid for nothing. It is not priced at the hourly rate, which would
hide the rest of the bill.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from lib.money import grouped, money_text, price_per_hour_text
from planner.scenarios.bill import DAYS_PER_MONTH


def _share(value: float) -> str:
    return f"{grouped(Decimal(repr(value * 100)), 1)} %"


def _length(budget: Mapping[str, Any] | None, term_months: int) -> str:
    """`` The run takes 130 days (4.3 months) of the 12-month term.``; ``""`` unknown."""
    days = ((budget or {}).get("training_days") or {}).get("p50")
    if days is None:
        return ""
    months = float(days) / DAYS_PER_MONTH
    return (
        f" The run takes {grouped(Decimal(repr(float(days))), 0)} days "
        f"({grouped(Decimal(repr(months)), 1)} months) of the {term_months}-month term."
    )


def commitment_of(price: Mapping[str, Any], budget: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's commitment figures; for a run stored before they were kept, what its price
    snapshot says (the minimum spend and its terms); ``{}`` for an uncommitted price."""
    found = (budget or {}).get("commitment")
    if found:
        return dict(found)
    if price.get("minimum_spend"):
        return {"minimum_spend": price["minimum_spend"], "term_months": price.get("term_months")}
    return {}


def commitment_short(
    price: Mapping[str, Any], budget: Mapping[str, Any] | None, device: str = "GPU"
) -> str:
    """One line for a table row: ``4,709,376 USD commitment, 12 months · 8.3 % used, 91.7 %
    idle · 25.31 USD per used GPU-h``; ``""`` for an uncommitted price."""
    use, currency = commitment_of(price, budget), str(price.get("currency", ""))
    if not use:
        return ""
    term = f", {use['term_months']} months" if use.get("term_months") else ""
    text = f"{money_text(Decimal(use['minimum_spend']), currency)} commitment{term}"
    if "used_share" not in use:
        return text
    text += f" · {_share(use['used_share'])} used, {_share(use['idle_share'])} idle"
    if use.get("cost_per_used_gpu_hour"):
        per_used = Decimal(use["cost_per_used_gpu_hour"])
        text += f" · {price_per_hour_text(per_used, currency, f'used {device}')}"
    return text


def commitment_sentences(
    price: Mapping[str, Any], budget: Mapping[str, Any] | None, device: str = "GPU"
) -> list[str]:
    """What the commitment means for this run, in sentences, for the run and budget pages
    and the sign-off pack; ``[]`` for an uncommitted price."""
    use, currency = commitment_of(price, budget), str(price.get("currency", ""))
    if not use:
        return []
    spend = money_text(Decimal(use["minimum_spend"]), currency)
    rate = price_per_hour_text(Decimal(price["price_per_gpu_hour"]), currency, device)
    if "used_share" not in use:
        return [f"Committed: at least {spend} ({price.get('commitment', '')}), owed in full."]
    hours = f"{grouped(Decimal(use['committed_gpu_hours']), 0)} {device}-hours"
    used = f"{grouped(Decimal(use['used_gpu_hours']), 0)} {device}-hours"
    sentences = [
        f"Commitment: {spend} minimum spend for {use['accelerators']:,} {device}s x "
        f"{use['term_months']} months ({hours}), owed whether or not they are used."
        + _length(budget, use["term_months"]),
        f"This run uses {used} (P50), {_share(use['used_share'])} of it; "
        f"{_share(use['idle_share'])} is idle unless other work uses it.",
    ]
    if use.get("cost_per_used_gpu_hour"):
        per_used = price_per_hour_text(Decimal(use["cost_per_used_gpu_hour"]), currency, device)
        sentences.append(
            f"Cost per {device}-hour used: {per_used}; the quoted {rate} holds only if every "
            "committed hour is used."
        )
    if use.get("binds"):
        sentences.append(
            f"If this run is the commitment's only use, the whole {spend} is its cost."
        )
    return sentences
