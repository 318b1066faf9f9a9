"""The memory verdict as a badge: ``{% load verdicts %}``, then ``{{ result|memory_verdict }}``
(an estimate's output, a run's snapshot row, or a verdict code) gives ``code``, ``label``,
``short`` and ``tone``, the same on every page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from estimator.core.memory import MEMORY_VERDICTS, result_memory_verdict
from planner.common.labels import MEMORY_VERDICTS as LABELS

register = template.Library()

_BY_CODE = {code: (label, tone) for code, label, tone in LABELS}
_SHORT = {"fits": "fits", "tight": "tight", "does_not_fit": "does not fit"}


@register.filter
def memory_verdict(value: Any) -> dict[str, str] | None:
    """The verdict of ``value`` with its label and badge tone; None without figures."""
    if isinstance(value, str) and value in MEMORY_VERDICTS:
        code = value
    elif isinstance(value, Mapping) and value:
        code = result_memory_verdict(value)
    else:
        return None
    label, tone = _BY_CODE[code]
    return {"code": code, "label": label, "short": _SHORT[code], "tone": tone}
