"""Helpers and fixtures shared by the planner page tests: signed-in clients, finished runs.

Runs are started with ``run_start`` and executed with ``run_execute`` (the worker's service)
inside ``django_capture_on_commit_callbacks(execute=False)``, so the same tests hold in the
embedded mode (eager Celery) and on PostgreSQL + Redis, where a task would go to the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from planner.models import EstimationRun, Project, RunStatus, Scenario
from planner.services import run_execute, run_start, scenario_create
from tests.planner.conftest import small_spec

Capture = Callable[..., Any]


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _finished_run(capture: Capture, user: User, scenario: Scenario, seed: int = 7) -> EstimationRun:
    """A run started and executed by the worker's own service (no broker needed)."""
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=seed, samples=400)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def _budget(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None, run.error
    return run.budget


def _add_scenario(
    user: User, project: Project, name: str, accelerator: str, gpus: int, price: Any
) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=small_spec(accelerator, gpus),
        price_source="vendor_quote" if price.__class__.__name__ == "VendorQuote" else "price_entry",
        price=price,
        model_preset="llama3-8b",
    )


@pytest.fixture
def estimated(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> EstimationRun:
    return _finished_run(django_capture_on_commit_callbacks, requester, scenario)


def _form_refusal_check(
    user: User, project: Project, data: dict[str, Any], field: str, message: str
) -> None:
    """Posting ``data`` to the scenario form shows ``message`` on ``field`` and saves nothing."""
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(user).post(url, data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message.lower() in " ".join(errors[field]).lower()
    assert not Scenario.objects.exists()
