"""On-prem cost profiles. The maths lives in :mod:`pricing.tco`; this keeps the records."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction

from lib.actors import OptionalActor, actor_user
from lib.updates import model_update
from organisations.models import Organisation
from pricing.currency import currency_code_check
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import OnPremProfile
from pricing.services.audit import price_audit_fields, price_audit_record
from pricing.tco import INPUT_FIELDS, OnPremInputs, onprem_inputs_check

#: Carbon intensity of the profile's electricity [gCO2e/kWh]; optional, not a cost input.
GRID_FIELD = "grid_gco2e_per_kwh"
#: The highest grid intensity accepted [gCO2e/kWh]: above any national grid's annual average
#: (coal-only generation is about 1000-1100), with room for a supplier's odd figure.
GRID_MAX = Decimal(2000)
PROFILE_FIELDS = ("name", "accelerator", "currency", "source", *INPUT_FIELDS, GRID_FIELD)


def onprem_inputs_from(values: Mapping[str, Any] | OnPremProfile) -> OnPremInputs:
    """The maths' inputs from a profile or a mapping of its fields."""
    if isinstance(values, OnPremProfile):
        return OnPremInputs(**{name: getattr(values, name) for name in INPUT_FIELDS})
    return OnPremInputs(**{name: values[name] for name in INPUT_FIELDS})


def grid_intensity_clean(value: Any) -> Decimal | None:
    """An optional grid intensity [gCO2e/kWh] as a :class:`Decimal`, None when not given.

    Raises :class:`PricingError` naming ``grid_gco2e_per_kwh`` unless it is a number from 0
    to 2000 with at most one decimal place.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise PricingError(f"must be a number, got {value!r}", field=GRID_FIELD)
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError) as error:
        raise PricingError(f"must be a number, got {value!r}", field=GRID_FIELD) from error
    if not number.is_finite() or not Decimal(0) <= number <= GRID_MAX:
        raise PricingError(f"must be from 0 to {GRID_MAX} gCO2e/kWh, got {value}", field=GRID_FIELD)
    if number != number.quantize(Decimal("0.1")):
        raise PricingError(f"takes at most one decimal place, got {value}", field=GRID_FIELD)
    return number


def _profile_values_check(values: Mapping[str, Any]) -> None:
    if not str(values.get("name") or "").strip():
        raise PricingError("name is required", field="name")
    currency_code_check(values.get("currency") or "")
    onprem_inputs_check(onprem_inputs_from(values))
    grid_intensity_clean(values.get(GRID_FIELD))


def _duplicate(name: str) -> DuplicateRecord:
    return DuplicateRecord(f"a profile named {name!r} exists", field="name")


@transaction.atomic
def onprem_profile_create(
    *, user: OptionalActor, organisation: Organisation, **values: Any
) -> OnPremProfile:
    """Record a profile of ``organisation``; names are unique within an organisation."""
    values = {name: values.get(name) for name in PROFILE_FIELDS} | {
        "source": values.get("source") or "",
        "currency": values.get("currency") or "USD",
    }
    _profile_values_check(values)
    values[GRID_FIELD] = grid_intensity_clean(values[GRID_FIELD])
    if OnPremProfile.objects.filter(organisation=organisation, name=values["name"]).exists():
        raise _duplicate(values["name"])
    try:
        # A savepoint: a concurrent save of the same name loses here, not with a 500.
        with transaction.atomic():
            profile = OnPremProfile.objects.create(
                **values, organisation=organisation, created_by=actor_user(user)
            )
    except IntegrityError as error:
        raise _duplicate(values["name"]) from error
    price_audit_record(
        actor=user,
        action="created",
        subject=profile,
        changes=price_audit_fields(profile, PROFILE_FIELDS),
    )
    return profile


@transaction.atomic
def onprem_profile_update(
    *, profile: OnPremProfile, user: OptionalActor = None, **changes: Any
) -> OnPremProfile:
    profile = OnPremProfile.objects.select_for_update().get(pk=profile.pk)  # the stored row
    merged = {name: changes.get(name, getattr(profile, name)) for name in PROFILE_FIELDS}
    _profile_values_check(merged)
    if GRID_FIELD in changes:
        changes = {**changes, GRID_FIELD: grid_intensity_clean(changes[GRID_FIELD])}
    others = OnPremProfile.objects.filter(organisation=profile.organisation_id).exclude(
        pk=profile.pk
    )
    if "name" in changes and others.filter(name=changes["name"]).exists():
        raise _duplicate(changes["name"])
    changed = model_update(profile, changes, allowed=PROFILE_FIELDS, refuse=PricingError)
    if changed:
        price_audit_record(actor=user, action="edited", subject=profile, changes=changed)
    return profile


@transaction.atomic
def onprem_profile_delete(*, profile: OnPremProfile, user: OptionalActor = None) -> None:
    price_audit_record(
        actor=user,
        action="deleted",
        subject=profile,
        changes=price_audit_fields(profile, PROFILE_FIELDS),
    )
    profile.delete()
