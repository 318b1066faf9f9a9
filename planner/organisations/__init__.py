"""Organisations, memberships and roles: the one module both the planner and the pricing
app ask who belongs where and who may do what.

Import from here (``from planner.organisations import Role, user_roles``), not from the
submodules; the models are registered in the planner app.
"""

from planner.organisations.models import Membership, Organisation, Role
from planner.organisations.selectors import (
    organisation_ids_for,
    organisations_for,
    user_holds_role,
    user_roles,
)
from planner.organisations.services import (
    MemberAdded,
    member_add,
    membership_grant,
    organisation_create,
    role_assert,
    role_check,
)

__all__ = [
    "MemberAdded",
    "Membership",
    "Organisation",
    "Role",
    "member_add",
    "membership_grant",
    "organisation_create",
    "organisation_ids_for",
    "organisations_for",
    "role_assert",
    "role_check",
    "user_holds_role",
    "user_roles",
]
