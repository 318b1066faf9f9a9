"""Capacity plans over the API: create (202, queued on commit), poll, read, cancel."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from organisations.models import Organisation
from planner.capacity.models import CapacityPlan, ChunkStatus, PlanStatus
from planner.capacity.services import capacity_chunk_execute, capacity_plan_merge
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import PriceBook

pytestmark = pytest.mark.django_db

URL = "/api/v1/capacity-plans/"


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_preset": "llama3-8b",
        "tokens": "1T",
        "deadline": (timezone.localdate() + timedelta(days=30)).isoformat(),
        "budget": "500000",
        "currency": "USD",
        "max_gpus": 256,
        "book": PriceBook.objects.get(name=EXAMPLE_BOOK_NAME).pk,
        **changes,
    }
    return {key: value for key, value in body.items() if value is not None}


def _post(client: APIClient, capture: Any, **changes: Any) -> Any:
    with capture(execute=False):
        return client.post(URL, _body(**changes), format="json")


def _work(plan_id: int) -> None:
    for chunk in CapacityPlan.objects.get(pk=plan_id).chunks.all():
        capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id)
    capacity_plan_merge(plan_id=plan_id)


def test_a_plan_is_accepted_queued_and_read_back_with_its_options(
    requester_api: APIClient, prices: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = requester_api.post(URL, _body(), format="json")
    assert response.status_code == 202, response.json()
    created = response.json()
    assert created["status"] == "queued"
    assert created["progress"] == 0.0
    assert created["options"] == []
    assert created["frontier"] == []
    assert response["Location"].endswith(f"{URL}{created['id']}/")
    assert len(sent) == 1  # the chunks' tasks are sent after the commit, not searched here
    assert created["chunks_total"] > 1
    _work(created["id"])
    plan = requester_api.get(f"{URL}{created['id']}/").json()
    assert (plan["status"], plan["progress"]) == ("succeeded", 1.0)
    assert plan["options"]
    assert plan["frontier"]
    costs = [Decimal(option["cost"]) for option in plan["options"]]
    assert costs == sorted(costs)
    assert max(costs) <= Decimal("500000")
    assert all(option["training_days"] <= plan["deadline_days"] for option in plan["options"])
    first = plan["options"][0]
    assert plan["priced_options"][first["option"]]["key"] == first["option_key"]
    listing = requester_api.get(URL).json()
    assert [row["id"] for row in listing["results"]] == [created["id"]]
    assert "options" not in listing["results"][0]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"deadline": "2000-01-01"}, "deadline"),
        ({"deadline": "30/06/2027"}, "deadline"),
        ({"model_preset": "gpt-9"}, "model_preset"),
        ({"model_preset": None}, "model_preset"),
        ({"tokens": "many"}, "tokens"),
        ({"tokens": True}, "tokens"),
        ({"budget": "-5"}, "budget"),
        ({"currency": "XYZ"}, "currency"),
        ({"max_gpus": 100_001}, "max_gpus"),
        ({"book": 999_999}, "book"),
        ({"book": None, "include_quotes": False, "include_onprem": False}, "book"),
        ({"scenario": 999_999, "model_preset": None}, "scenario"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    requester_api: APIClient,
    prices: None,
    django_capture_on_commit_callbacks: Any,
    changes: dict[str, Any],
    field: str,
) -> None:
    response = _post(requester_api, django_capture_on_commit_callbacks, **changes)
    assert response.status_code == 400, response.json()
    assert field in str(response.json()), response.json()
    assert not CapacityPlan.objects.exists()


def test_cancel_drops_the_chunks_and_a_finished_plan_is_a_409(
    requester_api: APIClient, prices: None, django_capture_on_commit_callbacks: Any
) -> None:
    plan_id = _post(requester_api, django_capture_on_commit_callbacks).json()["id"]
    response = requester_api.post(f"{URL}{plan_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    plan = CapacityPlan.objects.get(pk=plan_id)
    assert set(plan.chunks.values_list("status", flat=True)) == {ChunkStatus.CANCELLED}
    done_id = _post(requester_api, django_capture_on_commit_callbacks, max_gpus=16).json()["id"]
    _work(done_id)
    response = requester_api.post(f"{URL}{done_id}/cancel/")
    assert response.status_code == 409
    assert CapacityPlan.objects.get(pk=done_id).status == PlanStatus.SUCCEEDED


def test_a_viewer_reads_but_cannot_plan(
    requester_api: APIClient,
    viewer_api: APIClient,
    prices: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    plan_id = _post(requester_api, django_capture_on_commit_callbacks).json()["id"]
    assert viewer_api.get(f"{URL}{plan_id}/").status_code == 200
    assert _post(viewer_api, django_capture_on_commit_callbacks).status_code == 403
    assert viewer_api.post(f"{URL}{plan_id}/cancel/").status_code == 403


def test_another_organisation_gets_404(
    requester_api: APIClient,
    outsider_api: APIClient,
    prices: None,
    django_capture_on_commit_callbacks: Any,
    other_organisation: Organisation,
) -> None:
    plan_id = _post(requester_api, django_capture_on_commit_callbacks).json()["id"]
    assert outsider_api.get(f"{URL}{plan_id}/").status_code == 404
    assert outsider_api.post(f"{URL}{plan_id}/cancel/").status_code == 404
    assert outsider_api.get(URL).json()["results"] == []
    assert CapacityPlan.objects.get(pk=plan_id).status == PlanStatus.QUEUED


def test_the_schema_documents_the_endpoints(requester_api: APIClient) -> None:
    schema = requester_api.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for path in ("/api/v1/capacity-plans/", "/api/v1/capacity-plans/{id}/cancel/"):
        assert path in schema
