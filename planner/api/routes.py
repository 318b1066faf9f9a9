"""The planner endpoints, registered on the project's one router in ``planner/api/urls.py``."""

from __future__ import annotations

from rest_framework.routers import BaseRouter

from planner.api import views

ROUTES = (
    ("organisations", views.OrganisationViewSet, "organisation"),
    ("projects", views.ProjectViewSet, "project"),
    ("scenarios", views.ScenarioViewSet, "scenario"),
    ("runs", views.RunViewSet, "run"),
    ("comparisons", views.ComparisonViewSet, "comparison"),
    ("budgets", views.BudgetRequestViewSet, "budget"),
    ("capacity-plans", views.CapacityPlanViewSet, "capacity-plan"),
)


def planner_routes_register(router: BaseRouter) -> None:
    for prefix, viewset, basename in ROUTES:
        router.register(prefix, viewset, basename=basename)
