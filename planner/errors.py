"""Domain errors of the planner app.

Services raise these (never a web framework's exception); the API turns them into 400, 403
or 409 responses with the field at fault, the pages into form errors or messages.
"""

from __future__ import annotations


class PlannerError(Exception):
    """A planning rule refused an operation; ``field`` names the input at fault, if any."""

    code = "planner_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotAllowed(PlannerError):
    """The user's role in the organisation does not allow the operation."""

    code = "not_allowed"


class RunNotRetryable(PlannerError):
    """Only a failed run can be retried."""

    code = "run_not_retryable"


class TransitionRefused(PlannerError):
    """The budget request is not in a state that allows the transition (often: someone was
    first)."""

    code = "transition_refused"


class SeparationOfDuties(PlannerError):
    """The user created or edited the budget request, so may not decide on it."""

    code = "separation_of_duties"
