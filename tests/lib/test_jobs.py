"""lib.jobs: one mechanism for jobs (outbox, claim, heartbeat, lost workers), on the
database's own rows (plan chunks, notifications) with a broker that records what it is sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from lib import jobs
from lib.jobs import JobKind
from planner.models import (
    CapacityPlan,
    CapacityPlanChunk,
    ChunkStatus,
    Notification,
    NotificationStatus,
    Organisation,
)
from tests.services import wait_for

pytestmark = pytest.mark.django_db


class Broker:
    """Records the tasks sent; refuses all of them when ``down``, or those after the first
    ``up_for`` of a batch."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[object, ...], str | None]] = []
        self.down = False
        self.up_for: int | None = None
        self.waiting: int | None = 0  # messages in the queue; None: cannot be asked

    def publish(self, task: str, *args: object, task_id: str | None = None) -> None:
        _sent, error = self.publish_many(task, [(args, task_id)])
        if error is not None:
            raise error

    def publish_many(
        self, task: str, calls: Sequence[tuple[tuple[object, ...], str | None]]
    ) -> tuple[int, Exception | None]:
        for count, (args, task_id) in enumerate(calls):
            if self.down or (self.up_for is not None and count >= self.up_for):
                return count, ConnectionRefusedError(111, "Connection refused")
            self.sent.append((task, args, task_id))
        return len(calls), None

    def queue_length(self) -> int | None:
        return self.waiting


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.fixture
def chunks(broker: Broker) -> JobKind[CapacityPlanChunk]:
    """Queued, then running (the default status values), under a task id of their own."""
    return JobKind(model=CapacityPlanChunk, task="tests.chunk", label="chunk", broker=broker)


@pytest.fixture
def notifications(broker: Broker) -> JobKind[Notification]:
    """Pending, with no claim (no running status), sent under a new task id each time."""
    return JobKind(
        model=Notification,
        task="tests.notification",
        label="notification",
        broker=broker,
        queued=NotificationStatus.PENDING,
        running=None,
        task_ids=False,
    )


def test_a_kind_names_statuses_its_model_has(broker: Broker) -> None:
    with pytest.raises(ValueError, match="'queued'"):
        JobKind(model=Notification, task="tests.notification", label="n", broker=broker)


@pytest.fixture
def plan(other_organisation: Organisation) -> CapacityPlan:
    plan = CapacityPlan.objects.create(
        organisation=other_organisation,
        name="jobs",
        inputs={},
        scenario={},
        options=[],
        deadline=date(2030, 1, 1),
        deadline_days=30,
        currency="USD",
        chunks_total=3,
    )
    CapacityPlanChunk.objects.bulk_create(
        CapacityPlanChunk(plan=plan, index=index, work={}, task_id=jobs.new_task_id())
        for index in range(3)
    )
    return plan


def _chunk(plan: CapacityPlan, index: int = 0) -> CapacityPlanChunk:
    return plan.chunks.get(index=index)


def _running(chunk: CapacityPlanChunk, *, silent_s: float, attempts: int = 1) -> None:
    last = timezone.now() - timedelta(seconds=silent_s)
    CapacityPlanChunk.objects.filter(pk=chunk.pk).update(
        status=ChunkStatus.RUNNING, attempts=attempts, started_at=last, heartbeat_at=last
    )


# --- Outbox ----------------------------------------------------------------------------------


def test_dispatch_sends_a_queued_job_under_its_task_id_and_notes_it(
    chunks: JobKind[CapacityPlanChunk], broker: Broker, plan: CapacityPlan
) -> None:
    chunk = _chunk(plan)
    assert jobs.dispatch(chunks, chunk.pk) is True
    assert broker.sent == [("tests.chunk", (chunk.pk,), chunk.task_id)]
    assert _chunk(plan).dispatched_at is not None
    CapacityPlanChunk.objects.filter(pk=chunk.pk).update(status=ChunkStatus.DONE)
    assert jobs.dispatch(chunks, chunk.pk) is False  # only a queued job is sent
    assert len(broker.sent) == 1


def test_a_job_queued_again_while_its_task_was_sent_is_not_noted_as_sent(
    chunks: JobKind[CapacityPlanChunk], broker: Broker, plan: CapacityPlan
) -> None:
    chunk = _chunk(plan)

    def requeued_meanwhile(task: str, *args: object, task_id: str | None = None) -> None:
        CapacityPlanChunk.objects.filter(pk=chunk.pk).update(task_id=jobs.new_task_id())

    broker.publish = requeued_meanwhile  # type: ignore[method-assign]
    assert jobs.dispatch(chunks, chunk.pk) is True
    assert _chunk(plan).dispatched_at is None  # the new task is still to be sent


def test_a_job_the_broker_missed_waits_for_the_dispatcher(
    notifications: JobKind[Notification], broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = (
        Notification.objects.create(subject=subject, body="", recipients=["a@example.com"])
        for subject in ("first", "second")
    )
    broker.down = True
    assert jobs.dispatch(notifications, first.pk) is False
    assert f"notification {first.pk} is saved but its task was not sent" in caplog.text
    assert "the dispatcher sends it when the broker is back" in caplog.text
    assert list(jobs.unsent(notifications)) == [first, second]
    assert jobs.dispatch_pending(notifications) == []  # still down: nothing lost

    broker.down = False
    Notification.objects.filter(pk=second.pk).update(status=NotificationStatus.SENT)
    assert jobs.dispatch_pending(notifications) == [first.pk]
    assert broker.sent == [("tests.notification", (first.pk,), None)]  # no task id of its own
    assert Notification.objects.get(pk=first.pk).dispatched_at is not None
    assert list(jobs.unsent(notifications)) == []


def test_dispatch_many_sends_a_group_over_one_call_and_leaves_the_rest_when_it_fails(
    chunks: JobKind[CapacityPlanChunk],
    broker: Broker,
    plan: CapacityPlan,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker.up_for = 1
    where = {"plan_id": plan.pk}
    assert jobs.dispatch_many(chunks, where=where, about="plan 1", order_by=["index"]) == 1
    assert "plan 1: 2 of its chunks were not sent (ConnectionRefusedError" in caplog.text
    unsent = list(jobs.unsent(chunks).order_by("index").values_list("index", flat=True))
    assert unsent == [1, 2]

    broker.up_for = None
    assert jobs.dispatch_many(chunks, where=where, about="plan 1", order_by=["index"]) == 2
    chunk_ids = list(plan.chunks.order_by("index").values_list("pk", flat=True))
    assert [args for _task, args, _id in broker.sent] == [(pk,) for pk in chunk_ids]
    assert jobs.dispatch_many(chunks, where=where, about="plan 1") == 0  # all sent


# --- Claim and heartbeat ---------------------------------------------------------------------


def test_claim_marks_the_job_running_for_its_task(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan
) -> None:
    chunk = _chunk(plan)
    claimed = jobs.claim(chunks, chunk.pk, chunk.task_id, related=["plan"], worker="w1@host")
    assert claimed is not None
    stored = _chunk(plan)
    assert (stored.status, stored.attempts, stored.worker) == (ChunkStatus.RUNNING, 1, "w1@host")
    assert stored.started_at == stored.heartbeat_at is not None
    # A redelivered task of the same dispatch (the worker died) takes it again.
    assert jobs.claim(chunks, chunk.pk, chunk.task_id) is not None
    assert _chunk(plan).attempts == 2


def test_claim_drops_a_superseded_task_and_a_finished_job(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan, caplog: pytest.LogCaptureFixture
) -> None:
    chunk = _chunk(plan)
    assert jobs.claim(chunks, chunk.pk, "an-earlier-dispatch") is None
    assert f"chunk {chunk.pk}: task an-earlier-dispatch is superseded by {chunk.task_id}" in (
        caplog.text
    )
    assert (_chunk(plan).status, _chunk(plan).attempts) == (ChunkStatus.QUEUED, 0)
    CapacityPlanChunk.objects.filter(pk=chunk.pk).update(status=ChunkStatus.CANCELLED)
    assert jobs.claim(chunks, chunk.pk, chunk.task_id) is None
    assert jobs.claim(chunks, 0, None) is None  # no such row


def test_beat_writes_a_sign_of_life_on_a_running_job_only(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan
) -> None:
    chunk = _chunk(plan)
    jobs.beat(chunks, chunk.pk)
    assert _chunk(plan).heartbeat_at is None  # queued: nobody works on it
    _running(chunk, silent_s=30)
    jobs.beat(chunks, chunk.pk)
    stored = _chunk(plan)
    assert stored.heartbeat_at is not None
    assert stored.last_sign == stored.heartbeat_at > timezone.now() - timedelta(seconds=5)


@pytest.mark.django_db(transaction=True)
def test_beating_beats_from_a_thread_while_the_block_runs(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan
) -> None:
    chunk = _chunk(plan)
    _running(chunk, silent_s=30)
    beats: set[datetime | None] = set()
    with jobs.beating(chunks, chunk.pk, 0.05):
        assert f"chunk-{chunk.pk}-heartbeat" in {t.name for t in threading.enumerate()}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(beats) < 3:
            beats.add(_chunk(plan).heartbeat_at)
            time.sleep(0.02)
    assert len(beats) >= 3
    wait_for(lambda: not _heartbeat_threads(), 5, "the heartbeat thread to stop")
    after = _chunk(plan).heartbeat_at
    time.sleep(0.15)
    assert _chunk(plan).heartbeat_at == after  # stopped with the block
    with jobs.beating(chunks, chunk.pk, None):  # eager mode: no thread
        assert not _heartbeat_threads()


def _heartbeat_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.endswith("-heartbeat")]


# --- Lost workers ----------------------------------------------------------------------------


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks


def test_a_job_whose_worker_went_quiet_is_queued_again_under_a_new_task_id(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan, capture: Any
) -> None:
    lost, alive = _chunk(plan, 0), _chunk(plan, 1)
    _running(lost, silent_s=120)
    _running(alive, silent_s=5)
    sent: list[CapacityPlanChunk] = []
    with capture(execute=True):
        recovered = jobs.recover_lost(
            chunks,
            stale_before=timezone.now() - timedelta(seconds=60),
            max_attempts=3,
            give_up=lambda chunk: pytest.fail("gave up on a chunk with tries left"),
            send=sent.append,
            worker="",
        )
    assert recovered == ([lost.pk], [])
    assert [chunk.pk for chunk in sent] == [lost.pk]  # sent once the requeue committed
    requeued = _chunk(plan, 0)
    assert (requeued.status, requeued.dispatched_at, requeued.attempts) == ("queued", None, 1)
    assert requeued.task_id != lost.task_id
    assert (_chunk(plan, 1).status, _chunk(plan, 2).status) == ("running", "queued")
    # The lost worker's task, redelivered late, is superseded; the new one takes the job.
    assert jobs.claim(chunks, lost.pk, lost.task_id) is None
    assert jobs.claim(chunks, lost.pk, requeued.task_id) is not None
    assert _chunk(plan, 0).attempts == 2


def test_a_job_that_lost_its_worker_max_attempts_times_is_given_up(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan, capture: Any
) -> None:
    spent, retried = _chunk(plan, 0), _chunk(plan, 1)
    _running(spent, silent_s=120, attempts=3)
    _running(retried, silent_s=120, attempts=2)
    given_up: list[tuple[int, int]] = []

    def give_up(chunk: CapacityPlanChunk) -> None:
        given_up.append((chunk.pk, chunk.attempts))
        CapacityPlanChunk.objects.filter(pk=chunk.pk).update(status=ChunkStatus.FAILED)

    with capture(execute=False) as callbacks:
        recovered = jobs.recover_lost(
            chunks,
            stale_before=timezone.now() - timedelta(seconds=60),
            max_attempts=3,
            give_up=give_up,
            send=lambda chunk: None,
        )
    assert recovered == ([retried.pk], [spent.pk])
    assert given_up == [(spent.pk, 3)]
    assert len(callbacks) == 1  # the send of the one queued again
    assert (_chunk(plan, 0).status, _chunk(plan, 1).status) == ("failed", "queued")
    assert jobs.recover_lost(
        chunks,
        stale_before=timezone.now(),
        max_attempts=3,
        give_up=give_up,
        send=lambda chunk: None,
    ) == ([], [])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_job_another_dispatcher_holds_is_skipped(
    chunks: JobKind[CapacityPlanChunk], plan: CapacityPlan
) -> None:
    held, free = _chunk(plan, 0), _chunk(plan, 1)
    _running(held, silent_s=120)
    _running(free, silent_s=120)
    locked, release = threading.Event(), threading.Event()

    def other_dispatcher() -> None:
        try:
            with transaction.atomic():
                CapacityPlanChunk.objects.select_for_update().filter(pk=held.pk).get()
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=other_dispatcher)
    thread.start()
    try:
        assert locked.wait(10)
        recovered = jobs.recover_lost(
            chunks,
            stale_before=timezone.now() - timedelta(seconds=60),
            max_attempts=3,
            give_up=lambda chunk: None,
            send=lambda chunk: None,
        )
    finally:
        release.set()
        thread.join(10)
    assert recovered == ([free.pk], [])
    assert (_chunk(plan, 0).status, _chunk(plan, 1).status) == ("running", "queued")


# --- Lost messages ---------------------------------------------------------------------------


def _sent_ago(chunk: CapacityPlanChunk, seconds: float) -> None:
    CapacityPlanChunk.objects.filter(pk=chunk.pk).update(
        dispatched_at=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.mark.django_db(transaction=True)
def test_a_job_never_taken_while_the_queue_is_empty_is_sent_again_under_a_new_id(
    chunks: JobKind[CapacityPlanChunk], broker: Broker, plan: CapacityPlan
) -> None:
    lost, recent = _chunk(plan, 0), _chunk(plan, 1)
    _sent_ago(lost, 120)
    _sent_ago(recent, 5)
    cutoff = timezone.now() - timedelta(seconds=60)
    assert jobs.recover_unclaimed(chunks, sent_before=cutoff, send=_send(chunks)) == [lost.pk]
    again = _chunk(plan, 0)
    assert again.task_id != lost.task_id
    assert [(args, task_id) for _task, args, task_id in broker.sent] == [
        ((lost.pk,), again.task_id)
    ]
    assert _chunk(plan, 0).dispatched_at is not None
    # The lost message turning up after all finds the row is no longer its own.
    assert jobs.claim(chunks, lost.pk, lost.task_id) is None


@pytest.mark.parametrize("waiting", [3, None], ids=["queue-not-empty", "broker-unreachable"])
def test_a_job_behind_others_in_the_queue_is_left_alone(
    chunks: JobKind[CapacityPlanChunk], broker: Broker, plan: CapacityPlan, waiting: int | None
) -> None:
    _sent_ago(_chunk(plan, 0), 600)
    broker.waiting = waiting
    cutoff = timezone.now() - timedelta(seconds=60)
    assert jobs.recover_unclaimed(chunks, sent_before=cutoff, send=_send(chunks)) == []
    assert broker.sent == []


def _send(kind: JobKind[CapacityPlanChunk]) -> Any:
    def send(row: CapacityPlanChunk) -> None:
        jobs.dispatch(kind, row.pk)

    return send
