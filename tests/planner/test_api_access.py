"""Who sees and writes what: members read, viewers cannot write, other organisations 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from organisations.models import Organisation
from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
from planner.scenarios.services import comparison_create, project_create
from tests.planner.conftest import finished_run, list_price, scenario_add, small_spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(requester: User, scenario: Scenario) -> EstimationRun:
    return finished_run(scenario, requester)


@pytest.fixture
def comparison(requester: User, scenario: Scenario) -> Comparison:
    second = scenario_add(scenario.project, requester, "on 128", 128)
    return comparison_create(
        user=requester, project=scenario.project, name="sizes", scenarios=[scenario, second]
    )


def _state() -> tuple[Any, ...]:
    return (
        list(Project.objects.values_list("id", "name", "goal").order_by("id")),
        list(Scenario.objects.values_list("id", "name", "spec").order_by("id")),
        EstimationRun.objects.count(),
        Comparison.objects.count(),
    )


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/organisations/",
        "/api/v1/projects/",
        "/api/v1/scenarios/",
        "/api/v1/runs/",
        "/api/v1/comparisons/",
    ],
)
def test_api_needs_authentication(url: str, db: None) -> None:
    assert APIClient().get(url).status_code in (401, 403)
    assert APIClient().post(url, {}).status_code in (401, 403)


def test_a_viewer_reads_but_every_write_is_a_403_and_writes_nothing(
    viewer_api: APIClient,
    organisation: Organisation,
    project: Project,
    scenario: Scenario,
    run: EstimationRun,
) -> None:
    assert viewer_api.get(f"/api/v1/projects/{project.pk}/").status_code == 200
    assert viewer_api.get(f"/api/v1/runs/{run.pk}/").status_code == 200
    document = viewer_api.get(f"/api/v1/scenarios/{scenario.pk}/export/").json()
    before = _state()
    scenario_body = {
        "project": project.pk,
        "name": "viewer's",
        "spec": small_spec(),
        "price_source": "price_entry",
        "price_entry": list_price("H100-SXM").pk,
    }
    writes = [
        ("post", "/api/v1/projects/", {"organisation": organisation.pk, "name": "Viewer's"}),
        ("patch", f"/api/v1/projects/{project.pk}/", {"goal": "changed"}),
        ("delete", f"/api/v1/projects/{project.pk}/", None),
        ("post", "/api/v1/scenarios/", scenario_body),
        ("patch", f"/api/v1/scenarios/{scenario.pk}/", {"name": "changed"}),
        ("put", f"/api/v1/scenarios/{scenario.pk}/", scenario_body),
        ("delete", f"/api/v1/scenarios/{scenario.pk}/", None),
        ("post", f"/api/v1/projects/{project.pk}/scenarios/import/", document | {"name": "v"}),
        ("post", f"/api/v1/scenarios/{scenario.pk}/runs/", {"samples": 500}),
        ("post", f"/api/v1/runs/{run.pk}/retry/", None),
    ]
    for method, url, payload in writes:
        response = getattr(viewer_api, method)(url, payload)
        assert response.status_code == 403, (method, url, response.content)
        assert "Only a requester of Acme AI Research may" in response.json()["detail"]
    assert _state() == before


def test_another_organisation_sees_nothing_and_gets_404(
    outsider_api: APIClient,
    organisation: Organisation,
    project: Project,
    scenario: Scenario,
    run: EstimationRun,
    comparison: Comparison,
) -> None:
    before = _state()
    for url in ["/api/v1/projects/", "/api/v1/scenarios/", "/api/v1/runs/", "/api/v1/comparisons/"]:
        assert outsider_api.get(url).json()["count"] == 0, url
    assert [o["name"] for o in outsider_api.get("/api/v1/organisations/").json()["results"]] == [
        "Globex Labs"
    ]
    hidden = [
        ("get", f"/api/v1/organisations/{organisation.pk}/", None),
        ("get", f"/api/v1/projects/{project.pk}/", None),
        ("patch", f"/api/v1/projects/{project.pk}/", {"name": "mine"}),
        ("delete", f"/api/v1/projects/{project.pk}/", None),
        ("get", f"/api/v1/scenarios/{scenario.pk}/", None),
        ("patch", f"/api/v1/scenarios/{scenario.pk}/", {"name": "mine"}),
        ("delete", f"/api/v1/scenarios/{scenario.pk}/", None),
        ("get", f"/api/v1/scenarios/{scenario.pk}/export/", None),
        ("get", f"/api/v1/scenarios/{scenario.pk}/runs/", None),
        ("post", f"/api/v1/scenarios/{scenario.pk}/runs/", {}),
        ("post", f"/api/v1/projects/{project.pk}/scenarios/import/", {"format": "x"}),
        ("get", f"/api/v1/runs/{run.pk}/", None),
        ("post", f"/api/v1/runs/{run.pk}/retry/", None),
        ("get", f"/api/v1/comparisons/{comparison.pk}/", None),
    ]
    for method, url, payload in hidden:
        response = getattr(outsider_api, method)(url, payload)
        assert response.status_code == 404, (method, url)
        assert scenario.name not in response.content.decode()
    assert _state() == before


def test_another_organisations_ids_in_input_are_a_400_and_write_nothing(
    outsider: User,
    outsider_api: APIClient,
    other_organisation: Organisation,
    organisation: Organisation,
    project: Project,
    scenario: Scenario,
    comparison: Comparison,
) -> None:
    own = project_create(user=outsider, organisation=other_organisation, name="Globex 1")
    mine = scenario_add(own, outsider, "mine", 64)
    before = _state()
    attempts = [
        ("/api/v1/projects/", {"organisation": organisation.pk, "name": "sneaky"}, "organisation"),
        (
            "/api/v1/scenarios/",
            {
                "project": project.pk,
                "name": "sneaky",
                "spec": small_spec(),
                "price_source": "price_entry",
                "price_entry": list_price("H100-SXM").pk,
            },
            "project",
        ),
        (
            "/api/v1/comparisons/",
            {"project": project.pk, "name": "sneaky", "scenarios": [scenario.pk, mine.pk]},
            "project",
        ),
        (
            "/api/v1/comparisons/",
            {"project": own.pk, "name": "sneaky", "scenarios": [mine.pk, scenario.pk]},
            "scenarios",
        ),
    ]
    for url, payload, field in attempts:
        response = outsider_api.post(url, payload)
        assert response.status_code == 400, (url, response.content)
        assert "does not exist" in " ".join(response.json()[field])
    for query in (f"projects/?organisation={organisation.pk}", f"scenarios/?project={project.pk}"):
        assert outsider_api.get(f"/api/v1/{query}").status_code == 400
    assert _state() == before


def test_schema_documents_the_planner_endpoints(client: Client, requester: User) -> None:
    client.force_login(requester)
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = response.content.decode()
    for path in (
        "/api/v1/organisations/",
        "/api/v1/scenarios/{id}/runs/",
        "/api/v1/runs/{id}/retry/",
        "/api/v1/projects/{id}/scenarios/import/",
        "/api/v1/comparisons/{id}/",
    ):
        assert path in schema
    for component in ("ScenarioInput", "RunOutput", "ComparisonRowOutput", "ScenarioDocument"):
        assert component in schema


def test_ids_out_of_any_range_are_a_404_or_a_400_naming_the_field(
    requester_api: APIClient, project: Project, scenario: Scenario
) -> None:
    huge = 10**30
    for url in (f"/api/v1/scenarios/{huge}/", f"/api/v1/runs/{huge}/", "/api/v1/projects/-5/"):
        assert requester_api.get(url).status_code == 404, url
    assert "project" in requester_api.get(f"/api/v1/scenarios/?project={huge}").json()
    response = requester_api.post(
        "/api/v1/comparisons/",
        {"project": project.pk, "name": "c", "scenarios": [scenario.pk, huge]},
    )
    assert response.status_code == 400
    assert "does not exist" in response.json()["scenarios"][0]
    runs = requester_api.post(f"/api/v1/scenarios/{scenario.pk}/runs/", {"samples": huge})
    assert runs.status_code == 400
    assert "samples" in runs.json()
