"""The pricing API's viewset: the shared service viewset, with pricing admins as the writers."""

from __future__ import annotations

from lib.api import ServiceModelViewSet
from pricing.api.permissions import PricingAdminWrites


class PricingModelViewSet(ServiceModelViewSet):
    """Any signed-in user reads; pricing admins write through the pricing services."""

    permission_classes = [PricingAdminWrites]
