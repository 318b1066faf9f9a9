"""Every write of the planner app goes through these functions (``<entity>_<action>``).

They check the user's role in the organisation and raise
:class:`planner.common.errors.PlannerError` (never a web framework's exception).
"""

from organisations.services import membership_grant, organisation_create
from planner.common.access import role_assert, user_roles
from planner.scenarios.services.runs import run_execute, run_retry, run_start
from planner.services.budgets import (
    SeparationOfDuties,
    TransitionRefused,
    budget_request_approve,
    budget_request_close,
    budget_request_create,
    budget_request_reject,
    budget_request_request_changes,
    budget_request_submit,
    budget_request_update,
)
from planner.services.comparisons import comparison_create
from planner.services.projects import (
    project_create,
    project_delete,
    project_update,
)
from planner.services.scenarios import (
    price_snapshot,
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
    "SeparationOfDuties",
    "TransitionRefused",
    "budget_request_approve",
    "budget_request_close",
    "budget_request_create",
    "budget_request_reject",
    "budget_request_request_changes",
    "budget_request_submit",
    "budget_request_update",
    "comparison_create",
    "membership_grant",
    "organisation_create",
    "price_snapshot",
    "project_create",
    "project_delete",
    "project_update",
    "role_assert",
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
    "user_roles",
]
