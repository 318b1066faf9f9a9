"""Optimistic concurrency on the API (lib.api): an ETag on every object, If-Match honoured,
412 on a stale write, on the real database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from lib.api import etag_matches
from planner.scenarios.models import Project

pytestmark = pytest.mark.django_db


def _api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_two_users_editing_one_project_the_second_write_is_refused(
    requester: User, project: Project
) -> None:
    url = f"/api/v1/projects/{project.pk}/"
    first, second = _api(requester), _api(requester)
    read_first, read_second = first.get(url), second.get(url)
    assert read_first["ETag"] == read_second["ETag"]
    etag = read_first["ETag"]
    saved = first.patch(url, {"goal": "from the first"}, HTTP_IF_MATCH=etag)
    assert saved.status_code == 200
    assert saved["ETag"] != etag
    stale = second.patch(url, {"goal": "from the second"}, HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert stale.json()["code"] == "precondition_failed"
    assert saved["ETag"] in stale.json()["detail"]
    project.refresh_from_db()
    assert project.goal == "from the first"
    fresh = second.patch(url, {"goal": "from the second"}, HTTP_IF_MATCH=saved["ETag"])
    assert fresh.status_code == 200


def test_a_stale_delete_is_refused_and_a_write_without_if_match_applies(
    requester: User, project: Project
) -> None:
    url = f"/api/v1/projects/{project.pk}/"
    client = _api(requester)
    etag = client.get(url)["ETag"]
    assert client.patch(url, {"goal": "changed"}).status_code == 200  # no If-Match
    assert client.delete(url, HTTP_IF_MATCH=etag).status_code == 412
    assert Project.objects.filter(pk=project.pk).exists()


@pytest.mark.parametrize(
    ("header", "matches"),
    [('"abc"', True), ('"x", "abc"', True), ("*", True), ('W/"abc"', False), ('"abd"', False)],
)
def test_if_match_compares_strongly(header: str, matches: bool) -> None:
    assert etag_matches(header, '"abc"') is matches
