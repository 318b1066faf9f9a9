"""Every write of the planner app goes through these functions (``<entity>_<action>``).

They check the user's role in the organisation and raise
:class:`planner.common.errors.PlannerError` (never a web framework's exception).
"""

from organisations.services import membership_grant, organisation_create
from planner.common.access import role_assert, user_roles
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
    "membership_grant",
    "organisation_create",
    "role_assert",
    "user_roles",
]
