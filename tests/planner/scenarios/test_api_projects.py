"""Organisations and projects over the API: the user's own data, field-level 400s."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import ProtectedError
from rest_framework.test import APIClient

from lib.api import protected_response
from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.scenarios.models import Project
from planner.scenarios.services import project_create
from tests.planner.conftest import api_client

pytestmark = pytest.mark.django_db

PROJECTS = "/api/v1/projects/"


def _project_payload(organisation: Organisation, **changes: Any) -> dict[str, Any]:
    return {
        "organisation": organisation.pk,
        "name": "Mixtral pre-training",
        "goal": "An 8x7B MoE on 1T tokens",
        "deadline": "2026-12-31",
        "budget_ceiling": "2500000.00",
        "currency": "USD",
    } | changes


def test_organisations_lists_only_the_users_with_their_roles(
    requester: User, organisation: Organisation, other_organisation: Organisation
) -> None:
    membership_grant(organisation=organisation, user=requester, role=Role.APPROVER)
    body = api_client(requester).get("/api/v1/organisations/").json()
    assert body["count"] == 1
    (row,) = body["results"]
    assert (row["id"], row["name"], row["base_currency"]) == (
        organisation.pk,
        organisation.name,
        "USD",
    )
    assert row["roles"] == ["approver", "requester"]


def test_organisations_of_another_are_a_404(
    requester_api: APIClient, other_organisation: Organisation
) -> None:
    assert requester_api.get(f"/api/v1/organisations/{other_organisation.pk}/").status_code == 404


def test_organisations_are_read_only(requester_api: APIClient, organisation: Organisation) -> None:
    assert requester_api.post("/api/v1/organisations/", {"name": "New"}).status_code == 405
    assert requester_api.delete(f"/api/v1/organisations/{organisation.pk}/").status_code == 405


def test_project_create_returns_it_and_its_owner(
    requester_api: APIClient, organisation: Organisation
) -> None:
    response = requester_api.post(PROJECTS, _project_payload(organisation))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["owner"], body["organisation"]) == (
        "Mixtral pre-training",
        "maya",
        organisation.pk,
    )
    assert (body["budget_ceiling"], body["deadline"]) == ("2500000.00", "2026-12-31")
    project = Project.objects.get(pk=body["id"])
    assert project.owner.username == "maya"
    assert (
        requester_api.get(f"{PROJECTS}{project.pk}/").json()["goal"] == "An 8x7B MoE on 1T tokens"
    )


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"name": ""}, "name", "may not be blank"),
        ({"name": "   "}, "name", "may not be blank"),
        ({"name": "Llama 3 8B pre-training"}, "name", "exists"),
        ({"currency": "DOLLARS"}, "currency", "no more than 3"),
        ({"currency": "XYZ"}, "currency", ""),
        ({"budget_ceiling": "-5"}, "budget_ceiling", "must be positive"),
        ({"budget_ceiling": "lots"}, "budget_ceiling", "valid number"),
        ({"deadline": "2026-02-30"}, "deadline", "wrong format"),
        ({"organisation": "acme"}, "organisation", "Incorrect type"),
        ({"organisation": 999_999}, "organisation", "does not exist"),
    ],
)
def test_project_bad_input_is_a_400_naming_the_field(
    requester_api: APIClient,
    organisation: Organisation,
    project: Project,
    changes: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    response = requester_api.post(PROJECTS, _project_payload(organisation) | changes)
    assert response.status_code == 400
    body = response.json()
    assert field in body, body
    assert reason in " ".join(body[field])
    assert Project.objects.count() == 1


def test_project_in_another_organisation_cannot_be_created(
    requester_api: APIClient, other_organisation: Organisation
) -> None:
    response = requester_api.post(PROJECTS, _project_payload(other_organisation))
    assert response.status_code == 400
    assert "does not exist" in response.json()["organisation"][0]
    assert not Project.objects.exists()


def test_project_malformed_json_is_a_400(requester_api: APIClient) -> None:
    response = requester_api.generic(
        "POST", PROJECTS, '{"name": "x", ', content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    assert requester_api.post(PROJECTS, [1, 2], format="json").status_code == 400


def test_project_update_and_delete(requester_api: APIClient, project: Project) -> None:
    url = f"{PROJECTS}{project.pk}/"
    renamed = requester_api.patch(url, {"name": "Llama 3 8B, second try", "budget_ceiling": "9"})
    assert renamed.status_code == 200, renamed.json()
    project.refresh_from_db()
    assert (project.name, str(project.budget_ceiling)) == ("Llama 3 8B, second try", "9.00")
    assert requester_api.patch(url, {"currency": "EURO"}).status_code == 400
    assert requester_api.delete(url).status_code == 204
    assert not Project.objects.filter(pk=project.pk).exists()


def test_project_rename_to_a_taken_name_is_a_400(
    requester: User, requester_api: APIClient, project: Project
) -> None:
    other = project_create(user=requester, organisation=project.organisation, name="Other")
    response = requester_api.patch(f"{PROJECTS}{other.pk}/", {"name": project.name})
    assert response.status_code == 400
    assert "exists" in response.json()["name"][0]
    other.refresh_from_db()
    assert other.name == "Other"


def test_project_list_filters_by_organisation(
    requester: User,
    requester_api: APIClient,
    project: Project,
    organisation: Organisation,
    other_organisation: Organisation,
) -> None:
    body = requester_api.get(f"{PROJECTS}?organisation={organisation.pk}").json()
    assert [row["id"] for row in body["results"]] == [project.pk]
    foreign = requester_api.get(f"{PROJECTS}?organisation={other_organisation.pk}")
    assert foreign.status_code == 400
    assert "organisation" in foreign.json()


def test_project_list_runs_a_fixed_number_of_queries(
    requester: User,
    requester_api: APIClient,
    organisation: Organisation,
    django_assert_max_num_queries: Any,
) -> None:
    for number in range(12):
        project_create(user=requester, organisation=organisation, name=f"Project {number}")
    # One count for the pagination, one select joining organisation and owner.
    with django_assert_max_num_queries(2):
        response = requester_api.get(PROJECTS)
    assert response.json()["count"] == 12


def test_a_superuser_sees_every_organisation_with_every_role(
    organisation: Organisation, other_organisation: Organisation
) -> None:
    admin = User.objects.create_superuser("root", password="root-pass")
    body = api_client(admin).get("/api/v1/organisations/").json()
    assert [row["name"] for row in body["results"]] == ["Acme AI Research", "Globex Labs"]
    assert all(row["roles"] == sorted(Role.values) for row in body["results"])


def test_a_delete_refused_by_a_protected_reference_is_a_409(project: Project) -> None:
    error = ProtectedError("in use", {project})
    response = protected_response(error)
    assert response.status_code == 409
    assert response.data == {
        "detail": "still used by project; remove those first",
        "code": "protected",
    }
