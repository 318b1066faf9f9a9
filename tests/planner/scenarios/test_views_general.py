"""The home page, the demo logins, and every page as a member, a viewer and an outsider see it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from organisations.models import Organisation
from planner.common.roles import APPROVER, REQUESTER, user_has_role
from planner.demo import DEMO_USERS, demo_users_load
from planner.scenarios.models import Comparison, EstimationRun, Scenario
from planner.scenarios.services import comparison_create, project_create
from tests.planner.conftest import (
    Capture,
    _add_scenario,
    _budget,
    _client,
    _finished_run,
    list_price,
)

pytestmark = pytest.mark.django_db


# --- The home page and demo logins (kept from before the planner pages) ---------------------


def test_home_page_offers_login_to_anonymous_visitors(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_demo_users_log_in_with_the_printed_passwords(client: Client) -> None:
    demo_users_load()
    for demo in DEMO_USERS:
        response = client.post(
            "/accounts/login/", {"username": demo.username, "password": demo.password}
        )
        assert response.status_code == 302, demo.username
        assert client.get("/").context["user"].username == demo.username
        client.post("/accounts/logout/")


def test_demo_load_is_idempotent_and_assigns_roles() -> None:
    demo_users_load()
    demo_users_load()
    assert User.objects.filter(username__in=[d.username for d in DEMO_USERS]).count() == len(
        DEMO_USERS
    )
    requester = User.objects.get(username="maya")
    assert user_has_role(requester, REQUESTER)
    assert not user_has_role(requester, APPROVER)


def test_wrong_password_shows_an_error(client: Client) -> None:
    demo_users_load()
    response = client.post("/accounts/login/", {"username": "maya", "password": "wrong"})
    assert response.status_code == 200
    assert b"didn't match" in response.content


# --- Every page renders for a member; other organisations see nothing ---------------------


@pytest.fixture
def comparison(estimated: EstimationRun, scenario: Scenario, requester: User) -> Comparison:
    other = _add_scenario(
        requester, scenario.project, "A100 list price", "A100-80GB-SXM", 64,
        list_price("A100-80GB-SXM", provider="aws"),
    )  # fmt: skip
    return comparison_create(
        user=requester, project=scenario.project, name="H100 or A100", scenarios=[scenario, other]
    )


def _pages(run: EstimationRun, comparison: Comparison) -> dict[str, str]:
    scenario, project = run.scenario, run.scenario.project
    return {
        "dashboard": reverse("home"),
        "project list": reverse("planner:project-list"),
        "project": reverse("planner:project-detail", args=[project.pk]),
        "scenario": reverse("planner:scenario-detail", args=[scenario.pk]),
        "scenario export": reverse("planner:scenario-export", args=[scenario.pk]),
        "run": reverse("planner:run-detail", args=[run.pk]),
        "run status": reverse("planner:run-status", args=[run.pk]),
        "compare": reverse("planner:project-compare", args=[project.pk])
        + "".join(
            f"{'&' if i else '?'}scenario={s.pk}" for i, s in enumerate(comparison.scenarios.all())
        ),
        "comparison": reverse("planner:comparison-detail", args=[comparison.pk]),
        "capacity": reverse("planner:capacity"),
    }


AUTHOR_PAGES = (
    "project-create",
    "project-edit",
    "project-delete",
    "scenario-create",
    "scenario-import",
    "scenario-edit",
    "scenario-json",
    "scenario-delete",
)
PROJECT_AUTHOR_PAGES = ("project-edit", "project-delete", "scenario-create", "scenario-import")


def _author_page(name: str, run: EstimationRun) -> str:
    target = run.scenario.project.pk if name in PROJECT_AUTHOR_PAGES else run.scenario.pk
    return (
        reverse(f"planner:{name}")
        if name == "project-create"
        else reverse(f"planner:{name}", args=[target])
    )


def test_every_page_renders_for_a_requester(
    requester: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(requester)
    for name, url in _pages(estimated, comparison).items():
        assert client.get(url).status_code == 200, name
    for name in AUTHOR_PAGES:
        assert client.get(_author_page(name, estimated)).status_code == 200, name


def test_a_viewer_reads_every_page_but_is_refused_the_forms(
    viewer: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(viewer)
    for name, url in _pages(estimated, comparison).items():
        assert client.get(url).status_code == 200, name
    for name in AUTHOR_PAGES:
        response = client.get(_author_page(name, estimated))
        assert response.status_code == 403, name
        assert b"requester" in response.content


def test_another_organisation_gets_404_everywhere(
    outsider: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(outsider)
    pages = _pages(estimated, comparison)
    for name in (
        "project",
        "scenario",
        "scenario export",
        "run",
        "run status",
        "compare",
        "comparison",
    ):
        assert client.get(pages[name]).status_code == 404, name
    for name in AUTHOR_PAGES[1:]:
        assert client.get(_author_page(name, estimated)).status_code == 404, name
    run_page = reverse("planner:run-start", args=[estimated.scenario.pk])
    assert client.post(run_page).status_code == 404
    assert client.post(reverse("planner:run-retry", args=[estimated.pk])).status_code == 404
    assert estimated.scenario.runs.count() == 1


def test_the_dashboard_shows_only_the_users_projects(
    requester: User, outsider: User, estimated: EstimationRun, other_organisation: Organisation
) -> None:
    project_create(user=outsider, organisation=other_organisation, name="Globex secret model")
    body = _client(requester).get("/").content.decode()
    assert estimated.scenario.project.name in body
    assert "Globex secret model" not in body
    cost = Decimal(_budget(estimated)["cost"]["p50"])
    assert f"{cost:,.0f}" in body  # the latest figure, in the project's currency


def test_the_dashboard_makes_as_many_queries_for_three_projects_as_for_one(
    requester: User,
    organisation: Organisation,
    estimated: EstimationRun,
    django_capture_on_commit_callbacks: Capture,
    django_assert_num_queries: Any,
) -> None:
    client = _client(requester)
    with CaptureQueriesContext(connection) as one:
        client.get("/")
    for name in ("Second model", "Third model"):
        project = project_create(user=requester, organisation=organisation, name=name)
        scenario = _add_scenario(requester, project, "H100", "H100-SXM", 64, list_price("H100-SXM"))
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    with django_assert_num_queries(len(one.captured_queries)):
        body = client.get("/").content.decode()
    assert "Third model" in body


def test_absurd_ids_are_not_found_rather_than_errors(requester: User, scenario: Scenario) -> None:
    client = _client(requester)
    huge = "9" * 30
    assert client.get(f"/projects/{huge}/").status_code == 404
    assert client.get(f"/runs/{huge}/status.json").status_code == 404
    url = reverse("planner:project-compare", args=[scenario.project.pk])
    body = client.get(f"{url}?scenario={huge}&scenario={scenario.pk}").content.decode()
    assert 'data-testid="pick-more"' in body
    capacity = client.post(
        reverse("planner:capacity"), {"scenario": huge, "deadline": "2099-01-01"}
    )
    assert "scenario" in capacity.context["form"].errors
    assert client.get(f"/capacity/{huge}/").status_code == 404
