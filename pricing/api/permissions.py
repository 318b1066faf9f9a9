from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from planner.roles import PRICING_ADMIN, user_has_role


class PricingAdminWrites(BasePermission):
    """Any signed-in user reads; only pricing admins write (403 for everyone else)."""

    message = "Only pricing admins may change prices, quotes and hardware records."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or user_has_role(request.user, PRICING_ADMIN)
