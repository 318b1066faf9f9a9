"""Writes that race on PostgreSQL: a scenario deleted while a run of it is being started.

schemathesis found a 500 here: the delete collected the scenario's runs, a run was inserted
by another request, and the delete then broke the foreign key. The delete now locks the
scenario's row first and ``run_start`` locks it too, so one waits for the other.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from planner.common.errors import PlannerError
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import run_start, scenario_delete

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_run_started_while_its_scenario_is_deleted_is_refused_not_a_500(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    deleting, may_commit = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def delete_and_hold() -> None:
        try:
            with transaction.atomic():
                scenario_delete(user=requester, scenario=scenario)
                deleting.set()  # the row is locked and gone, not yet committed
                may_commit.wait(timeout=30)
        finally:
            connection.close()

    def start() -> None:
        try:
            with django_capture_on_commit_callbacks(execute=False):
                run_start(user=requester, scenario=scenario, seed=1, samples=100)
            outcome["run"] = "started"
        except PlannerError as error:
            outcome["run"] = (error.field, error.message)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete_and_hold)
    deleter.start()
    assert deleting.wait(timeout=30)
    starter = threading.Thread(target=start)
    starter.start()
    starter.join(timeout=1.0)
    assert starter.is_alive(), "run_start must wait for the delete's lock"
    may_commit.set()
    deleter.join(timeout=30)
    starter.join(timeout=30)
    assert outcome["run"] == ("scenario", "was deleted while the run was being started")
    assert not Scenario.objects.filter(pk=scenario.pk).exists()
    assert not EstimationRun.objects.exists()
