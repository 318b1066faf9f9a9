"""The base of both apps' domain errors: a refused operation, the field at fault, its kind.

Services raise subclasses (:class:`planner.common.errors.PlannerError`,
:class:`pricing.errors.PricingError`), never a web framework's exception. The ``kind`` says
what went wrong in the domain's words; :mod:`lib.api` turns it into an HTTP status,
the pages into a form error or a message.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

#: invalid: the input breaks a rule (400); forbidden: the user's role or part in the
#: record does not allow it (403); conflict: the record's state refuses it now (409).
ErrorKind = Literal["invalid", "forbidden", "conflict"]


class DomainError(Exception):
    """A rule refused an operation; ``field`` names the input at fault, if any."""

    code: ClassVar[str] = "domain_error"
    kind: ClassVar[ErrorKind] = "invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def details(self) -> dict[str, Any]:
        """Structured detail beyond the message (e.g. one row per CSV problem); JSON-safe."""
        return {}
