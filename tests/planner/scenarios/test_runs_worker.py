"""Estimation runs through a real Celery worker on Redis and PostgreSQL.

The second test kills the worker (SIGKILL, as the kernel's OOM killer would) while it is in
the middle of a run; the task was acknowledged late, so Redis hands it to the next worker,
which runs it to the end. The third kills it too, and the run's stale heartbeat is what
the page shows and what the dispatcher acts on, long before Redis would re-deliver.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from estimator.core.montecarlo import MAX_SAMPLES
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.services import run_start
from planner.tasks import dispatch_pending
from tests.services import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _status(run: EstimationRun) -> EstimationRun:
    return EstimationRun.objects.get(pk=run.pk)


def test_a_real_worker_runs_an_estimation(
    celery_worker: object, scenario: Scenario, requester: User
) -> None:
    run = run_start(user=requester, scenario=scenario, seed=5)  # autocommit: enqueued now
    wait_for(lambda: _status(run).is_finished, 60, "the run to finish")
    done = _status(run)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.task_id
    assert done.budget is not None
    assert done.result is not None
    assert done.result["fits_in_memory"] is True
    assert done.progress == 1.0


def test_a_run_survives_its_worker_dying_mid_task(
    celery_worker_factory: type, scenario: Scenario, requester: User
) -> None:
    # Redis re-delivers an unacknowledged task once it has been invisible this long; the
    # default (the hard time limit + 60 s) is shortened so the test does not wait minutes.
    quick_redelivery = {
        "CELERY_VISIBILITY_TIMEOUT": "5",
        "CELERY_UNACKED_RESTORE_INTERVAL": "1",
        "CELERY_UNACKED_RESTORE_THROTTLE": "1",
    }
    first = celery_worker_factory(quick_redelivery)
    # The largest Monte Carlo takes a few seconds: long enough to be killed in the middle.
    run = run_start(user=requester, scenario=scenario, seed=5, samples=MAX_SAMPLES)
    wait_for(lambda: _status(run).status == RunStatus.RUNNING, 60, "the run to start")
    wait_for(lambda: _status(run).progress > 0.2, 60, "the Monte Carlo to start")
    first.stop(kill=True)
    interrupted = _status(run)
    assert interrupted.status == RunStatus.RUNNING
    assert interrupted.progress < 1.0

    second = celery_worker_factory(quick_redelivery)
    try:
        wait_for(lambda: _status(run).is_finished, 120, "the re-delivered run to finish")
    finally:
        second.stop()
    done = _status(run)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.attempts == 2  # started by the killed worker, finished by the second one
    assert done.montecarlo is not None
    assert done.montecarlo["samples"] == MAX_SAMPLES


def test_a_killed_worker_shows_as_lost_and_the_dispatcher_has_it_finished(
    celery_worker_factory: type,
    scenario: Scenario,
    requester: User,
    settings: Settings,
) -> None:
    # Beat every second and call a silence of 3 s lost (60 s in production). Redis would
    # re-deliver the task only after its visibility timeout (minutes): the dispatcher is first.
    settings.RUN_STALE_AFTER_S = 3
    first = celery_worker_factory({"TRAINPLAN_RUN_HEARTBEAT_S": "1"})
    run = run_start(user=requester, scenario=scenario, seed=5, samples=MAX_SAMPLES)
    wait_for(lambda: _status(run).progress > 0.2, 60, "the Monte Carlo to start")
    client = Client()
    client.force_login(requester)
    status_url = reverse("planner:run-status", args=[run.pk])
    assert client.get(status_url).json()["state"] == "running"
    first.stop(kill=True)
    lost = lambda: client.get(status_url).json()["state"] == "worker_lost"  # noqa: E731
    wait_for(lost, 10, "the status to say the worker was lost")
    assert (
        "Worker lost, retrying: no heartbeat for" in client.get(status_url).json()["state_message"]
    )
    assert "Worker lost" in client.get(run.get_absolute_url()).content.decode()

    second = celery_worker_factory({"TRAINPLAN_RUN_HEARTBEAT_S": "1"})
    try:
        assert dispatch_pending()["runs_requeued"] == [run.pk]
        wait_for(lambda: _status(run).is_finished, 120, "the re-dispatched run to finish")
    finally:
        second.stop()
    done = _status(run)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.attempts == 2
    assert client.get(status_url).json()["state"] == "succeeded"
