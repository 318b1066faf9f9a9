"""On-prem cost profiles. The maths lives in :mod:`pricing.tco`; this keeps the records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from planner.lib.actors import OptionalActor, actor_user
from planner.lib.updates import model_update
from planner.organisations import Organisation
from pricing.currency import currency_code_check
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import OnPremProfile
from pricing.services.audit import price_audit_fields, price_audit_record
from pricing.tco import INPUT_FIELDS, OnPremInputs, onprem_inputs_check

PROFILE_FIELDS = ("name", "accelerator", "currency", "source", *INPUT_FIELDS)


def onprem_inputs_from(values: Mapping[str, Any] | OnPremProfile) -> OnPremInputs:
    """The maths' inputs from a profile or a mapping of its fields."""
    if isinstance(values, OnPremProfile):
        return OnPremInputs(**{name: getattr(values, name) for name in INPUT_FIELDS})
    return OnPremInputs(**{name: values[name] for name in INPUT_FIELDS})


def _profile_values_check(values: Mapping[str, Any]) -> None:
    if not str(values.get("name") or "").strip():
        raise PricingError("name is required", field="name")
    currency_code_check(values.get("currency") or "")
    onprem_inputs_check(onprem_inputs_from(values))


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
    merged = {name: changes.get(name, getattr(profile, name)) for name in PROFILE_FIELDS}
    _profile_values_check(merged)
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
