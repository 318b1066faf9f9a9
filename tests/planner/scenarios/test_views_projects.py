"""The project pages: the list and detail, the create and edit forms, deletion."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import translation
from pytest_django.fixtures import Settings

from organisations.models import Organisation
from organisations.services import membership_grant
from planner.scenarios.forms import ProjectEditForm
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import project_create
from tests.planner.conftest import (
    Capture,
    _add_scenario,
    _budget,
    _client,
    _finished_run,
    list_price,
)

pytestmark = pytest.mark.django_db


def test_the_project_page_makes_as_many_queries_for_three_scenarios_as_for_one(
    requester: User,
    project: Project,
    estimated: EstimationRun,
    django_capture_on_commit_callbacks: Capture,
    django_assert_num_queries: Any,
) -> None:
    client = _client(requester)
    with CaptureQueriesContext(connection) as one:
        client.get(project.get_absolute_url())
    for name, gpus in (("H100 x128", 128), ("H100 x32", 32)):
        scenario = _add_scenario(requester, project, name, "H100-SXM", gpus, list_price("H100-SXM"))
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    with django_assert_num_queries(len(one.captured_queries)):
        body = client.get(project.get_absolute_url()).content.decode()
    assert "H100 x32" in body


def test_anonymous_visitors_are_sent_to_log_in(client: Client, project: Project) -> None:
    response = client.get(reverse("planner:project-detail", args=[project.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def _project_form(organisation: Organisation, **changes: Any) -> dict[str, Any]:
    return {
        "organisation": organisation.pk,
        "name": "Mixtral fine-tune",
        "goal": "Instruction-tune Mixtral for support tickets.",
        "deadline": "2027-03-31",
        "budget_ceiling": "250000",
        "currency": "EUR",
        **changes,
    }


def test_a_requester_creates_a_project_through_the_form(
    requester: User, organisation: Organisation
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation)
    )
    project = Project.objects.get(name="Mixtral fine-tune")
    assert response.status_code == 302
    assert response["Location"] == project.get_absolute_url()
    assert (project.organisation, project.owner, project.currency) == (
        organisation,
        requester,
        "EUR",
    )
    assert project.budget_ceiling == Decimal(250000)
    assert str(project.deadline) == "2027-03-31"


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"budget_ceiling": "-5"}, "budget_ceiling", "must be positive"),
        ({"currency": "XYZ"}, "currency", "unknown currency"),
        ({"name": "   "}, "name", "required"),
        ({"deadline": "31/02/2027"}, "deadline", "valid date"),
    ],
)
def test_a_bad_project_shows_the_error_on_its_field_and_writes_nothing(
    requester: User, organisation: Organisation, changes: dict[str, str], field: str, message: str
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation, **changes)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field]).lower()
    assert not Project.objects.exists()


def test_a_duplicate_project_name_is_refused_on_the_name_field(
    requester: User, organisation: Organisation, project: Project
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation, name=project.name)
    )
    assert "exists" in response.context["form"].errors["name"][0]
    assert Project.objects.count() == 1


def test_a_viewer_cannot_create_a_project(viewer: User, organisation: Organisation) -> None:
    client = _client(viewer)
    assert client.get(reverse("planner:project-create")).status_code == 403
    response = client.post(reverse("planner:project-create"), _project_form(organisation))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    assert not Project.objects.exists()


def test_a_requester_cannot_create_in_an_organisation_they_only_view(
    requester: User, organisation: Organisation, other_organisation: Organisation
) -> None:
    membership_grant(organisation=other_organisation, user=requester, role="viewer")
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(other_organisation)
    )
    assert response.status_code == 200
    assert "organisation" in response.context["form"].errors
    assert not Project.objects.exists()


def test_the_project_page_shows_runs_figures_and_the_ceiling(
    requester: User, project: Project, estimated: EstimationRun
) -> None:
    project.budget_ceiling = Decimal(1)  # far below any training run: every scenario is over
    project.save()
    body = _client(requester).get(project.get_absolute_url()).content.decode()
    assert estimated.scenario.name in body
    budget = _budget(estimated)
    assert f"{Decimal(budget['cost']['p90']):,.0f}" in body
    assert f"{budget['training_days']['p50']:.1f}" in body
    assert 'data-testid="over-ceiling"' in body
    assert 'data-testid="run-button"' in body


def _project_values(project: Project) -> tuple[Any, ...]:
    project.refresh_from_db()
    return (project.name, project.goal, project.deadline, project.budget_ceiling, project.currency)


def test_a_requester_edits_a_project_through_the_form(
    requester: User, organisation: Organisation, project: Project
) -> None:
    client = _client(requester)
    body = client.get(project.get_absolute_url()).content.decode()
    url = reverse("planner:project-edit", args=[project.pk])
    assert f'href="{url}"' in body
    page = client.get(url)
    assert page.context["form"].initial["name"] == project.name
    assert "organisation" not in page.context["form"].fields  # a project stays where it is
    response = client.post(url, _project_form(organisation, name="Llama 3 8B, second pass"))
    assert response.status_code == 302
    assert response["Location"] == project.get_absolute_url()
    assert _project_values(project) == (
        "Llama 3 8B, second pass",
        "Instruction-tune Mixtral for support tickets.",
        date(2027, 3, 31),
        Decimal(250000),
        "EUR",
    )
    assert project.organisation == organisation


class _BrowserForm(HTMLParser):
    """The fields a browser would submit from a page's form, as it would submit them.

    A date input whose value is not ``yyyy-mm-dd`` is emptied, as the HTML standard's value
    sanitisation does: that is how a localised ``22/04/2027`` turned into "no deadline".
    """

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {key: value or "" for key, value in attrs}
        if tag == "input" and "name" in named:
            value = named.get("value", "")
            if named.get("type") == "date" and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                value = ""
            self.fields[named["name"]] = value
        elif tag == "textarea":
            self._textarea = named["name"]
            self.fields[self._textarea] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None:
            # A browser drops the newline that follows <textarea>.
            self.fields[self._textarea] = self.fields[self._textarea].removeprefix("\n")
            self._textarea = None


def _as_a_browser_submits(html: str) -> dict[str, str]:
    form = _BrowserForm()
    form.feed(html)
    return form.fields


def test_the_edit_form_writes_the_deadline_as_iso_whatever_the_locale(
    settings: Settings, project: Project
) -> None:
    settings.LANGUAGE_CODE = "en-gb"  # whose own date format is 22/04/2027
    project.deadline = date(2027, 4, 22)
    for language in ("en-gb", "en-us", "de"):
        with translation.override(language):
            html = str(ProjectEditForm(initial=ProjectEditForm.initial_from(project))["deadline"])
        assert 'type="date"' in html
        assert 'value="2027-04-22"' in html
    parsed = ProjectEditForm(data={"name": "x", "currency": "USD", "deadline": "2027-04-22"})
    assert parsed.is_valid(), parsed.errors
    assert parsed.cleaned_data["deadline"] == date(2027, 4, 22)


def test_editing_only_the_name_keeps_the_deadline(
    settings: Settings, requester: User, organisation: Organisation
) -> None:
    settings.LANGUAGE_CODE = "en-gb"
    project = project_create(
        user=requester,
        organisation=organisation,
        name="Llama 3 8B",
        goal="A first pass.",
        deadline=date(2027, 4, 22),
        budget_ceiling=Decimal(250000),
        currency="USD",
    )
    client = _client(requester)
    url = reverse("planner:project-edit", args=[project.pk])
    fields = _as_a_browser_submits(client.get(url).content.decode())
    assert fields["deadline"] == "2027-04-22"
    response = client.post(url, {**fields, "name": "Llama 3 8B, second pass"})
    assert response.status_code == 302, response.context["form"].errors
    assert _project_values(project) == (
        "Llama 3 8B, second pass",
        "A first pass.",
        date(2027, 4, 22),
        Decimal(250000),
        "USD",
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"budget_ceiling": "-5"}, "budget_ceiling", "must be positive"),
        ({"currency": "XYZ"}, "currency", "unknown currency"),
        ({"name": "   "}, "name", "required"),
        ({"name": "Taken"}, "name", "exists"),
        ({"deadline": "31/02/2027"}, "deadline", "valid date"),
    ],
)
def test_a_bad_project_edit_shows_the_error_on_its_field_and_changes_nothing(
    requester: User,
    organisation: Organisation,
    project: Project,
    changes: dict[str, str],
    field: str,
    message: str,
) -> None:
    project_create(user=requester, organisation=organisation, name="Taken")
    before = _project_values(project)
    response = _client(requester).post(
        reverse("planner:project-edit", args=[project.pk]), _project_form(organisation, **changes)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field]).lower()
    assert _project_values(project) == before


def test_a_viewer_cannot_edit_or_delete_a_project(
    viewer: User, organisation: Organisation, project: Project
) -> None:
    client = _client(viewer)
    body = client.get(project.get_absolute_url()).content.decode()
    assert 'data-testid="edit-project"' not in body
    assert 'data-testid="delete-project"' not in body
    before = _project_values(project)
    edit = reverse("planner:project-edit", args=[project.pk])
    response = client.post(edit, _project_form(organisation, name="Renamed by a viewer"))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    delete = reverse("planner:project-delete", args=[project.pk])
    assert client.post(delete).status_code == 403
    assert _project_values(project) == before


def test_another_organisation_cannot_edit_or_delete(
    outsider: User, organisation: Organisation, scenario: Scenario
) -> None:
    project = scenario.project
    before = _project_values(project)
    client = _client(outsider)
    edit = reverse("planner:project-edit", args=[project.pk])
    assert client.post(edit, _project_form(organisation, name="Hijacked")).status_code == 404
    assert client.post(reverse("planner:project-delete", args=[project.pk])).status_code == 404
    assert client.post(reverse("planner:scenario-delete", args=[scenario.pk])).status_code == 404
    assert _project_values(project) == before
    assert Scenario.objects.filter(pk=scenario.pk).exists()


def test_a_project_is_deleted_after_the_confirmation_step(
    requester: User, estimated: EstimationRun
) -> None:
    project = estimated.scenario.project
    client = _client(requester)
    url = reverse("planner:project-delete", args=[project.pk])
    assert f'href="{url}"' in client.get(project.get_absolute_url()).content.decode()
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert 'data-testid="confirm-delete"' in confirm.content.decode()
    assert Project.objects.filter(pk=project.pk).exists()  # asking deletes nothing
    response = client.post(url, follow=True)
    assert response.redirect_chain == [(reverse("planner:project-list"), 302)]
    assert f"Deleted the project &#x27;{project.name}&#x27;" in response.content.decode()
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Scenario.objects.exists()
    assert not EstimationRun.objects.exists()
