"""What differs between two runs, and how much each difference moved days and cost.

:func:`run_diff` compares two finished runs from what they stored (their inputs, price
snapshot, result and budget; nothing is written) and groups the differences: each section of
the scenario (model, training, cluster, ...), the layout the run used (stated, or chosen by
the search), the price, the PUE and utilisation range, the Monte Carlo settings, the exchange
rate and the estimator version.

The change of the deterministic figures (training days and the deterministic cost, both as the
runs' budgets hold them) is attributed by swapping one group of differences at a time,
cumulatively, in a fixed order: the scenario's sections first, then the layout, then the
price. It starts from ``before``'s inputs with the layout it used made explicit, so every
re-estimate is one :func:`estimator.core.estimate` of an explicit layout (no search; about a
millisecond), priced with :func:`planner.scenarios.budget_figures.cost_of` as the run itself
is. Each step's change of the figures is that group's attribution. What is left between the
re-estimates under today's estimator and the figures the two runs stored (non-zero when the
estimator, or its catalog or fitted data, changed between the runs) goes to "estimator version
/ other". The attributions therefore add up to the total change exactly (they telescope),
up to float rounding of the days.

The split depends on the order: a group changed after another is costed at the other's new
value (the price, last, applies to the new GPU-hours). A step whose scenario the estimator
refuses (``before``'s layout on ``after``'s cluster size, say) is counted together with the
next one.

A difference that does not move the deterministic figures (PUE: energy only; utilisation and
the Monte Carlo settings: P10/P50/P90 only; the exchange rate: the converted figures only) is
listed but not attributed. When the two runs are priced in different currencies, ``before``'s
costs are converted to ``after``'s currency at the rate the runs recorded, and without one
the costs are not attributed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from estimator.core import ScenarioError, estimate
from planner.scenarios.budget_figures import cost_of, money
from planner.scenarios.models import EstimationRun

#: The order the scenario's sections are listed and swapped in; other sections follow by name.
SECTION_ORDER = ("model", "training", "cluster", "framework", "margins", "run", "format_version")
SECTION_LABELS = {
    "model": "Model",
    "training": "Training",
    "cluster": "Cluster",
    "framework": "Framework",
    "margins": "Margins",
    "run": "Whole run",
    "format_version": "Format version",
}
#: The keys of the price snapshot listed first; the others follow by name.
PRICE_KEYS = ("price_per_gpu_hour", "currency", "minimum_spend", "pricing_type", "source", "id")
PRICE_NUMBERS = ("price_per_gpu_hour", "minimum_spend")
ESTIMATOR = "estimator"
STATED, SEARCHED = "stated", "chosen by the search"

Json = Any


@dataclass(frozen=True)
class Change:
    """One key whose value differs; ``None`` where a run does not have the key."""

    path: str
    before: Json
    after: Json

    @property
    def before_text(self) -> str:
        return _text(self.before, identifier=self.is_identifier)

    @property
    def after_text(self) -> str:
        return _text(self.after, identifier=self.is_identifier)

    @property
    def is_identifier(self) -> bool:
        """A seed or an id: a label, printed without thousands separators."""
        return self.path.rsplit(".", 1)[-1] in ("seed", "id")

    def as_json(self) -> dict[str, Json]:
        return {"path": self.path, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class DiffGroup:
    """The differences of one group: a scenario section, the layout, the price, ...

    ``attributed`` says whether the group takes part in the attribution (it moves the
    deterministic figures); ``note`` says what it moves when it does not.
    """

    key: str
    label: str
    changes: tuple[Change, ...]
    attributed: bool
    note: str = ""

    def as_json(self) -> dict[str, Json]:
        return {
            "key": self.key,
            "label": self.label,
            "attributed": self.attributed,
            "note": self.note,
            "changes": [change.as_json() for change in self.changes],
        }


@dataclass(frozen=True)
class Figures:
    """Deterministic training days [d] and cost [currency of the diff], None when unknown."""

    days: float
    cost: Decimal | None


@dataclass(frozen=True)
class Attribution:
    """How much one difference (or several counted together) moved days and cost."""

    keys: tuple[str, ...]
    label: str
    days: float
    cost: Decimal | None
    note: str = ""

    @property
    def key(self) -> str:
        return "+".join(self.keys)

    def as_json(self) -> dict[str, Json]:
        return {
            "key": self.key,
            "label": self.label,
            "days": self.days,
            "cost": None if self.cost is None else str(self.cost),
            "note": self.note,
        }


@dataclass(frozen=True)
class RunDiff:
    """Two runs' differences and the attribution of their change of days and cost.

    Costs are in ``currency`` (``after``'s price currency); ``before``'s figures are
    converted at ``rate`` when the runs' currencies differ (``rate`` is 1 otherwise, and
    None when no recorded rate converts them: then every cost is None).
    """

    before_id: int
    after_id: int
    groups: tuple[DiffGroup, ...]
    attributions: tuple[Attribution, ...]
    before: Figures
    after: Figures
    currency: str
    before_currency: str
    rate: Decimal | None
    notes: tuple[str, ...] = field(default=())

    @property
    def identical(self) -> bool:
        return not self.groups

    @property
    def total_days(self) -> float:
        return self.after.days - self.before.days

    @property
    def total_cost(self) -> Decimal | None:
        if self.after.cost is None or self.before.cost is None:
            return None
        return self.after.cost - self.before.cost

    @property
    def attributed_days(self) -> float:
        return sum((item.days for item in self.attributions), 0.0)

    @property
    def attributed_cost(self) -> Decimal | None:
        costs = [item.cost for item in self.attributions]
        if any(cost is None for cost in costs):
            return None
        return sum((cost for cost in costs if cost is not None), Decimal(0))

    def as_json(self) -> dict[str, Json]:
        def figures(value: Figures) -> dict[str, Json]:
            return {"days": value.days, "cost": None if value.cost is None else str(value.cost)}

        total_cost = self.total_cost
        return {
            "before": self.before_id,
            "after": self.after_id,
            "currency": self.currency,
            "before_currency": self.before_currency,
            "rate": None if self.rate is None else str(self.rate),
            "groups": [group.as_json() for group in self.groups],
            "figures": {"before": figures(self.before), "after": figures(self.after)},
            "attributions": [item.as_json() for item in self.attributions],
            "total": {
                "days": self.total_days,
                "cost": None if total_cost is None else str(total_cost),
            },
            "notes": list(self.notes),
        }


class RunNotComparable(ValueError):
    """A run without figures (not succeeded) cannot be compared."""


# --- Differences -------------------------------------------------------------------------------


def _text(value: Json, *, identifier: bool = False) -> str:
    if identifier and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is None:
        return "\u2013"  # not set
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        return f"{value:.6g}" if abs(value) >= 1e15 else f"{int(value):,}"
    if isinstance(value, int | float):
        return f"{value:,}" if isinstance(value, int) else repr(value)
    return json.dumps(value, sort_keys=True)


def _same(a: Json, b: Json) -> bool:
    """Equal as JSON: ``2e11 == 200000000000``, but ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _flat(value: Json, prefix: str) -> dict[str, Json]:
    """A section's leaves by dotted path; lists are leaves."""
    if not isinstance(value, Mapping):
        return {prefix: value}
    out: dict[str, Json] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}.{key}"))
    return out


def _changes(before: Mapping[str, Json], after: Mapping[str, Json]) -> tuple[Change, ...]:
    keys = list(before) + [key for key in after if key not in before]
    return tuple(
        Change(key, before.get(key), after.get(key))
        for key in keys
        if not _same(before.get(key), after.get(key))
    )


def _decimal(value: Json) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _sections(spec: Mapping[str, Json]) -> list[str]:
    keys = [key for key in spec if key != "parallelism"]
    ordered = [key for key in SECTION_ORDER if key in keys]
    return ordered + sorted(key for key in keys if key not in SECTION_ORDER)


def _section_groups(before: Mapping[str, Json], after: Mapping[str, Json]) -> list[DiffGroup]:
    names = _sections({**after, **before})
    groups = []
    for name in names:
        changes = _changes(
            _flat(before[name], name) if name in before else {},
            _flat(after[name], name) if name in after else {},
        )
        if changes:
            label = SECTION_LABELS.get(name, name.replace("_", " ").capitalize())
            groups.append(DiffGroup(name, label, changes, attributed=True))
    return groups


def layout_of(run: EstimationRun) -> dict[str, Json]:
    """The layout the run's estimate used: the stated one, or the one the search chose."""
    return dict((run.result or {}).get("parallelism") or {})


def layout_source(run: EstimationRun) -> str:
    return STATED if isinstance(run.inputs["scenario"].get("parallelism"), Mapping) else SEARCHED


def _layout_group(before: EstimationRun, after: EstimationRun) -> DiffGroup | None:
    changes = list(_changes(layout_of(before), layout_of(after)))
    old, new = layout_source(before), layout_source(after)
    if old != new:
        changes.insert(0, Change("layout", old, new))
    if not changes:
        return None
    return DiffGroup("layout", "Layout", tuple(changes), attributed=True)


def _price_group(before: Mapping[str, Json], after: Mapping[str, Json]) -> DiffGroup | None:
    keys = [key for key in PRICE_KEYS if key in before or key in after]
    keys += sorted((set(before) | set(after)) - set(PRICE_KEYS))
    changes = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        same = _decimal(old) == _decimal(new) if key in PRICE_NUMBERS else _same(old, new)
        if not same:
            changes.append(Change(key, old, new))
    if not changes:
        return None
    return DiffGroup("price", "Price", tuple(changes), attributed=True)


def _plain_groups(before: EstimationRun, after: EstimationRun) -> list[DiffGroup]:
    """The differences that do not move the deterministic figures."""
    groups = []
    pue = (before.inputs.get("pue"), after.inputs.get("pue"))
    if _decimal(pue[0]) != _decimal(pue[1]):
        groups.append(DiffGroup("pue", "PUE", (Change("pue", *pue),), False, "energy figure only"))
    low_high = (before.inputs.get("utilisation") or [], after.inputs.get("utilisation") or [])
    if [_decimal(v) for v in low_high[0]] != [_decimal(v) for v in low_high[1]]:
        change = Change("utilisation", *low_high)
        groups.append(
            DiffGroup("utilisation", "Utilisation", (change,), False, "P10 / P50 / P90 only")
        )
    montecarlo = _changes(
        {"seed": before.seed, "samples": before.samples},
        {"seed": after.seed, "samples": after.samples},
    )
    if montecarlo:
        groups.append(
            DiffGroup("montecarlo", "Monte Carlo", montecarlo, False, "P10 / P50 / P90 only")
        )
    converted = _changes(_converted(before), _converted(after))
    if converted:
        target = _converted(after).get("currency") or _converted(before).get("currency") or ""
        note = f"the figures converted to {target} only" if target else "converted figures only"
        groups.append(DiffGroup("exchange_rate", "Exchange rate", converted, False, note))
    return groups


def _converted(run: EstimationRun) -> dict[str, Json]:
    return dict((run.budget or {}).get("converted") or {})


def _estimator_group(before: EstimationRun, after: EstimationRun) -> DiffGroup | None:
    if before.estimator_version == after.estimator_version:
        return None
    change = Change("estimator_version", before.estimator_version, after.estimator_version)
    return DiffGroup(ESTIMATOR, "Estimator version", (change,), attributed=True)


def _groups(before: EstimationRun, after: EstimationRun) -> list[DiffGroup]:
    spec_before, spec_after = before.inputs["scenario"], after.inputs["scenario"]
    groups = _section_groups(spec_before, spec_after)
    for group in (_layout_group(before, after), _price_group(before.price, after.price)):
        if group is not None:
            groups.append(group)
    groups += _plain_groups(before, after)
    estimator = _estimator_group(before, after)
    return groups + ([estimator] if estimator else [])


# --- Attribution -------------------------------------------------------------------------------


def rate_between(before: EstimationRun, after: EstimationRun) -> Decimal | None:
    """The rate from ``before``'s price currency to ``after``'s, from what the runs recorded:
    1 for one currency, else a run's conversion (directly, inverted or across the base
    currency both were converted to); None when none converts them."""
    source, target = before.price["currency"], after.price["currency"]
    if source == target:
        return Decimal(1)
    old, new = _converted(before), _converted(after)
    old_rate, new_rate = _decimal(old.get("rate")), _decimal(new.get("rate"))
    if old.get("currency") == target and old_rate:
        return old_rate
    if new.get("currency") == source and new_rate:
        return Decimal(1) / new_rate
    if old_rate and new_rate and old.get("currency") == new.get("currency"):
        return old_rate / new_rate
    return None


@dataclass(frozen=True)
class _Price:
    per_gpu_hour: Decimal
    minimum_spend: Decimal | None
    rate: Decimal | None  # to the diff's currency

    @classmethod
    def of(cls, run: EstimationRun, rate: Decimal | None) -> _Price:
        return cls(
            Decimal(run.price["price_per_gpu_hour"]),
            _decimal(run.price.get("minimum_spend")),
            rate,
        )

    def cost(self, gpu_hours: float) -> Decimal | None:
        return self.convert(cost_of(gpu_hours, self.per_gpu_hour, self.minimum_spend))

    def convert(self, amount: Decimal) -> Decimal | None:
        if self.rate is None:
            return None
        return amount if self.rate == 1 else money(amount * self.rate)


def _stored(run: EstimationRun, price: _Price) -> Figures:
    """The deterministic figures the run stored (its budget's, as its page shows them)."""
    budget, result = run.budget or {}, run.result or {}
    days = budget.get("training_days", {}).get("deterministic", result.get("training_days"))
    cost = budget.get("cost", {}).get("deterministic")
    if cost is None:
        return Figures(float(days), price.cost(float(result["gpu_hours"])))
    return Figures(float(days), price.convert(Decimal(cost)))


def _estimated(spec: Mapping[str, Json], price: _Price) -> Figures:
    """Raises ScenarioError when the estimator refuses ``spec``."""
    result = estimate(spec)
    return Figures(float(result["training_days"]), price.cost(float(result["gpu_hours"])))


@dataclass
class _Step:
    key: str
    label: str
    figures: Figures | None  # None: the estimator refused the step's scenario
    note: str = ""


def _steps(
    before: EstimationRun, after: EstimationRun, groups: list[DiffGroup], rate: Decimal | None
) -> list[_Step]:
    """The chain of figures from ``before``'s stored ones to ``after``'s, one group at a time."""
    old_price, new_price = _Price.of(before, rate), _Price.of(after, Decimal(1))

    def step(key: str, label: str, spec: Mapping[str, Json], price: _Price) -> _Step:
        try:
            return _Step(key, label, _estimated(spec, price))
        except ScenarioError as error:
            note = f"the estimator refuses the scenario between these steps ({error.key}: "
            return _Step(key, label, None, f"{note}{error.reason}); counted with the next one")

    spec = copy.deepcopy(before.inputs["scenario"])
    spec["parallelism"] = layout_of(before)
    steps = [step(ESTIMATOR, "Estimator version / other", spec, old_price)]
    after_spec = after.inputs["scenario"]
    attributed = {group.key: group for group in groups if group.attributed}
    for name in _sections({**after_spec, **spec}):
        if name not in attributed:
            continue
        if name in after_spec:
            spec[name] = copy.deepcopy(after_spec[name])
        else:
            spec.pop(name, None)
        steps.append(step(name, attributed[name].label, spec, old_price))
    if "layout" in attributed:
        spec["parallelism"] = layout_of(after)
        steps.append(step("layout", "Layout", spec, old_price))
    if "price" in attributed:
        steps.append(step("price", "Price", spec, new_price))
    steps.append(_Step(ESTIMATOR, "Estimator version / other", _stored(after, new_price)))
    return steps


def _attributions(start: Figures, steps: list[_Step]) -> list[Attribution]:
    """Each step's change from the one before; refused steps count with the next one, and
    the two estimator residuals (at the start and at the end) are one line."""
    found: dict[tuple[str, ...], Attribution] = {}
    previous, pending, notes = start, [], []
    for item in steps:
        pending.append(item)
        if item.note:
            notes.append(item.note)
        if item.figures is None:
            continue
        keys = tuple(dict.fromkeys(step.key for step in pending))
        label = " + ".join(dict.fromkeys(step.label for step in pending))
        days = item.figures.days - previous.days
        cost = (
            None
            if item.figures.cost is None or previous.cost is None
            else item.figures.cost - previous.cost
        )
        if keys in found:  # the estimator, at the start and at the end
            earlier = found[keys]
            both = None if cost is None or earlier.cost is None else earlier.cost + cost
            found[keys] = Attribution(keys, label, earlier.days + days, both, earlier.note)
        else:
            found[keys] = Attribution(keys, label, days, cost, "; ".join(notes))
        previous, pending, notes = item.figures, [], []
    estimator = found.pop((ESTIMATOR,), None)
    listed = list(found.values())
    if estimator is not None:
        listed.append(estimator)  # the residual is read last
    return listed


def run_diff(before: EstimationRun, after: EstimationRun) -> RunDiff:
    """The differences between two succeeded runs and what each did to days and cost.

    Raises
    ------
    RunNotComparable
        When a run has no figures (it has not succeeded).
    """
    for run in (before, after):
        if run.result is None or run.budget is None:
            raise RunNotComparable(f"Run {run.pk} has no figures: it is {run.status}.")
    groups = _groups(before, after)
    rate = rate_between(before, after)
    start = _stored(before, _Price.of(before, rate))
    end = _stored(after, _Price.of(after, Decimal(1)))
    attributions = _attributions(start, _steps(before, after, groups, rate))
    estimator_changed = any(group.key == ESTIMATOR for group in groups)
    attributions = [
        item
        for item in attributions
        if item.keys != (ESTIMATOR,) or estimator_changed or item.days or item.cost
    ]
    notes = []
    currency, before_currency = after.price["currency"], before.price["currency"]
    if before_currency != currency:
        notes.append(
            f"Run {before.pk} is priced in {before_currency}: its costs are converted to "
            f"{currency} at {rate:.6g} (the rate the runs recorded)."
            if rate is not None
            else f"Run {before.pk} is priced in {before_currency} and run {after.pk} in "
            f"{currency}, and neither recorded a rate between them: costs are not attributed."
        )
    return RunDiff(
        before_id=before.pk,
        after_id=after.pk,
        groups=tuple(groups),
        attributions=tuple(attributions),
        before=start,
        after=end,
        currency=currency,
        before_currency=before_currency,
        rate=rate,
        notes=tuple(notes),
    )
