"""Pages of the planner: projects, scenarios, estimation runs, comparisons, capacity."""

from django.urls import path

from planner.views import capacity, comparisons, projects, runs, scenarios

app_name = "planner"
urlpatterns = [
    path("projects/", projects.project_list, name="project-list"),
    path("projects/new/", projects.project_create, name="project-create"),
    path("projects/<int:pk>/", projects.project_detail, name="project-detail"),
    path("projects/<int:pk>/scenarios/new/", scenarios.scenario_create, name="scenario-create"),
    path("projects/<int:pk>/scenarios/import/", scenarios.scenario_import, name="scenario-import"),
    path("projects/<int:pk>/compare/", comparisons.project_compare, name="project-compare"),
    path("scenarios/<int:pk>/", scenarios.scenario_detail, name="scenario-detail"),
    path("scenarios/<int:pk>/edit/", scenarios.scenario_edit, name="scenario-edit"),
    path("scenarios/<int:pk>/json/", scenarios.scenario_json_edit, name="scenario-json"),
    path("scenarios/<int:pk>/export.json", scenarios.scenario_export, name="scenario-export"),
    path("scenarios/<int:pk>/run/", runs.run_start, name="run-start"),
    path("runs/<int:pk>/", runs.run_detail, name="run-detail"),
    path("runs/<int:pk>/status.json", runs.run_status, name="run-status"),
    path("runs/<int:pk>/retry/", runs.run_retry, name="run-retry"),
    path("comparisons/<int:pk>/", comparisons.comparison_detail, name="comparison-detail"),
    path("capacity/", capacity.capacity_plan_page, name="capacity"),
]
