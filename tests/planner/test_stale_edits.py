"""Edit pages opened before someone else saved: the later save says so instead of silently
overwriting, and a second save after review keeps the user's values."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from organisations.models import Organisation
from planner.scenarios.models import Project, Scenario

pytestmark = pytest.mark.django_db

STALE = "Changed by someone else since you opened it"


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _version(page: str) -> str:
    found = re.search(r'<input type="hidden" name="version" value="([^"]+)">', page)
    assert found, "the edit page carries the version it was opened at"
    return found.group(1)


def _project_form(organisation: Organisation, goal: str, version: str) -> dict[str, object]:
    return {
        "organisation": organisation.pk,
        "name": "Mixtral fine-tune",
        "goal": goal,
        "deadline": "2027-03-31",
        "budget_ceiling": "250000",
        "currency": "EUR",
        "version": version,
    }


def test_a_project_saved_by_someone_else_is_not_overwritten(
    requester: User, organisation: Organisation, project: Project
) -> None:
    url = reverse("planner:project-edit", args=[project.pk])
    maya, rosa = _client(requester), _client(requester)
    opened_by_maya = _version(maya.get(url).content.decode())
    opened_by_rosa = _version(rosa.get(url).content.decode())
    saved = rosa.post(url, _project_form(organisation, "Rosa's goal", opened_by_rosa))
    assert saved.status_code == 302
    stale = maya.post(url, _project_form(organisation, "Maya's goal", opened_by_maya))
    assert stale.status_code == 200
    page = stale.content.decode()
    assert STALE in page
    assert "Maya&#x27;s goal" in page  # what she entered stays on the page
    project.refresh_from_db()
    assert project.goal == "Rosa's goal"
    again = maya.post(url, _project_form(organisation, "Maya's goal", _version(page)))
    assert again.status_code == 302
    project.refresh_from_db()
    assert project.goal == "Maya's goal"


def test_the_scenario_json_editor_refuses_a_stale_save(requester: User, scenario: Scenario) -> None:
    url = reverse("planner:scenario-json", args=[scenario.pk])
    maya, rosa = _client(requester), _client(requester)
    opened = _version(maya.get(url).content.decode())
    rosa_version = _version(rosa.get(url).content.decode())
    spec = dict(scenario.spec)
    rosa_spec = {**spec, "training": {**spec["training"], "tokens": 3e11}}
    maya_spec = {**spec, "training": {**spec["training"], "tokens": 5e11}}
    assert (
        rosa.post(url, {"spec": json.dumps(rosa_spec), "version": rosa_version}).status_code == 302
    )
    stale = maya.post(url, {"spec": json.dumps(maya_spec), "version": opened})
    assert stale.status_code == 200
    assert STALE in stale.content.decode()
    scenario.refresh_from_db()
    assert scenario.spec["training"]["tokens"] == 3e11
