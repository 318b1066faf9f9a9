"""Every address of the planner, room by room.

``urlpatterns`` are its pages (projects, scenarios, runs, comparisons, capacity, budget
requests, API tokens), under the namespace ``planner``. ``api_urlpatterns`` (the token
endpoints) and the viewsets :func:`planner_routes_register` adds to the project's one router
are its REST API, which ``trainplan/api_urls.py`` serves under ``/api/v1/``.
"""

from django.urls import path
from rest_framework.routers import BaseRouter

from planner.accounts import api as accounts_api
from planner.accounts import views as accounts
from planner.budgets import api as budgets_api
from planner.budgets import views as budgets
from planner.capacity import api as capacity_api
from planner.capacity import views as capacity
from planner.scenarios import api as scenarios_api
from planner.scenarios.views import comparisons, projects, run_diff, runs, scenarios

app_name = "planner"
urlpatterns = [
    path("projects/", projects.project_list, name="project-list"),
    path("projects/new/", projects.project_create, name="project-create"),
    path("projects/<int:pk>/", projects.project_detail, name="project-detail"),
    path("projects/<int:pk>/edit/", projects.project_edit, name="project-edit"),
    path("projects/<int:pk>/delete/", projects.project_delete, name="project-delete"),
    path("projects/<int:pk>/scenarios/new/", scenarios.scenario_create, name="scenario-create"),
    path("projects/<int:pk>/scenarios/import/", scenarios.scenario_import, name="scenario-import"),
    path("projects/<int:pk>/compare/", comparisons.project_compare, name="project-compare"),
    path("scenarios/<int:pk>/", scenarios.scenario_detail, name="scenario-detail"),
    path("scenarios/<int:pk>/edit/", scenarios.scenario_edit, name="scenario-edit"),
    path("scenarios/<int:pk>/delete/", scenarios.scenario_delete, name="scenario-delete"),
    path("scenarios/<int:pk>/duplicate/", scenarios.scenario_duplicate, name="scenario-duplicate"),
    path("scenarios/<int:pk>/json/", scenarios.scenario_json_edit, name="scenario-json"),
    path("scenarios/<int:pk>/export.json", scenarios.scenario_export, name="scenario-export"),
    path("scenarios/<int:pk>/run/", runs.run_start, name="run-start"),
    path("runs/<int:pk>/", runs.run_detail, name="run-detail"),
    path("runs/<int:pk>/status.json", runs.run_status, name="run-status"),
    path("runs/<int:pk>/retry/", runs.run_retry, name="run-retry"),
    path("runs/<int:pk>/diff/", run_diff.run_diff_page, name="run-diff"),
    path(
        "runs/<int:pk>/levers/<int:index>/apply/",
        runs.run_lever_apply,
        name="run-lever-apply",
    ),
    path("comparisons/<int:pk>/", comparisons.comparison_detail, name="comparison-detail"),
    path("compare/", comparisons.cross_project_compare, name="compare"),
    path("capacity/", capacity.capacity_plan_list, name="capacity"),
    path("capacity/<int:pk>/", capacity.capacity_plan_detail, name="capacity-plan-detail"),
    path(
        "capacity/<int:pk>/status.json",
        capacity.capacity_plan_status,
        name="capacity-plan-status",
    ),
    path("capacity/<int:pk>/cancel/", capacity.capacity_plan_cancel, name="capacity-plan-cancel"),
    path("capacity/<int:pk>/rerun/", capacity.capacity_plan_rerun, name="capacity-plan-rerun"),
    path(
        "capacity/<int:pk>/scenario/",
        capacity.capacity_plan_scenario,
        name="capacity-plan-scenario",
    ),
    path("runs/<int:run_pk>/request-budget/", budgets.budget_create, name="budget-create"),
    path("budgets/", budgets.budget_list, name="budget-list"),
    path("budgets/<int:pk>/", budgets.budget_detail, name="budget-detail"),
    path("budgets/<int:pk>/edit/", budgets.budget_edit, name="budget-edit"),
    path("budgets/<int:pk>/submit/", budgets.budget_submit, name="budget-submit"),
    path("budgets/<int:pk>/approve/", budgets.budget_approve, name="budget-approve"),
    path("budgets/<int:pk>/reject/", budgets.budget_reject, name="budget-reject"),
    path(
        "budgets/<int:pk>/request-changes/",
        budgets.budget_request_changes,
        name="budget-request-changes",
    ),
    path("budgets/<int:pk>/close/", budgets.budget_close, name="budget-close"),
    path("budgets/<int:pk>/signoff.pdf", budgets.budget_pdf, name="budget-pdf"),
    path("budgets/<int:pk>/signoff.xlsx", budgets.budget_xlsx, name="budget-xlsx"),
    path("budgets/<int:pk>/signoff.csv", budgets.budget_csv, name="budget-csv"),
    path("budgets/<int:pk>/snapshot.json", budgets.budget_snapshot, name="budget-snapshot"),
    path("accounts/tokens/", accounts.token_list, name="token-list"),
    path("accounts/tokens/new/", accounts.token_create, name="token-create"),
    path("accounts/tokens/revoke-all/", accounts.tokens_revoke_all, name="tokens-revoke-all"),
    path("accounts/tokens/<str:token_id>/revoke/", accounts.token_revoke, name="token-revoke"),
]

api_urlpatterns = [
    path("auth/token/", accounts_api.TokenObtainView.as_view(), name="api-token"),
    path("auth/tokens/", accounts_api.TokenListView.as_view(), name="api-token-list"),
    path(
        "auth/tokens/<str:token_id>/",
        accounts_api.TokenDetailView.as_view(),
        name="api-token-detail",
    ),
    path("auth/logout/", accounts_api.LogoutView.as_view(), name="api-logout"),
    path("auth/logout-all/", accounts_api.LogoutAllView.as_view(), name="api-logout-all"),
]

API_ROUTES = (
    ("organisations", scenarios_api.OrganisationViewSet, "organisation"),
    ("projects", scenarios_api.ProjectViewSet, "project"),
    ("scenarios", scenarios_api.ScenarioViewSet, "scenario"),
    ("runs", scenarios_api.RunViewSet, "run"),
    ("comparisons", scenarios_api.ComparisonViewSet, "comparison"),
    ("budgets", budgets_api.BudgetRequestViewSet, "budget"),
    ("capacity-plans", capacity_api.CapacityPlanViewSet, "capacity-plan"),
)


def planner_routes_register(router: BaseRouter) -> None:
    """Register the planner's viewsets on the project's router, in the API root's order."""
    for prefix, viewset, basename in API_ROUTES:
        router.register(prefix, viewset, basename=basename)
