"""One way to update a row: set the changed fields, save only those, and say what changed.

Every update service calls :func:`model_update`; the audit trail records its
:func:`audit_diff`, so a scenario, a budget request and a price book describe an edit alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import models


@dataclass(frozen=True)
class Change:
    """One field's value before and after an update."""

    before: Any
    after: Any


def model_update(
    instance: models.Model,
    changes: Mapping[str, Any],
    *,
    allowed: Iterable[str],
    refuse: type[Exception],
) -> dict[str, Change]:
    """Set ``changes`` on ``instance`` and save only the fields whose value differs.

    Parameters
    ----------
    instance : Model
        The row to update, ideally locked (``select_for_update``) by the caller.
    changes : mapping of str to value
        Field name to new value; fields equal to their current value are left alone.
    allowed : iterable of str
        The fields a caller may change; any other name is refused.
    refuse : exception class
        The domain error to raise for a field outside ``allowed``; it is called as
        ``refuse("cannot be changed", field=name)`` (``PlannerError``, ``PricingError``).

    Returns
    -------
    dict of str to Change
        The fields saved, with their old and new values (empty when nothing changed, and
        then nothing is written). ``updated_at`` is saved with them when the model has it.
    """
    allowed = set(allowed)
    for name in changes:
        if name not in allowed:
            raise refuse("cannot be changed", field=name)  # type: ignore[call-arg]
    changed = {
        name: Change(getattr(instance, name), value)
        for name, value in changes.items()
        if getattr(instance, name) != value
    }
    if not changed:
        return {}
    for name, change in changed.items():
        setattr(instance, name, change.after)
    auto = ["updated_at"] if any(f.name == "updated_at" for f in instance._meta.fields) else []
    instance.save(update_fields=[*changed, *auto])
    return changed


def audit_value(value: Any) -> Any:
    """A value as the audit trail's JSON keeps it: decimals as text, dates and times in ISO
    8601, rows as ``Model pk``."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, models.Model):
        return f"{type(value).__name__} {value.pk}"
    if isinstance(value, list | tuple):
        return [audit_value(item) for item in value]
    return value


def audit_diff(changes: Mapping[str, Change]) -> dict[str, list[Any]]:
    """``{field: [before, after]}`` for the audit trail, values made JSON-safe."""
    return {
        name: [audit_value(change.before), audit_value(change.after)]
        for name, change in changes.items()
    }
