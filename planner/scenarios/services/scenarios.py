"""Scenarios: a validated scenario JSON plus the price it is costed at; JSON import/export."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from estimator.core import ScenarioError, estimate, validate_scenario
from estimator.core.envelope import EXPORT_FORMAT, EXPORT_VERSION
from lib.actors import Actor, actor_user
from lib.text import nul_problem
from lib.updates import audit_diff, model_update
from organisations.models import Organisation
from planner.common.access import AUTHOR_ROLES, role_assert
from planner.common.audit import audit_record
from planner.common.errors import PlannerError
from planner.scenarios.models import EstimationRun, PriceSource, Project, Scenario
from planner.scenarios.prices import (
    PRICE_MODELS,
    PriceObject,
    price_available_to,
    price_get,
)
from pricing.models import OnPremProfile, PriceEntry, VendorQuote


def scenario_spec_check(spec: Any) -> dict[str, Any]:
    """Validate a scenario in the contract's format; errors name ``spec.<key>``."""
    if not isinstance(spec, dict):
        raise PlannerError("must be a JSON object in the scenario format", field="spec")
    problem = nul_problem(spec)
    if problem:
        raise PlannerError(problem, field="spec")
    try:
        validate_scenario(spec)
    except ScenarioError as error:
        raise PlannerError(f"{error.key}: {error.reason}", field=f"spec.{error.key}") from error
    return spec


def scenario_fit_note(spec: dict[str, Any]) -> str:
    """Why a stated layout cannot run, or ``""``: it does not fit in accelerator memory.

    A stated layout is one estimate (about a millisecond), so it is checked as the scenario is
    saved; an ``"auto"`` layout is a search, which runs on a worker when the run starts and
    picks only layouts that fit. Saving is not refused: a requester may mean to change the
    cluster next; runs and budget requests carry the warning.
    """
    if spec.get("parallelism") == "auto":
        return ""
    try:
        result = estimate(spec)
    except ScenarioError:  # scenario_spec_check has said what is wrong
        return ""
    if result["fits_in_memory"]:
        return ""
    needed = float(result["memory_per_gpu_gib"]["total"])
    have = float(result["accelerator_memory_gib"])
    return (
        f"This layout does not fit in memory: it needs {needed:,.0f} GiB per GPU of "
        f"{have:,.0f} GiB. Its runs will say so, and no budget can be requested from them. "
        "More GPUs, more model parallelism, a higher ZeRO stage or recomputation "
        'would fit it (a run lists the memory levers); "auto" searches for a layout that fits.'
    )


def _accelerator_match(spec: dict[str, Any], catalog_id: str | None, field: str) -> None:
    wanted = spec["cluster"]["accelerator"]
    if catalog_id is not None and catalog_id != wanted:
        raise PlannerError(
            f"prices {catalog_id}, but the scenario trains on {wanted}: pick a price for "
            f"{wanted} or change the accelerator",
            field=field,
        )


def _entry_check(spec: dict[str, Any], entry: PriceEntry) -> None:
    if not entry.book.is_published:
        raise PlannerError(
            f"belongs to the draft book '{entry.book.name}': only published prices can cost "
            "a scenario",
            field="price_entry",
        )
    _accelerator_match(spec, entry.accelerator.catalog_id, "price_entry")
    gpus = spec["cluster"]["num_gpus"]
    if entry.minimum_count and gpus < entry.minimum_count:
        raise PlannerError(
            f"applies from {entry.minimum_count} accelerators; the scenario uses {gpus}",
            field="price_entry",
        )


def _quote_check(spec: dict[str, Any], quote: VendorQuote) -> None:
    today = timezone.localdate()
    validity = quote.validity_on(today)
    if validity != "valid":
        state = "expired" if validity == "expired" else "not valid yet"
        raise PlannerError(
            f"{quote} is {state} (valid {quote.valid_from} to {quote.valid_until})",
            field="vendor_quote",
        )
    _accelerator_match(spec, quote.accelerator.catalog_id, "vendor_quote")
    gpus = spec["cluster"]["num_gpus"]
    if gpus > quote.accelerator_count:
        raise PlannerError(
            f"covers {quote.accelerator_count} accelerators; the scenario uses {gpus}",
            field="vendor_quote",
        )


def _onprem_check(spec: dict[str, Any], profile: OnPremProfile) -> None:
    catalog_id = profile.accelerator.catalog_id if profile.accelerator else None
    _accelerator_match(spec, catalog_id, "onprem_profile")


def price_source_check(
    spec: dict[str, Any],
    source: str,
    price: PriceObject | None,
    *,
    organisation: Organisation,
) -> None:
    """The price must exist, be ``organisation``'s to use (:func:`price_available_to`), be
    usable today and price the scenario's accelerator."""
    if source not in PRICE_MODELS:
        raise PlannerError(f"must be one of {', '.join(PriceSource.values)}", field="price_source")
    if price is None:  # the source names the scenario field that holds its record
        raise PlannerError(f"is required when the price source is {source}", field=source)
    if not price_available_to(price, organisation):  # as unknown as a missing id
        raise PlannerError(f"no such price for {organisation}", field=source)
    if isinstance(price, PriceEntry):
        _entry_check(spec, price)
    elif isinstance(price, VendorQuote):
        _quote_check(spec, price)
    else:
        _onprem_check(spec, price)


def _utilisation_check(low: Decimal, high: Decimal) -> None:
    if not Decimal("0.1") <= low <= high <= Decimal(1):
        raise PlannerError(
            f"needs 0.1 <= low <= high <= 1, got {low} and {high}", field="utilisation_low"
        )


def _pue_check(pue: Decimal) -> None:
    if not Decimal(1) <= pue <= Decimal(3):
        raise PlannerError(f"must be between 1 and 3, got {pue}", field="pue")


def _price_fields(source: str, price: PriceObject | None) -> dict[str, Any]:
    """The scenario's three price fields: ``price`` in the one named by its source."""
    fields: dict[str, Any] = dict.fromkeys(PRICE_MODELS)
    if source in PRICE_MODELS:
        fields[source] = price
    return fields


@transaction.atomic
def scenario_create(
    *,
    user: Actor,
    project: Project,
    name: str,
    spec: Any,
    price_source: str,
    price: PriceObject | None,
    description: str = "",
    model_preset: str = "",
    pue: Decimal = Decimal("1.20"),
    utilisation_low: Decimal = Decimal("0.9"),
    utilisation_high: Decimal = Decimal(1),
) -> Scenario:
    """Add a scenario to ``project``; every input is checked before anything is written."""
    role_assert(user, project.organisation, AUTHOR_ROLES, action="add scenarios")
    if not name.strip():
        raise PlannerError("must not be empty", field="name")
    if project.scenarios.filter(name=name.strip()).exists():
        raise PlannerError(f"a scenario named {name!r} exists in this project", field="name")
    spec = scenario_spec_check(spec)
    price_source_check(spec, price_source, price, organisation=project.organisation)
    _pue_check(pue)
    _utilisation_check(utilisation_low, utilisation_high)
    return Scenario.objects.create(
        project=project,
        name=name.strip(),
        description=description,
        model_preset=model_preset,
        spec=spec,
        price_source=price_source,
        pue=pue,
        utilisation_low=utilisation_low,
        utilisation_high=utilisation_high,
        created_by=actor_user(user),
        **_price_fields(price_source, price),
    )


SCENARIO_FIELDS = (
    "name",
    "description",
    "model_preset",
    "spec",
    "pue",
    "utilisation_low",
    "utilisation_high",
)
#: What an update saves: the fields above, and the price source with its three fields.
UPDATABLE_FIELDS = (*SCENARIO_FIELDS, "price_source", *PRICE_MODELS)


@transaction.atomic
def scenario_update(
    *,
    user: Actor,
    scenario: Scenario,
    price_source: str | None = None,
    price: PriceObject | None = None,
    **changes: Any,
) -> Scenario:
    """Change a scenario; runs already made keep the copy of the inputs they used."""
    role_assert(user, scenario.project.organisation, AUTHOR_ROLES, action="edit scenarios")
    # Before anything is read: a price field changes only with its source (price_source=).
    unknown = set(changes) - set(SCENARIO_FIELDS)
    if unknown:
        raise PlannerError("cannot be changed", field=sorted(unknown)[0])
    current = Scenario.objects.select_for_update().get(pk=scenario.pk)
    if "name" in changes:
        name = str(changes["name"]).strip()
        if not name:
            raise PlannerError("must not be empty", field="name")
        if current.project.scenarios.filter(name=name).exclude(pk=current.pk).exists():
            raise PlannerError(f"a scenario named {name!r} exists in this project", field="name")
        changes["name"] = name
    spec = scenario_spec_check(changes["spec"]) if "spec" in changes else current.spec
    organisation = current.project.organisation
    if price_source is not None:
        price_source_check(spec, price_source, price, organisation=organisation)
        changes.update(price_source=price_source, **_price_fields(price_source, price))
    else:
        price_source_check(spec, current.price_source, current.price, organisation=organisation)
    _pue_check(Decimal(changes.get("pue", current.pue)))
    _utilisation_check(
        Decimal(changes.get("utilisation_low", current.utilisation_low)),
        Decimal(changes.get("utilisation_high", current.utilisation_high)),
    )
    changed = model_update(current, changes, allowed=UPDATABLE_FIELDS, refuse=PlannerError)
    audit_record(
        request=None,
        project_id=current.project_id,
        scenario=current,
        actor=user,
        action="scenario_edited",
        changes=audit_diff(changed),
    )
    return current


@transaction.atomic
@transaction.atomic
def scenario_delete(*, user: Actor, scenario: Scenario) -> None:
    """Delete ``scenario`` and its runs; refused (``ProtectedError``) while a budget cites one.

    The row is locked first, so a run started at the same moment waits and then finds the
    scenario gone (:func:`~planner.scenarios.services.runs.run_start`), instead of slipping a run in
    between the collection of the runs and the delete (a foreign-key violation).
    """
    role_assert(user, scenario.project.organisation, AUTHOR_ROLES, action="delete scenarios")
    locked = Scenario.objects.select_for_update().filter(pk=scenario.pk).first()
    if locked is not None:
        locked.delete()


def scenario_export(scenario: Scenario) -> dict[str, Any]:
    """The scenario as a portable JSON document (``scenario_import`` reads it back)."""
    price = scenario.price
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "name": scenario.name,
        "description": scenario.description,
        "model_preset": scenario.model_preset,
        "scenario": scenario.spec,
        "price_source": scenario.price_source,
        "price_id": price.pk if price is not None else None,
        "pue": str(scenario.pue),
        "utilisation": [str(scenario.utilisation_low), str(scenario.utilisation_high)],
    }


def _document_price(document: dict[str, Any]) -> tuple[str, PriceObject]:
    source = document.get("price_source")
    if source not in PRICE_MODELS:
        raise PlannerError(f"must be one of {', '.join(PRICE_MODELS)}", field="price_source")
    price_id = document.get("price_id")
    if not isinstance(price_id, int):
        raise PlannerError(f"must be an integer id, got {price_id!r}", field="price_id")
    price = price_get(source, price_id)
    if price is None:
        raise PlannerError(f"no {source} with id {price_id!r}", field="price_id")
    return source, price


def _decimal_field(document: dict[str, Any], key: str, value: Any) -> Decimal:
    try:
        number = Decimal(str(value))
    except ArithmeticError as exc:
        raise PlannerError(f"must be a number, got {value!r}", field=key) from exc
    if not number.is_finite():
        raise PlannerError(f"must be a finite number, got {value!r}", field=key)
    return number


def scenario_import(*, user: Actor, project: Project, document: Any) -> Scenario:
    """Create a scenario from an exported document; every problem names its key."""
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise PlannerError(f"is not a {EXPORT_FORMAT} document", field="format")
    if document.get("version") != EXPORT_VERSION:
        raise PlannerError(f"must be {EXPORT_VERSION}", field="version")
    source, price = _document_price(document)
    utilisation = document.get("utilisation", ["0.9", "1"])
    if not isinstance(utilisation, list) or len(utilisation) != 2:
        raise PlannerError("must be a list [low, high]", field="utilisation")
    return scenario_create(
        user=user,
        project=project,
        name=str(document.get("name", "")),
        description=str(document.get("description", "")),
        model_preset=str(document.get("model_preset", "")),
        spec=document.get("scenario"),
        price_source=source,
        price=price,
        pue=_decimal_field(document, "pue", document.get("pue", "1.20")),
        utilisation_low=_decimal_field(document, "utilisation", utilisation[0]),
        utilisation_high=_decimal_field(document, "utilisation", utilisation[1]),
    )


def scenario_name_free(project: Project, name: str) -> str:
    """``name`` (cut to the column), or with `` (2)``, `` (3)``... when the project has it."""
    base = name.strip()[:190]
    taken = set(project.scenarios.values_list("name", flat=True))
    if base not in taken:
        return base
    number = 2
    while f"{base} ({number})" in taken:
        number += 1
    return f"{base} ({number})"


def scenario_duplicate(
    *,
    user: Actor,
    scenario: Scenario,
    name: str = "",
    spec: dict[str, Any] | None = None,
    description: str = "",
) -> Scenario:
    """A copy of ``scenario`` in its project (its price, PUE and utilisation too), with
    ``spec`` instead of its own when given; named ``name`` or "<name> (copy)"."""
    return scenario_create(
        user=user,
        project=scenario.project,
        name=scenario_name_free(scenario.project, name or f"{scenario.name} (copy)"),
        spec=spec if spec is not None else scenario.spec,
        price_source=scenario.price_source,
        price=scenario.price,
        description=description or scenario.description,
        model_preset=scenario.model_preset,
        pue=scenario.pue,
        utilisation_low=scenario.utilisation_low,
        utilisation_high=scenario.utilisation_high,
    )


def scenario_from_lever(*, user: Actor, run: EstimationRun, index: int) -> Scenario:
    """Apply lever ``index`` of a finished run: a duplicate of the run's scenario with that
    one change, named after it."""
    found = run.levers or []
    if not 0 <= index < len(found):
        raise PlannerError(f"run {run.pk} has no lever {index}", field="lever")
    lever = found[index]
    return scenario_duplicate(
        user=user,
        scenario=run.scenario,
        name=f"{run.scenario.name} · {lever['change']}",
        spec=lever["scenario"],
        description=f"Lever of run {run.pk}: {lever['change']} ({lever['reason']}).",
    )
