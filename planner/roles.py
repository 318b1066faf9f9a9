"""The roles a TrainPlan user can hold, as Django groups.

Requesters write proposals and budget requests, approvers sign budgets off, pricing admins
maintain price books and quotes, viewers only read.
"""

from __future__ import annotations

from planner.lib.actors import Actor

REQUESTER = "requester"
APPROVER = "approver"
PRICING_ADMIN = "pricing_admin"
VIEWER = "viewer"
ALL_ROLES = (REQUESTER, APPROVER, PRICING_ADMIN, VIEWER)


def user_has_role(user: Actor, role: str) -> bool:
    """Superusers hold every role; others hold the roles of their groups."""
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name=role).exists()
