"""The planner's models, gathered from its rooms.

Django loads an app's models from this module, so it imports each room's: a model defined in
``planner.scenarios.models`` belongs to the app ``planner`` all the same, with the tables it
always had. ``from planner.models import Scenario`` keeps working; each room's own
``models`` module is the place to import from. Organisations, memberships and roles are the
``organisations`` app's, re-exported here as they always were.
"""

from organisations.models import Membership, Organisation, Role
from planner.budgets.models import (
    TRANSITION_TOKEN,
    AuditEvent,
    BudgetDecision,
    BudgetRequest,
    BudgetRequestQuerySet,
    BudgetState,
    Notification,
    NotificationStatus,
    PackStatus,
    SignoffPack,
    StateChangeRefused,
)
from planner.capacity.models import (
    PLAN_FINISHED,
    CapacityPlan,
    CapacityPlanChunk,
    ChunkStatus,
    PlanStatus,
)
from planner.scenarios.models import (
    Comparison,
    EstimationRun,
    PriceSource,
    Project,
    RunState,
    RunStatus,
    Scenario,
)

__all__ = [
    "PLAN_FINISHED",
    "TRANSITION_TOKEN",
    "AuditEvent",
    "BudgetDecision",
    "BudgetRequest",
    "BudgetRequestQuerySet",
    "BudgetState",
    "CapacityPlan",
    "CapacityPlanChunk",
    "ChunkStatus",
    "Comparison",
    "EstimationRun",
    "Membership",
    "Notification",
    "NotificationStatus",
    "Organisation",
    "PackStatus",
    "PlanStatus",
    "PriceSource",
    "Project",
    "Role",
    "RunState",
    "RunStatus",
    "Scenario",
    "SignoffPack",
    "StateChangeRefused",
]
