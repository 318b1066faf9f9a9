"""The planner's service viewset: the shared service viewset with planner scoping.

Reads come from :mod:`planner.selectors` (``get_queryset`` of each viewset); writes parse
the input serializer, with the request in its context so ids resolve only among the user's
objects, and call one service. Domain errors become responses in
:func:`lib.api.exception_handler`, for every API view alike.
"""

from __future__ import annotations

from lib.api import ServiceModelViewSet
from planner.api.parsers import PLANNER_PARSERS
from planner.api.permissions import SignedIn


class PlannerModelViewSet(ServiceModelViewSet):
    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS
