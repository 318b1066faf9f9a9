"""The scenario form and the API read the core's scenario schema: at and just beyond every
bound, each refuses exactly what the estimator's validator refuses, key by key."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.urls import reverse

from estimator.core import schema
from planner.common.errors import PlannerError
from planner.models import Project, Scenario
from planner.scenarios.forms import ScenarioForm
from planner.scenarios.forms.fields import key_field
from planner.scenarios.serializers import ScenarioUpdateInput
from planner.scenarios.services.scenarios import scenario_spec_check
from tests.estimator.core.schema_probes import (
    BOUND_REASONS,
    expected_refusal,
    probe_cases,
    spec_with,
)
from tests.planner.conftest import _client, api_client, list_price, small_spec

#: Scenario key -> the form field that sets it (the form's own error routing, inverted).
FORM_FIELDS = {
    key.removeprefix("spec."): field
    for key, field in ScenarioForm.ERROR_FIELDS.items()
    if key.startswith("spec.")
}
FORM_CASES = [(path, value) for path, value in probe_cases() if path in FORM_FIELDS]


def _text(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def test_the_form_sets_every_bounded_key_a_planner_edits() -> None:
    edited = {path for path, _ in FORM_CASES}
    assert {"margins.network_jitter", "margins.framework_overhead", "cluster.num_gpus"} <= edited
    assert {"training.tokens", "training.method.rank", "parallelism.zero_stage"} <= edited


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "value"), FORM_CASES)
def test_the_form_refuses_what_the_validator_refuses(path: str, value: float) -> None:
    field = FORM_FIELDS[path]
    form = ScenarioForm(data={field: _text(value)})
    form.is_valid()
    refused = field in form.errors
    assert refused == (expected_refusal(path, value) is not None), form.errors.get(field)


@pytest.mark.parametrize(("path", "value"), list(probe_cases()))
def test_the_api_refuses_what_the_validator_refuses(path: str, value: float) -> None:
    """What ``POST``/``PATCH /api/v1/scenarios/`` does with a spec: the input serializer,
    then the services' check, naming ``spec.<key>`` with the validator's reason."""
    body = json.loads(json.dumps({"spec": spec_with(path, value)}))  # as sent over HTTP
    serializer = ScenarioUpdateInput(data=body, partial=True)
    assert serializer.is_valid(), serializer.errors
    try:
        scenario_spec_check(serializer.validated_data["spec"])
    except PlannerError as error:
        reason = error.message.removeprefix(f"{path}: ")
        on_key = error.field == f"spec.{path}" and reason.startswith(BOUND_REASONS)
        refusal = reason if on_key else None
    else:
        refusal = None
    assert refusal == expected_refusal(path, value)


def test_the_api_documents_the_schemas_bounds_and_defaults() -> None:
    help_text = ScenarioUpdateInput().fields["spec"].help_text or ""
    assert "margins.network_jitter: number in [0, 10], default 0.05" in help_text


@pytest.mark.parametrize("jitter", [3.0, 10.0])
def test_a_jitter_saved_through_the_api_saves_again_through_the_form(
    requester: User, project: Project, prices: None, jitter: float
) -> None:
    spec = {**small_spec("H100-SXM", 64), "margins": {"network_jitter": jitter}}
    created = api_client(requester).post(
        "/api/v1/scenarios/",
        {
            "project": project.pk,
            "name": "jittery",
            "spec": spec,
            "price_source": "price_entry",
            "price_entry": list_price("H100-SXM").pk,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    scenario = Scenario.objects.get(pk=created.json()["id"])
    client = _client(requester)
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    form = client.get(url).context["form"]
    shown = {name: form[name].value() for name in form.fields}  # what the page fills in
    data = {k: ("on" if v is True else v) for k, v in shown.items() if v not in (None, False)}
    saved = client.post(url, data)
    assert saved.status_code == 302, saved.context["form"].errors
    scenario.refresh_from_db()
    assert scenario.spec["margins"] == {
        "framework_overhead": schema.default("margins.framework_overhead"),
        "network_jitter": jitter,
    }


def test_a_jitter_beyond_the_bound_is_refused_by_the_api_and_the_form(
    requester: User, project: Project, prices: None
) -> None:
    beyond = math.nextafter(schema.key("margins.network_jitter").maximum or 0.0, math.inf)
    spec = {**small_spec("H100-SXM", 64), "margins": {"network_jitter": beyond}}
    body: dict[str, Any] = {
        "project": project.pk,
        "name": "too jittery",
        "spec": spec,
        "price_source": "price_entry",
        "price_entry": list_price("H100-SXM").pk,
    }
    refused = api_client(requester).post("/api/v1/scenarios/", body, format="json")
    assert refused.status_code == 400
    assert "spec.margins.network_jitter" in refused.json()
    form = ScenarioForm(data={"network_jitter": repr(beyond)})
    assert not form.is_valid()
    assert "network_jitter" in form.errors


def test_a_form_field_refuses_an_exclusive_bound_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    share = schema.Key(
        "run.share", "number", "A share above 0", minimum=0.0, maximum=1.0,
        exclusive_minimum=True,
    )  # fmt: skip
    monkeypatch.setattr(schema, "key", lambda path: share)
    field = key_field("run.share")
    with pytest.raises(ValidationError, match=r"must be a number in \(0, 1\], got 0.0"):
        field.clean("0")
    assert field.clean("1") == 1.0
    assert field.help_text == "A share above 0"
