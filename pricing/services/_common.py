"""Helpers shared by the pricing services."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import models

from pricing.errors import PricingError

# Who asks for a write: a signed-in user, an anonymous one, or nobody (a command, the demo).
Actor = User | AnonymousUser | None


def actor_user(actor: Actor) -> User | None:
    """The user to record as author of a write, if a signed-in one asked for it."""
    return actor if isinstance(actor, User) else None


def model_fields_set(
    instance: models.Model, changes: Mapping[str, Any], *, allowed: Iterable[str]
) -> list[str]:
    """Set ``changes`` on ``instance`` and save only the fields that changed.

    Returns the names of the saved fields (empty when nothing changed).
    """
    allowed = set(allowed)
    for name in changes:
        if name not in allowed:
            raise PricingError("this field cannot be changed", field=name)
    changed = [name for name, value in changes.items() if getattr(instance, name) != value]
    if not changed:
        return []
    for name in changed:
        setattr(instance, name, changes[name])
    update_fields = changed + (["updated_at"] if hasattr(instance, "updated_at") else [])
    instance.save(update_fields=update_fields)
    return changed


def positive_check(value: Decimal | int | None, *, field: str, what: str = "value") -> None:
    """Refuse a missing, zero or negative amount, naming it."""
    if value is None:
        raise PricingError(f"{what} is required", field=field)
    if value < 0:
        raise PricingError(f"negative {what} {value}: must be positive", field=field)
    if value == 0:
        raise PricingError(f"{what} must be positive, got 0", field=field)
