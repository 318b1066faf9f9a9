"""Budget figures of one estimation run (pure Python: no database).

Money is ``Decimal`` in the price's own currency, rounded to the cent only when shown; the
Monte Carlo's percentiles are floats of GPU-hours that are priced here. Formulas:

* cost = GPU-hours x price per GPU-hour (the price covers every GPU of the cluster for the
  whole wall-clock time, failures and restarts included, as a reserved or rented cluster is
  billed);
* cost per million tokens = P50 cost / training tokens x 1e6;
* energy = GPU-hours x board power (TDP) x PUE [kWh] (an upper bound: GPUs rarely draw their
  full TDP for a whole run);
* contingency = P90 cost - P50 cost, and the budget to request = P50 + contingency;
* a committed price (a reserved or committed price-book entry, a vendor quote for a term) is
  paid for its whole term whether or not the run needs it: every cost is then at least the
  ``minimum_spend``, and ``committed`` says so;
* of a commitment (:func:`commitment_use`): committed GPU-hours = accelerators x months x
  730 h; used share = the run's P50 GPU-hours / committed GPU-hours (at most 1); idle share
  = 1 - used share; cost per used GPU-hour = P50 cost / P50 GPU-hours. A run that alone uses
  a share of a commitment owes all of it unless other work uses the rest: 64 of a quote's
  256 H100 for about 4 of its 12 months use about 8 % of it, and the run costs the whole
  4,709,376 USD, about 25 USD per GPU-hour it uses, not the quote's 2.10 USD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from estimator.core import costing
from pricing.services.quotes import HOURS_PER_MONTH

CENT = Decimal("0.01")
PERCENTILES = ("p10", "p50", "p90")


def money(value: Decimal) -> Decimal:
    """Round to the cent, half up (how invoices round)."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _decimal(value: float) -> Decimal:
    # repr() keeps every digit a float holds, so the result does not depend on str() rounding
    return Decimal(repr(float(value)))


def commitment_minimum(
    price_per_gpu_hour: Decimal, accelerators: int, term_months: int | None
) -> Decimal | None:
    """What a committed price costs however short the run: every accelerator it commits for
    its whole term, ``price x accelerators x months x 730 h``; None without a term."""
    if not term_months:
        return None
    return (price_per_gpu_hour * accelerators * term_months * HOURS_PER_MONTH).quantize(CENT)


def cost_of(
    gpu_hours: float | Decimal, price_per_gpu_hour: Decimal, minimum_spend: Decimal | None
) -> Decimal:
    """``gpu_hours x price`` (the core's rule, :func:`estimator.core.costing.cost_of`) in
    Decimal, rounded to the cent, never less than ``minimum_spend``: what a run costs, and
    what the capacity planner charges an option (the same function)."""
    hours = gpu_hours if isinstance(gpu_hours, Decimal) else _decimal(gpu_hours)
    floor = money(minimum_spend) if minimum_spend is not None else Decimal(0)
    return max(money(costing.cost_of(hours, price_per_gpu_hour)), floor)


def commitment_use(
    *,
    minimum_spend: Decimal,
    accelerators: int,
    term_months: int,
    gpu_hours: Decimal,
    cost: Decimal,
) -> dict[str, Any]:
    """How much of a commitment a run uses, JSON-ready (amounts as decimal strings).

    Parameters
    ----------
    minimum_spend : Decimal
        What the commitment costs for its whole term. [currency]
    accelerators : int
        Accelerators committed. [1]
    term_months : int
        The term. [month]
    gpu_hours : Decimal
        The run's (P50) accelerator-hours. [GPU-hour]
    cost : Decimal
        The run's (P50) cost, the minimum spend or more. [currency]
    """
    committed = Decimal(accelerators) * term_months * HOURS_PER_MONTH
    used = min(gpu_hours / committed, Decimal(1)) if committed else Decimal(1)
    per_used = cost / gpu_hours if gpu_hours else None
    return {
        "minimum_spend": str(money(minimum_spend)),
        "accelerators": accelerators,
        "term_months": term_months,
        "committed_gpu_hours": str(committed.quantize(Decimal(1))),
        "used_gpu_hours": str(gpu_hours.quantize(Decimal(1))),
        "used_share": float(used),
        "idle_share": float(1 - used),
        "cost_per_used_gpu_hour": None if per_used is None else str(per_used.quantize(CENT)),
        # The run alone costs less than the commitment: the minimum spend sets its cost.
        "binds": cost == money(minimum_spend),
    }


@dataclass(frozen=True)
class BudgetFigures:
    """What a run costs, in ``currency``; every amount rounded to the cent."""

    currency: str
    price_per_gpu_hour: Decimal
    gpu_hours: dict[str, Decimal]
    training_days: dict[str, float]
    cost: dict[str, Decimal]
    cost_per_million_tokens: Decimal
    energy_kwh: Decimal
    contingency: Decimal
    requested: Decimal
    minimum_spend: Decimal | None = None
    commitment: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready: amounts as decimal strings, so nothing is lost to binary floats."""
        return {
            "currency": self.currency,
            "price_per_gpu_hour": str(self.price_per_gpu_hour),
            "gpu_hours": {k: str(v) for k, v in self.gpu_hours.items()},
            "training_days": dict(self.training_days),
            "cost": {k: str(v) for k, v in self.cost.items()},
            "cost_per_million_tokens": str(self.cost_per_million_tokens),
            "energy_kwh": str(self.energy_kwh),
            "contingency": str(self.contingency),
            "requested": str(self.requested),
            "minimum_spend": None if self.minimum_spend is None else str(self.minimum_spend),
            # The percentiles the commitment sets (the run alone would cost less).
            "minimum_spend_binds": [
                key for key, value in self.cost.items() if value == self.minimum_spend
            ],
            "commitment": self.commitment,
        }


def budget_figures(
    *,
    estimate: Mapping[str, Any],
    montecarlo: Mapping[str, Any],
    price_per_gpu_hour: Decimal,
    currency: str,
    tokens: float,
    tdp_w: float,
    pue: Decimal,
    minimum_spend: Decimal | None = None,
    committed: tuple[int, int] | None = None,
) -> BudgetFigures:
    """Price a run's GPU-hours: deterministic, P10, P50 and P90.

    Parameters
    ----------
    estimate : mapping
        The estimator's output (``gpu_hours``, ``training_days``).
    montecarlo : mapping
        The Monte Carlo's output (``gpu_hours`` and ``training_days`` with p10/p50/p90).
    price_per_gpu_hour : Decimal
        Price of one accelerator-hour. [currency / GPU-hour]
    tokens : float
        Tokens trained. [tokens]
    tdp_w : float
        Board power of one accelerator, 0 when unknown. [W]
    pue : Decimal
        Power usage effectiveness of the data centre. [-]
    minimum_spend : Decimal, optional
        What a committed price costs for its whole term, paid however short the run. [currency]
    committed : (int, int), optional
        The accelerators and months of that commitment, for :func:`commitment_use`.
    """
    hours = {"deterministic": _decimal(estimate["gpu_hours"])}
    hours.update({p: _decimal(montecarlo["gpu_hours"][p]) for p in PERCENTILES})
    days = {"deterministic": float(estimate["training_days"])}
    days.update({p: float(montecarlo["training_days"][p]) for p in PERCENTILES})
    floor = money(minimum_spend) if minimum_spend is not None else Decimal(0)
    cost = {key: cost_of(value, price_per_gpu_hour, minimum_spend) for key, value in hours.items()}
    per_million = cost["p50"] / _decimal(tokens) * Decimal(1_000_000)
    energy = hours["p50"] * _decimal(tdp_w) / Decimal(1000) * pue
    contingency = cost["p90"] - cost["p50"]
    use = None
    if minimum_spend is not None and committed is not None:
        accelerators, months = committed
        use = commitment_use(
            minimum_spend=floor,
            accelerators=accelerators,
            term_months=months,
            gpu_hours=hours["p50"],
            cost=cost["p50"],
        )
    return BudgetFigures(
        currency=currency,
        price_per_gpu_hour=price_per_gpu_hour,
        gpu_hours={key: value.quantize(Decimal(1)) for key, value in hours.items()},
        training_days=days,
        cost=cost,
        cost_per_million_tokens=money(per_million),
        energy_kwh=energy.quantize(Decimal(1)),
        contingency=contingency,
        requested=cost["p50"] + contingency,
        minimum_spend=None if minimum_spend is None else floor,
        commitment=use,
    )
