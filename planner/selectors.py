"""Reads of the planner app, always scoped to the organisations the user belongs to.

A user who is not a member of an object's organisation cannot tell it exists: the
querysets below simply do not contain it, so views answer 404.
"""

from __future__ import annotations

from django.db.models import QuerySet

from lib.actors import Actor
from organisations.selectors import organisations_for
from planner.models import CapacityPlan


def capacity_plans_for(user: Actor) -> QuerySet[CapacityPlan]:
    """The capacity plans of the user's organisations, newest first."""
    return CapacityPlan.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "project", "created_by"
    )
