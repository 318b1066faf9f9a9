"""On-prem total cost of ownership: the price of one GPU-hour in your own data centre.

Pure Python, no Django: every figure is a :class:`~decimal.Decimal` (money, rates and
shares alike, so the price of a GPU-hour is exact to the inputs and never a binary float);
nothing is rounded here, callers round for display. Shares are given in percent. Money
is in the profile's currency, whatever it is.

The model (per GPU, per year, then divided by the hours the GPU does paid work):

- capital: the server price per GPU grossed up for the cluster network
  (``server_price / gpus_per_server / (1 - network_share)``), annualised with the capital
  recovery factor ``CRF = r (1 + r)^N / ((1 + r)^N - 1)`` (an annuity: equal yearly payments
  that repay the investment with interest ``r`` over ``N`` years);
- power: ``TDP x server overhead x average load x PUE x 8,760 h x electricity price``;
- colocation: the provisioned power ``TDP x server overhead`` at the price per kW-month;
- operations: a share of the capital investment per year.

The price per GPU-hour is the yearly total over ``8,760 h x utilisation``.

References
----------
Public estimates collected in ``/work/shared/reference/README.md`` (Epoch AI and others):
server price ~1.64 x GPU price, networking ~19 % of cluster cost, 4-5 year life, server
power overhead ~1.8 x TDP, PUE 1.1-1.25. Its worked example (8 x H100 node at $270,000,
4 years at 8 %, 80 % utilisation -> about $2.65 per GPU-hour) is a test of this module.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal

from pricing.errors import PricingError

HOURS_PER_YEAR = Decimal(8760)
MONTHS_PER_YEAR = Decimal(12)
WATTS_PER_KILOWATT = Decimal(1000)
PERCENT = Decimal(100)


@dataclass(frozen=True)
class OnPremInputs:
    """What an on-prem cluster costs, per server and per GPU.

    Attributes
    ----------
    server_price : Decimal
        Price of one server with its GPUs. [currency]
    gpus_per_server : int
        GPUs in one server. [-]
    network_share_percent : Decimal
        Cluster networking as a share of the total cluster cost. [%]
    depreciation_years : int
        Years over which the hardware is paid off. [year]
    cost_of_capital_percent : Decimal
        Yearly interest on the capital. [%]
    power_per_gpu_w : Decimal
        Board power (TDP) of one GPU. [W]
    server_power_overhead : Decimal
        Server power per GPU as a multiple of the GPU's TDP (CPUs, memory, fans, NICs). [-]
    average_load_percent : Decimal
        Average power draw as a share of the provisioned power. [%]
    pue : Decimal
        Power usage effectiveness of the data centre. [-]
    electricity_price_per_kwh : Decimal
        [currency/kWh]
    colocation_price_per_kw_month : Decimal
        Price of provisioned power in a colocation facility. [currency/(kW month)]
    operations_share_percent : Decimal
        Yearly operations (staff, spares, support) as a share of the capital. [%]
    utilisation_percent : Decimal
        Share of the hours a GPU does paid work. [%]
    """

    server_price: Decimal
    gpus_per_server: int
    network_share_percent: Decimal
    depreciation_years: int
    cost_of_capital_percent: Decimal
    power_per_gpu_w: Decimal
    server_power_overhead: Decimal
    average_load_percent: Decimal
    pue: Decimal
    electricity_price_per_kwh: Decimal
    colocation_price_per_kw_month: Decimal
    operations_share_percent: Decimal
    utilisation_percent: Decimal


INPUT_FIELDS = tuple(field.name for field in fields(OnPremInputs))


@dataclass(frozen=True)
class OnPremCost:
    """The cost of one GPU: per year, per GPU-hour of paid work, and its breakdown.

    Money in the currency of the inputs; per-year figures [currency/year], per-hour figures
    [currency/GPU-hour].
    """

    capital_per_gpu: Decimal
    capital_recovery_factor: Decimal
    capital_per_gpu_year: Decimal
    power_per_gpu_year: Decimal
    colocation_per_gpu_year: Decimal
    operations_per_gpu_year: Decimal
    total_per_gpu_year: Decimal
    paid_hours_per_year: Decimal
    capital_per_gpu_hour: Decimal
    power_per_gpu_hour: Decimal
    colocation_per_gpu_hour: Decimal
    operations_per_gpu_hour: Decimal
    price_per_gpu_hour: Decimal


def capital_recovery_factor(rate: Decimal, years: int) -> Decimal:
    """Share of an investment to pay each year to repay it with interest.

    Parameters
    ----------
    rate : Decimal
        Interest per year as a fraction (0.08 for 8 %). [1/year]
    years : int
        Repayment period. [year]

    Returns
    -------
    Decimal
        ``r (1 + r)^N / ((1 + r)^N - 1)``; ``1 / N`` when ``r`` is 0. [1/year]
    """
    if rate == 0:
        return Decimal(1) / Decimal(years)
    growth = (1 + rate) ** years
    return rate * growth / (growth - 1)


def capital_per_gpu(server_price: Decimal, gpus_per_server: int, network_share: Decimal) -> Decimal:
    """Investment per GPU with its share of the network. [currency]

    ``network_share`` is the network's fraction of the *total* cluster cost, so the servers
    are ``1 - network_share`` of it.
    """
    return server_price / gpus_per_server / (1 - network_share)


def provisioned_kw_per_gpu(power_per_gpu_w: Decimal, server_power_overhead: Decimal) -> Decimal:
    """Power provisioned for one GPU and its share of the server. [kW]"""
    return power_per_gpu_w * server_power_overhead / WATTS_PER_KILOWATT


def power_cost_per_gpu_year(inputs: OnPremInputs) -> Decimal:
    """Electricity for one GPU over a year, cooling included through the PUE. [currency/year]"""
    kilowatts = provisioned_kw_per_gpu(inputs.power_per_gpu_w, inputs.server_power_overhead)
    average_kilowatts = kilowatts * inputs.average_load_percent / PERCENT * inputs.pue
    return average_kilowatts * HOURS_PER_YEAR * inputs.electricity_price_per_kwh


def colocation_cost_per_gpu_year(inputs: OnPremInputs) -> Decimal:
    """Colocation rent for the provisioned power of one GPU over a year. [currency/year]"""
    kilowatts = provisioned_kw_per_gpu(inputs.power_per_gpu_w, inputs.server_power_overhead)
    return kilowatts * inputs.colocation_price_per_kw_month * MONTHS_PER_YEAR


def onprem_inputs_check(inputs: OnPremInputs) -> None:
    """Raise :class:`PricingError` naming the first input outside its range."""
    for name, low, high, reason in _RANGES:
        value = getattr(inputs, name)
        if value is None:
            raise PricingError("is required", field=name)
        if value < low or (high is not None and value > high):
            raise PricingError(f"{reason}, got {value}", field=name)


# (field, lowest, highest or None, reason): ranges outside which the model means nothing.
_RANGES: tuple[tuple[str, Decimal, Decimal | None, str], ...] = (
    ("server_price", Decimal("0.01"), None, "must be positive"),
    ("gpus_per_server", Decimal(1), None, "must be at least 1"),
    ("network_share_percent", Decimal(0), Decimal("99.99"), "must be from 0 to below 100 %"),
    ("depreciation_years", Decimal(1), Decimal(50), "must be from 1 to 50 years"),
    ("cost_of_capital_percent", Decimal(0), PERCENT, "must be from 0 to 100 %"),
    ("power_per_gpu_w", Decimal(0), None, "must not be negative"),
    ("server_power_overhead", Decimal(1), None, "must be at least 1 (a multiple of the TDP)"),
    ("average_load_percent", Decimal(0), PERCENT, "must be from 0 to 100 %"),
    ("pue", Decimal(1), None, "must be at least 1"),
    ("electricity_price_per_kwh", Decimal(0), None, "must not be negative"),
    ("colocation_price_per_kw_month", Decimal(0), None, "must not be negative"),
    ("operations_share_percent", Decimal(0), PERCENT, "must be from 0 to 100 %"),
    ("utilisation_percent", Decimal("0.01"), PERCENT, "must be above 0 and at most 100 %"),
)


def onprem_cost(inputs: OnPremInputs) -> OnPremCost:
    """Price per GPU-hour of an on-prem cluster, with its breakdown.

    Raises
    ------
    PricingError
        When an input is out of range; ``field`` names it.
    """
    onprem_inputs_check(inputs)
    capital = capital_per_gpu(
        inputs.server_price, inputs.gpus_per_server, inputs.network_share_percent / PERCENT
    )
    crf = capital_recovery_factor(
        inputs.cost_of_capital_percent / PERCENT, inputs.depreciation_years
    )
    yearly = {
        "capital": capital * crf,
        "power": power_cost_per_gpu_year(inputs),
        "colocation": colocation_cost_per_gpu_year(inputs),
        "operations": capital * inputs.operations_share_percent / PERCENT,
    }
    paid_hours = HOURS_PER_YEAR * inputs.utilisation_percent / PERCENT
    hourly = {part: amount / paid_hours for part, amount in yearly.items()}
    return OnPremCost(
        capital_per_gpu=capital,
        capital_recovery_factor=crf,
        capital_per_gpu_year=yearly["capital"],
        power_per_gpu_year=yearly["power"],
        colocation_per_gpu_year=yearly["colocation"],
        operations_per_gpu_year=yearly["operations"],
        total_per_gpu_year=sum(yearly.values(), Decimal(0)),
        paid_hours_per_year=paid_hours,
        capital_per_gpu_hour=hourly["capital"],
        power_per_gpu_hour=hourly["power"],
        colocation_per_gpu_hour=hourly["colocation"],
        operations_per_gpu_hour=hourly["operations"],
        # The sum of the parts, so the breakdown always adds up to the price.
        price_per_gpu_hour=sum(hourly.values(), Decimal(0)),
    )
