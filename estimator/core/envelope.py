"""The web app's scenario export, read as the command line's input.

The planner's "Export JSON" wraps the scenario in a document that also carries its name,
price and utilisation: ``{"format": "trainplan-scenario", "version": 1, "name": ...,
"scenario": {...}}``. :func:`scenario_of` takes either that document or a bare scenario and
gives the scenario, so ``python -m estimator estimate export.json`` reads the export as it is.
"""

from __future__ import annotations

from typing import Any

from estimator.core.errors import ScenarioError
from estimator.core.schema import show

#: The ``format`` and ``version`` of the planner's scenario export (one definition: the
#: planner's export and import use these too).
EXPORT_FORMAT = "trainplan-scenario"
EXPORT_VERSION = 1
#: The scenario format an export of :data:`EXPORT_VERSION` holds.
SCENARIO_FORMAT_VERSION = 1


def scenario_of(data: Any) -> Any:
    """The scenario in ``data``: ``data`` itself, or the ``scenario`` of an export.

    A bare scenario (no ``format`` key) comes back untouched, for the validator to judge.
    An export's scenario without ``format_version`` is given the one its export version
    implies.

    Raises
    ------
    ScenarioError
        Naming ``format`` for another kind of document, ``version`` for an export version
        this estimator does not read, or ``scenario`` when the export holds no scenario.
    """
    if not isinstance(data, dict) or "format" not in data:
        return data
    if data["format"] != EXPORT_FORMAT:
        raise ScenarioError(
            "format",
            f"must be {EXPORT_FORMAT!r} (the planner's export), got {show(data['format'])}; "
            "a bare scenario has no 'format' key but 'format_version': 1",
        )
    if data.get("version") != EXPORT_VERSION:
        raise ScenarioError(
            "version",
            f"must be {EXPORT_VERSION} for a {EXPORT_FORMAT} document, got "
            f"{show(data.get('version'))}",
        )
    scenario = data.get("scenario")
    if not isinstance(scenario, dict):
        raise ScenarioError(
            "scenario", f"must be the exported scenario object, got {show(scenario)}"
        )
    return {"format_version": SCENARIO_FORMAT_VERSION, **scenario}
