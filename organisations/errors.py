"""Errors of organisations and memberships.

:class:`NotAllowed` is the refusal every app raises when a user's role in an organisation
does not allow an operation; the planner raises it too (:mod:`planner.common.errors` re-exports it).
"""

from __future__ import annotations

from lib.errors import DomainError


class OrganisationError(DomainError):
    """An organisation or membership rule refused an operation."""

    code = "organisation_error"


class NotAllowed(DomainError):
    """The user's role in the organisation does not allow the operation."""

    code = "not_allowed"
    kind = "forbidden"
