"""The roles a TrainPlan user can hold: names of :class:`organisations.Role`.

A role is held per organisation, as a membership (:func:`organisations.user_roles`
checks it). The Django groups of the same names only carry the admin site's model
permissions (the ``pricing_admin`` group may open the pricing models there); they grant
nothing in the pages or the API.
"""

from __future__ import annotations

from lib.actors import Actor
from organisations.models import Role

REQUESTER = Role.REQUESTER.value
APPROVER = Role.APPROVER.value
PRICING_ADMIN = Role.PRICING_ADMIN.value
VIEWER = Role.VIEWER.value
ALL_ROLES = (REQUESTER, APPROVER, PRICING_ADMIN, VIEWER)


def user_has_role(user: Actor, role: str) -> bool:
    """Whether ``user`` is in the Django group ``role`` (superusers are in every one).

    Only for the admin site's model permissions: what a user may do in an organisation is
    their membership there (:func:`organisations.user_roles`).
    """
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name=role).exists()
