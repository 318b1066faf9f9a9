"""``{% load commitments %}``: a committed price shown as a commitment
(:mod:`planner.scenarios.commitments`).

``{{ run.price|commitment_short:run.budget }}`` gives one line for a table row (empty for an
uncommitted price); ``{{ run.price|commitment_sentences:run.budget }}`` the sentences of the
run and budget pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from planner.scenarios import commitments

register = template.Library()


@register.filter
def commitment_short(price: Any, budget: Any = None) -> str:
    if not isinstance(price, Mapping):
        return ""
    return commitments.commitment_short(price, budget if isinstance(budget, Mapping) else None)


@register.filter
def commitment_sentences(price: Any, budget: Any = None) -> list[str]:
    if not isinstance(price, Mapping):
        return []
    return commitments.commitment_sentences(price, budget if isinstance(budget, Mapping) else None)
