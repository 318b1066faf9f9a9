"""Who may do what in an organisation: the role checks every planner service makes.

The checks themselves live in :mod:`organisations`, which the pricing app uses too.
"""

from __future__ import annotations

from organisations.models import Role
from organisations.selectors import user_roles
from organisations.services import role_assert

#: Roles that may write projects, scenarios and runs.
AUTHOR_ROLES = (Role.REQUESTER,)

__all__ = ["AUTHOR_ROLES", "role_assert", "user_roles"]
