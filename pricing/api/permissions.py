from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from pricing.access import may_change, may_edit_any

#: Actions that read the object they act on and write elsewhere (a copy into a draft).
READING_ACTIONS = frozenset({"copy"})


class PricingAdminWrites(BasePermission):
    """Any signed-in user reads what they see; writes need a pricing admin of the record's
    organisation (staff for public price books): 403 for everyone else.

    Records of organisations the user is not a member of are not in the viewsets' querysets,
    so they are a 404 before this is asked.
    """

    message = "Only pricing admins may change prices, quotes and hardware records."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or may_edit_any(request.user)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        if request.method in SAFE_METHODS or getattr(view, "action", None) in READING_ACTIONS:
            return True
        return may_change(request.user, obj)
