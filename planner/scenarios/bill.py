"""The whole bill of a run: what it costs besides accelerator-hours (pure Python: no database).

Each line has a quantity, a unit price, an amount rounded half up to the cent
(:func:`planner.scenarios.budget_figures.money`) and its formula written out with the figures:

* **checkpoint storage** = checkpoint size x checkpoints kept x months stored x price per
  GB-month, where the months stored are the run's length (P50 training days / (730 h / 24 h),
  the month the quotes bill) plus the retention period after it (3 months unless stated):
  checkpoints are written from the first day and kept after the last. The checkpoint holds
  the weights of every saved parameter and the optimizer state of every trained one, at the
  bytes per parameter of the memory model
  (:func:`estimator.core.memory.bytes_per_parameter` for the run's precision, optimizer,
  method and master copy): 2 B of 16-bit weights + 12 B of fp32 master copy and Adam
  moments = 14 B a parameter for mixed-precision AdamW, the size the whole-run model
  writes (:data:`estimator.core.goodput.CHECKPOINT_BYTES_PER_PARAMETER`). LoRA saves its
  adapters only (the frozen base is read back from the original model);
* **data-set storage** = tokens x bytes per token x months stored x price per GB-month (the
  same months: the data set is read throughout the run);
* **egress of the final weights** = saved parameters x 2 B (a 16-bit export) x price per GB;
* **energy** = energy [kWh] x tariff, where an on-prem profile gives a tariff. The price of
  an on-prem GPU-hour already holds its power (:mod:`pricing.tco`), and a cloud price pays
  for its own, so the line is shown but left out of the total unless the accelerator price
  is said to exclude power (``energy_in_price=False``);
* **carbon** = energy [kWh] x grid intensity [gCO2e/kWh] / 10^6, in tCO2e: a quantity, no
  amount.

A GB is what the clouds bill as one, 2^30 bytes (AWS's GB-month examples, Google Cloud's
GiB; Azure is taken to bill alike). A line whose price the book lacks keeps its quantity
and has no amount, with a note saying "no price" and whose price is missing. The total is the
sum of the priced lines that count towards it, and its label says which lines it leaves out
("Total of priced lines; storage and egress have no price from Example Compute Ltd").

:func:`input_pipeline` sizes what the input pipeline must deliver to one node: the tokens
per second its accelerators train on and the read bandwidth that takes, with a warning
where a stated storage or CPU figure falls short.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from estimator.core import memory
from estimator.core.constants import HALF_PRECISION_BYTES
from planner.common.errors import PlannerError
from planner.scenarios.budget_figures import HOURS_PER_MONTH, money

#: Bytes the clouds bill as one GB (AWS, Google Cloud and Azure count 2^30). [B]
BILLED_GB_BYTES = 2**30
#: Checkpoints kept once the run is over (the last few, to resume or compare). [1]
DEFAULT_CHECKPOINTS_KEPT = 5
#: Months the checkpoints and the data set stay stored once the run is over. [month]
DEFAULT_RETENTION_MONTHS = 3.0
#: Days in a billed month: 730 h / 24 h, the month the quotes and commitments count. [d]
DAYS_PER_MONTH = float(HOURS_PER_MONTH) / 24.0
#: Bytes a token takes in storage: ~4 characters of UTF-8 text per token for English BPE
#: tokenizers (OpenAI's rule of thumb), and as much as a pre-tokenized uint32 id. [B]
DEFAULT_BYTES_PER_TOKEN = 4.0
#: Bytes per parameter of the final weights shipped out: a 16-bit (bf16) export. [B]
EXPORT_BYTES_PER_PARAMETER = HALF_PRECISION_BYTES
#: Grams in a tonne, for gCO2e -> tCO2e. [g/t]
GRAMS_PER_TONNE = 1_000_000.0
BITS_PER_BYTE = 8.0

#: The lines priced from the price book's usage prices, and the price each needs.
BOOK_PRICED = {"checkpoint_storage": "storage", "dataset_storage": "storage", "egress": "egress"}

_GB = Decimal(BILLED_GB_BYTES)


def _count(value: float) -> str:
    """A large count as people write it: 8.03e9, 2e12, 1.2e6, 125."""
    return f"{value:.4g}".replace("e+0", "e").replace("e+", "e")


def _decimal(value: float) -> Decimal:
    # repr() keeps every digit a float holds (as planner.scenarios.budget_figures does)
    return Decimal(repr(float(value)))


@dataclass(frozen=True)
class BillLine:
    """One line of the bill.

    ``quantity`` in ``unit`` (GB-month, GB, kWh, tCO2e; None when it cannot be known),
    ``unit_price`` per unit in the bill's currency (None: no price), ``amount`` rounded to
    the cent (None without a price, and for a quantity-only line), ``in_total`` whether the
    amount counts towards the total.
    """

    key: str
    label: str
    quantity: float | None
    unit: str
    unit_price: Decimal | None
    amount: Decimal | None
    formula: str
    note: str = ""
    in_total: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "quantity": self.quantity,
            "unit": self.unit,
            "unit_price": None if self.unit_price is None else str(self.unit_price),
            "amount": None if self.amount is None else str(self.amount),
            "formula": self.formula,
            "note": self.note,
            "in_total": self.in_total,
        }


@dataclass(frozen=True)
class CheckpointSize:
    """What one checkpoint holds: the weights of ``saved_parameters`` and the optimizer
    state of ``trained_parameters``."""

    saved_parameters: float
    trained_parameters: float
    weight_bytes: float
    state_bytes: float

    @property
    def bytes(self) -> float:
        """[B]"""
        return (
            self.saved_parameters * self.weight_bytes + self.trained_parameters * self.state_bytes
        )

    def describe(self) -> str:
        weights = f"{_count(self.saved_parameters)} parameters x {self.weight_bytes:g} B of weights"
        if self.saved_parameters == self.trained_parameters:
            per = self.weight_bytes + self.state_bytes
            return (
                f"{_count(self.saved_parameters)} parameters x {per:g} B "
                f"({self.weight_bytes:g} B weights + {self.state_bytes:g} B optimizer state)"
            )
        return (
            f"{weights} + {_count(self.trained_parameters)} trained x {self.state_bytes:g} B of "
            "optimizer state"
        )


@dataclass(frozen=True)
class WholeBill:
    """The lines of the bill beyond accelerator-hours, in ``currency``."""

    currency: str
    lines: tuple[BillLine, ...]
    total: Decimal
    checkpoint: CheckpointSize
    assumptions: dict[str, Any]
    priced_by: str = "the price book"

    def line(self, key: str) -> BillLine:
        """The line of ``key``; KeyError for a key the bill has no line of."""
        for line in self.lines:
            if line.key == key:
                return line
        raise KeyError(key)

    @property
    def unpriced(self) -> list[str]:
        """Keys of the lines priced from the book that it has no price for."""
        return [line.key for line in self.lines if line.key in BOOK_PRICED and line.amount is None]

    @property
    def total_label(self) -> str:
        """What the total is, and what it leaves out for want of a price."""
        missing = list(dict.fromkeys(BOOK_PRICED[key] for key in self.unpriced))
        if not missing:
            return "Total of priced lines"
        what = " and ".join(missing)
        verb = "have" if len(missing) > 1 else "has"
        return f"Total of priced lines; {what} {verb} no price from {self.priced_by}"

    def as_json(self) -> dict[str, Any]:
        """JSON-ready: amounts and prices as decimal strings, quantities as floats."""
        return {
            "currency": self.currency,
            "lines": [line.as_json() for line in self.lines],
            "total": str(self.total),
            "total_label": self.total_label,
            "unpriced": self.unpriced,
            "priced_by": self.priced_by,
            "checkpoint_bytes": self.checkpoint.bytes,
            "assumptions": dict(self.assumptions),
        }


def checkpoint_size(estimate: Mapping[str, Any]) -> CheckpointSize:
    """The size of one checkpoint of the estimated run, from the memory model's bytes per
    parameter for its precision, optimizer, training method and master copy.

    Reads ``parameters``, ``training_method`` (``type``, ``optimizer``, ``master_weights``,
    ``trainable_parameters``) and ``mfu_peak.precision`` of the estimator's output; a run
    stored without them counts as full mixed-precision bf16 training with AdamW.
    """
    parameters = float(estimate["parameters"])
    method = estimate.get("training_method") or {}
    adapters = method.get("type", "full") != "full"
    trained = float(method.get("trainable_parameters", parameters))
    precision = (estimate.get("mfu_peak") or {}).get("precision", "bf16")
    weights, _gradients, state = memory.bytes_per_parameter(
        precision,
        method.get("optimizer", "adamw"),
        adapters=adapters,
        master_weights=bool(method.get("master_weights", True)),
    )
    return CheckpointSize(
        saved_parameters=trained if adapters else parameters,
        trained_parameters=trained,
        weight_bytes=weights,
        state_bytes=state,
    )


def _priced(
    key: str,
    label: str,
    quantity: Decimal,
    unit: str,
    price: Decimal | None,
    currency: str,
    formula: str,
    missing: str,
) -> BillLine:
    if price is None:
        return BillLine(key, label, float(quantity), unit, None, None, formula, note=missing)
    amount = money(quantity * price)
    shown = format(price.normalize(), "f")  # 0.0200000000 as 0.02
    formula = f"{formula} x {shown} {currency}/{unit} = {amount:,} {currency}"
    return BillLine(key, label, float(quantity), unit, price, amount, formula)


def whole_bill(
    *,
    estimate: Mapping[str, Any],
    tokens: float,
    storage_price_per_gb_month: Decimal | None,
    egress_price_per_gb: Decimal | None,
    energy_tariff_per_kwh: Decimal | None,
    energy_kwh: Decimal,
    currency: str,
    checkpoints_kept: int = DEFAULT_CHECKPOINTS_KEPT,
    run_days: float = 0.0,
    retention_months: float = DEFAULT_RETENTION_MONTHS,
    dataset_bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN,
    carbon_gco2e_per_kwh: float | None = None,
    energy_in_price: bool = True,
    priced_by: str = "the price book",
) -> WholeBill:
    """The bill's lines beyond accelerator-hours: checkpoint and data-set storage, egress
    of the final weights, energy and carbon.

    Parameters
    ----------
    estimate : mapping
        The estimator's output (``parameters``, ``training_method``, ``mfu_peak``).
    tokens : float
        Tokens of the data set stored (the training tokens, unless it is repeated). [tokens]
    storage_price_per_gb_month : Decimal or None
        From the price book's storage price. [currency/(GB month)]
    egress_price_per_gb : Decimal or None
        From the price book's egress price. [currency/GB]
    energy_tariff_per_kwh : Decimal or None
        An on-prem profile's electricity price. [currency/kWh]
    energy_kwh : Decimal
        The run's energy (``BudgetFigures.energy_kwh``). [kWh]
    checkpoints_kept : int
        Checkpoints stored after the run. [1]
    run_days : float
        How long the run lasts (its P50 training days): the checkpoints and the data set are
        stored from its start. [d]
    retention_months : float
        How long they stay stored once it is over. [month]
    dataset_bytes_per_token : float
        Storage a token of the data set takes. [B]
    carbon_gco2e_per_kwh : float, optional
        Grid carbon intensity; without it the carbon line has no quantity. [gCO2e/kWh]
    energy_in_price : bool
        Whether the accelerator price already pays for the power (an on-prem profile's price
        per GPU-hour does, a cloud price does): then the energy line is shown but not added
        to the total.
    priced_by : str
        Who gives the storage and egress prices (the provider, the vendor): a missing one is
        said to be missing from them.
    """
    if checkpoints_kept < 0:
        raise PlannerError("must not be negative", field="checkpoints_kept")
    if run_days < 0:
        raise PlannerError("must not be negative", field="run_days")
    if retention_months < 0:
        raise PlannerError("must not be negative", field="retention_months")
    if dataset_bytes_per_token <= 0:
        raise PlannerError("must be positive", field="dataset_bytes_per_token")
    if tokens < 0:
        raise PlannerError("must not be negative", field="tokens")
    checkpoint = checkpoint_size(estimate)
    stored = _Stored(run_days / DAYS_PER_MONTH, retention_months)
    lines = [
        _checkpoint_line(
            checkpoint, checkpoints_kept, stored, storage_price_per_gb_month, currency, priced_by
        ),
        _dataset_line(
            tokens, dataset_bytes_per_token, stored, storage_price_per_gb_month, currency, priced_by
        ),
        _egress_line(checkpoint.saved_parameters, egress_price_per_gb, currency, priced_by),
        _energy_line(energy_kwh, energy_tariff_per_kwh, currency, energy_in_price),
        _carbon_line(energy_kwh, carbon_gco2e_per_kwh),
    ]
    total = sum(
        (line.amount for line in lines if line.amount is not None and line.in_total), Decimal(0)
    )
    return WholeBill(
        currency=currency,
        lines=tuple(lines),
        total=money(total),
        checkpoint=checkpoint,
        priced_by=priced_by,
        assumptions={
            "checkpoints_kept": checkpoints_kept,
            "run_days": run_days,
            "retention_months": retention_months,
            "months_stored": float(stored.months),
            "dataset_bytes_per_token": dataset_bytes_per_token,
            "export_bytes_per_parameter": EXPORT_BYTES_PER_PARAMETER,
            "billed_gb_bytes": BILLED_GB_BYTES,
            "carbon_gco2e_per_kwh": carbon_gco2e_per_kwh,
            "energy_in_price": energy_in_price,
        },
    )


@dataclass(frozen=True)
class _Stored:
    """How long storage is paid for: the run's months and the retention after it."""

    run_months: float
    retention_months: float

    @property
    def months(self) -> Decimal:
        return _decimal(self.run_months + self.retention_months)

    def describe(self) -> str:
        if not self.run_months:
            return f"{self.retention_months:g} months"
        return (
            f"{float(self.months):,.2f} months ({self.run_months:,.2f} of the run + "
            f"{self.retention_months:g} kept after)"
        )


def _missing(kind: str, priced_by: str) -> str:
    return f"no price: {priced_by} gives no {kind} price"


def _checkpoint_line(
    checkpoint: CheckpointSize,
    kept: int,
    stored: _Stored,
    price: Decimal | None,
    currency: str,
    priced_by: str,
) -> BillLine:
    size_gb = _decimal(checkpoint.bytes) / _GB
    quantity = size_gb * kept * stored.months
    formula = (
        f"{checkpoint.describe()} = {float(size_gb):,.2f} GB a checkpoint x {kept} kept x "
        f"{stored.describe()} = {float(quantity):,.2f} GB-months"
    )
    return _priced(
        "checkpoint_storage",
        "Checkpoint storage",
        quantity,
        "GB-month",
        price,
        currency,
        formula,
        _missing("storage", priced_by),
    )


def _dataset_line(
    tokens: float,
    bytes_per_token: float,
    stored: _Stored,
    price: Decimal | None,
    currency: str,
    priced_by: str,
) -> BillLine:
    size_gb = _decimal(tokens) * _decimal(bytes_per_token) / _GB
    quantity = size_gb * stored.months
    formula = (
        f"{_count(tokens)} tokens x {bytes_per_token:g} B = {float(size_gb):,.2f} GB x "
        f"{stored.describe()} = {float(quantity):,.2f} GB-months"
    )
    return _priced(
        "dataset_storage",
        "Data-set storage",
        quantity,
        "GB-month",
        price,
        currency,
        formula,
        _missing("storage", priced_by),
    )


def _egress_line(
    parameters: float, price: Decimal | None, currency: str, priced_by: str
) -> BillLine:
    quantity = _decimal(parameters) * _decimal(EXPORT_BYTES_PER_PARAMETER) / _GB
    formula = (
        f"{_count(parameters)} parameters x {EXPORT_BYTES_PER_PARAMETER:g} B (bf16 export) = "
        f"{float(quantity):,.2f} GB"
    )
    return _priced(
        "egress",
        "Egress of the final weights",
        quantity,
        "GB",
        price,
        currency,
        formula,
        _missing("egress", priced_by),
    )


def _energy_line(
    energy_kwh: Decimal, tariff: Decimal | None, currency: str, in_price: bool
) -> BillLine:
    formula = f"{energy_kwh:,f} kWh"
    if tariff is None:
        note = "no electricity tariff (an on-prem profile gives one)"
        return BillLine("energy", "Energy", float(energy_kwh), "kWh", None, None, formula, note)
    note = (
        "already paid in the accelerator price (an on-prem GPU-hour includes its power): "
        "shown, not added to the total"
        if in_price
        else ""
    )
    return BillLine(
        "energy",
        "Energy",
        float(energy_kwh),
        "kWh",
        tariff,
        money(energy_kwh * tariff),
        f"{formula} x {tariff} {currency}/kWh = {money(energy_kwh * tariff):,} {currency}",
        note=note,
        in_total=not in_price,
    )


def _carbon_line(energy_kwh: Decimal, intensity: float | None) -> BillLine:
    if intensity is None:
        return BillLine(
            "carbon",
            "Carbon",
            None,
            "tCO2e",
            None,
            None,
            f"{energy_kwh:,f} kWh x grid intensity",
            note="no grid carbon intensity given",
            in_total=False,
        )
    tonnes = float(energy_kwh) * intensity / GRAMS_PER_TONNE
    return BillLine(
        "carbon",
        "Carbon",
        tonnes,
        "tCO2e",
        None,
        None,
        f"{energy_kwh:,f} kWh x {intensity:g} gCO2e/kWh / 10^6 = {tonnes:,.2f} tCO2e",
        in_total=False,
    )


def input_pipeline(
    estimate: Mapping[str, Any],
    *,
    gpus_per_node: int,
    bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN,
    node_read_gbps: float | None = None,
    cpu_tokens_per_s_per_node: float | None = None,
) -> dict[str, Any]:
    """What the input pipeline must deliver to one node in the steady state.

    tokens/s per node = tokens/s per accelerator x accelerators of the node (all of the
    run's when it has fewer than a node); read bandwidth = tokens/s per node x bytes per
    token, in Gbit/s. A warning when it exceeds the stated read bandwidth of the storage
    per node (``node_read_gbps``, Gbit/s) or what the node's CPUs prepare
    (``cpu_tokens_per_s_per_node``: tokenizing, packing, loading; tokens/s).
    """
    if gpus_per_node < 1:
        raise PlannerError("must be at least 1", field="gpus_per_node")
    if bytes_per_token <= 0:
        raise PlannerError("must be positive", field="bytes_per_token")
    per_gpu = float(estimate["tokens_per_s_per_gpu"])
    run_gpus = round(float(estimate["tokens_per_s"]) / per_gpu) if per_gpu else gpus_per_node
    gpus = min(gpus_per_node, max(run_gpus, 1))
    tokens_per_s = per_gpu * gpus
    read_bytes_per_s = tokens_per_s * bytes_per_token
    read_gbps = read_bytes_per_s * BITS_PER_BYTE / 1e9
    read_mbps = read_bytes_per_s * BITS_PER_BYTE / 1e6
    warnings = []
    if node_read_gbps is not None and read_gbps > node_read_gbps:
        warnings.append(
            f"the input pipeline needs {read_gbps:,.3g} Gbit/s of reads per node, above the "
            f"stated {node_read_gbps:g} Gbit/s of storage read bandwidth: the accelerators "
            "would wait for data"
        )
    if cpu_tokens_per_s_per_node is not None and tokens_per_s > cpu_tokens_per_s_per_node:
        warnings.append(
            f"the input pipeline needs {tokens_per_s:,.0f} tokens/s per node, above the "
            f"stated {cpu_tokens_per_s_per_node:,.0f} tokens/s the node's CPUs prepare: "
            "pre-tokenize the data or add data-loader workers"
        )
    return {
        "gpus_per_node": gpus,
        "tokens_per_s_per_node": tokens_per_s,
        "bytes_per_token": bytes_per_token,
        "read_bytes_per_s_per_node": read_bytes_per_s,
        "read_gbps_per_node": read_gbps,
        "read_mbps_per_node": read_mbps,
        "node_read_gbps": node_read_gbps,
        "cpu_tokens_per_s_per_node": cpu_tokens_per_s_per_node,
        "warnings": warnings,
    }
