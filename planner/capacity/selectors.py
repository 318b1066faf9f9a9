"""Reads of the capacity room, scoped to the organisations the user belongs to."""

from __future__ import annotations

from django.db.models import QuerySet

from lib.actors import Actor
from organisations.selectors import organisations_for
from planner.capacity.models import CapacityPlan


def capacity_plans_for(user: Actor) -> QuerySet[CapacityPlan]:
    """The capacity plans of the user's organisations, newest first."""
    return CapacityPlan.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "project", "created_by"
    )
