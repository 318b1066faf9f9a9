"""Capacity plans on real Celery workers over Redis and PostgreSQL.

A plan's chunks are separate tasks: two workers share them and the merged result is exactly
the whole search done in one process; a worker killed in the middle of a plan loses no chunk
(tasks are acknowledged late, so Redis hands its chunk to the next worker); cancelling a plan
leaves its chunks unsearched: the worker that takes the plan's dispatch task sends none of
them (and a chunk task that arrives after a cancel does nothing: ``test_capacity_plans.py``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from planner.capacity.models import CapacityPlan, ChunkStatus, PlanStatus
from planner.capacity.search import PricedOption, capacity_plan
from planner.capacity.services import CapacityQuestion, capacity_plan_cancel, capacity_plan_create
from planner.tasks import ping
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import PriceBook
from tests.planner.capacity.plans import assert_same_plan
from tests.services import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

QUICK_REDELIVERY = {
    "CELERY_VISIBILITY_TIMEOUT": "5",
    "CELERY_UNACKED_RESTORE_INTERVAL": "1",
    "CELERY_UNACKED_RESTORE_THROTTLE": "1",
}


def _question(model: str = "llama3-8b", max_gpus: int = 1024) -> CapacityQuestion:
    return CapacityQuestion(
        deadline=timezone.localdate() + timedelta(days=90),
        currency="USD",
        max_gpus=max_gpus,
        model_preset=model,
        tokens=2e12,
        book=PriceBook.objects.get(name=EXAMPLE_BOOK_NAME),
        include_onprem=False,
    )


def _plan(plan: CapacityPlan) -> CapacityPlan:
    return CapacityPlan.objects.get(pk=plan.pk)


def _whole(plan: CapacityPlan) -> dict[str, object]:
    options = [PricedOption.from_json(option) for option in plan.options]
    return capacity_plan(
        plan.scenario,
        options,
        deadline_days=plan.deadline_days,
        budget=plan.budget,
        exhaustive=True,
    )


def test_two_workers_share_a_plan_and_merge_the_whole_search(
    celery_worker_factory: type, prices: None, requester: User
) -> None:
    workers = [celery_worker_factory(), celery_worker_factory()]
    try:
        plan = capacity_plan_create(user=requester, question=_question())  # sent on commit
        wait_for(lambda: _plan(plan).is_finished, 180, "the plan to finish")
    finally:
        for worker in workers:
            worker.stop()
    done = _plan(plan)
    assert done.status == PlanStatus.SUCCEEDED, done.error
    chunks = list(done.chunks.all())
    assert len(chunks) == done.chunks_total > 1
    assert {chunk.status for chunk in chunks} == {ChunkStatus.DONE}
    assert len({chunk.task_id for chunk in chunks}) == len(chunks)  # a task each
    assert len({chunk.worker for chunk in chunks}) == 2  # both workers searched
    assert_same_plan(done.result, _whole(done))


def test_a_worker_killed_mid_plan_loses_no_chunk(
    celery_worker_factory: type, prices: None, requester: User
) -> None:
    first = celery_worker_factory(QUICK_REDELIVERY)
    plan = capacity_plan_create(user=requester, question=_question("llama3-70b", 16384))
    total = _plan(plan).chunks_total
    wait_for(
        lambda: plan.chunks.filter(status=ChunkStatus.DONE).count() >= 2,
        120,
        "the first chunks to be searched",
    )
    first.stop(kill=True)
    interrupted = _plan(plan)
    assert interrupted.status == PlanStatus.RUNNING
    assert plan.chunks.filter(status=ChunkStatus.DONE).count() < total
    second = celery_worker_factory(QUICK_REDELIVERY)
    try:
        wait_for(lambda: _plan(plan).is_finished, 300, "the plan to finish on the second worker")
    finally:
        second.stop()
    done = _plan(plan)
    assert done.status == PlanStatus.SUCCEEDED, done.error
    assert set(done.chunks.values_list("status", flat=True)) == {ChunkStatus.DONE}
    assert_same_plan(done.result, _whole(done))


def test_cancel_stops_the_chunks_a_worker_has_not_searched(
    celery_worker_factory: type, prices: None, requester: User
) -> None:
    plan = capacity_plan_create(user=requester, question=_question())  # no worker yet
    capacity_plan_cancel(user=requester, plan=plan)  # its dispatch task waits in Redis
    worker = celery_worker_factory()
    try:
        # The queue is first in, first out: once this answers, every chunk task was taken.
        assert ping.delay().get(timeout=60) == "pong"
    finally:
        worker.stop()
    chunks = plan.chunks.all()
    assert {chunk.status for chunk in chunks} == {ChunkStatus.CANCELLED}
    assert all(chunk.attempts == 0 and chunk.result is None for chunk in chunks)
    assert all(chunk.dispatched_at is None for chunk in chunks)  # never even sent
    assert _plan(plan).status == PlanStatus.CANCELLED
