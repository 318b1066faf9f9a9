"""The planner endpoints, registered on the project's one router in ``planner/api/urls.py``."""

from __future__ import annotations

from rest_framework.routers import BaseRouter

from planner.budgets import api as budgets
from planner.capacity import api as capacity
from planner.scenarios import api as scenarios

ROUTES = (
    ("organisations", scenarios.OrganisationViewSet, "organisation"),
    ("projects", scenarios.ProjectViewSet, "project"),
    ("scenarios", scenarios.ScenarioViewSet, "scenario"),
    ("runs", scenarios.RunViewSet, "run"),
    ("comparisons", scenarios.ComparisonViewSet, "comparison"),
    ("budgets", budgets.BudgetRequestViewSet, "budget"),
    ("capacity-plans", capacity.CapacityPlanViewSet, "capacity-plan"),
)


def planner_routes_register(router: BaseRouter) -> None:
    for prefix, viewset, basename in ROUTES:
        router.register(prefix, viewset, basename=basename)
