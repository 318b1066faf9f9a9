"""Every write of the scenarios room goes through these functions (``<entity>_<action>``).

They check the user's role in the organisation and raise
:class:`planner.common.errors.PlannerError` (never a web framework's exception). One module
per subject; every public name is re-exported here, so ``services.scenario_create`` works
wherever the function lives.
"""

from planner.scenarios.prices import price_snapshot
from planner.scenarios.services.comparisons import comparison_create
from planner.scenarios.services.projects import project_create, project_delete, project_update
from planner.scenarios.services.runs import run_execute, run_retry, run_start
from planner.scenarios.services.scenarios import (
    scenario_create,
    scenario_delete,
    scenario_duplicate,
    scenario_export,
    scenario_fit_note,
    scenario_from_lever,
    scenario_import,
    scenario_update,
)

__all__ = [
    "comparison_create",
    "price_snapshot",
    "project_create",
    "project_delete",
    "project_update",
    "run_execute",
    "run_retry",
    "run_start",
    "scenario_create",
    "scenario_delete",
    "scenario_duplicate",
    "scenario_export",
    "scenario_fit_note",
    "scenario_from_lever",
    "scenario_import",
    "scenario_update",
]
