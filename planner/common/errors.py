"""Domain errors of the planner app.

Services raise these (never a web framework's exception); the API turns them into 400, 403
or 409 responses with the field at fault, the pages into form errors or messages. A refusal
by role is :class:`NotAllowed`: a planner error and the organisations app's refusal at once,
so ``except PlannerError`` and ``except organisations.errors.NotAllowed`` both catch it.
"""

from __future__ import annotations

from lib.errors import DomainError
from organisations import errors as organisation_errors

__all__ = [
    "NotAllowed",
    "PlannerError",
    "RunNotRetryable",
    "SeparationOfDuties",
    "TransitionRefused",
]


class PlannerError(DomainError):
    """A planning rule refused an operation; ``field`` names the input at fault, if any."""

    code = "planner_error"


class NotAllowed(PlannerError, organisation_errors.NotAllowed):
    """The user's role in the organisation does not allow the operation."""

    code = "not_allowed"
    kind = "forbidden"


class RunNotRetryable(PlannerError):
    """Only a failed run can be retried."""

    code = "run_not_retryable"
    kind = "conflict"


class TransitionRefused(PlannerError):
    """The budget request is not in a state that allows the transition (often: someone was
    first)."""

    code = "transition_refused"
    kind = "conflict"


class SeparationOfDuties(PlannerError):
    """The user created or edited the budget request, so may not decide on it."""

    code = "separation_of_duties"
    kind = "forbidden"
