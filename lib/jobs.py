"""Jobs: rows a Celery task works on, each its own outbox, run by one task, watched, retried.

One mechanism for every kind of job (a run, a capacity plan's chunk, a notification), told
apart by a :class:`JobKind`: the model, the registered name of its task, its status values.

* **Outbox.** A job row is written in the transaction of the change that asks for it, and
  its task is sent once that commits (:func:`dispatch`, :func:`dispatch_many`).
  ``dispatched_at`` stays empty until the task reached the broker, so a job saved while the
  broker was down is sent later by the dispatcher (:func:`dispatch_pending`, :func:`unsent`).
  Tasks are sent by name through a :class:`Broker`: nothing here imports a task module.
* **Claim.** Where the row holds the id of the one task that may run it (``task_id``), a
  task finds it is superseded when the row was queued again since: :func:`claim` leaves the
  row alone, so a task the broker redelivers late is harmless.
* **Heartbeat.** While a task runs the job, a thread beats on the row (``heartbeat_at``):
  :func:`beating`.
* **Lost workers.** A running job whose heartbeat went stale lost its worker:
  :func:`recover_lost` queues it again under a new task id (:func:`requeue`), or gives up
  on it once it has had ``max_attempts`` tries.
* **Lost messages.** A job sent to the broker that no worker took while the broker's queue
  ran empty lost its message (a flushed or failed-over Redis): :func:`recover_unclaimed`
  queues it again under a new task id.

Plumbing: it imports no app, so the models and services of an app use it, never the reverse.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Protocol

from django.db import connection, models, transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

logger = logging.getLogger(__name__)


class Outbox(models.Model):
    """Mixin of a model whose rows are sent to a worker by a task: the fields it has.

    Declares none (the model declares them, with its own help texts): ``status``,
    ``attempts`` (the tries so far) and ``dispatched_at`` (when its task reached the broker;
    empty: not sent yet).
    """

    status: str
    attempts: int
    dispatched_at: datetime | None

    class Meta:
        abstract = True


class Job(Outbox):
    """Mixin of a model whose rows a worker claims, beats on and may lose: an
    :class:`Outbox` that also has ``task_id`` (the one task that may run it), ``started_at``
    and ``heartbeat_at`` (the worker's last sign of life)."""

    task_id: str
    started_at: datetime | None
    heartbeat_at: datetime | None

    class Meta:
        abstract = True

    @property
    def last_sign(self) -> datetime | None:
        """The worker's last sign of life: its last heartbeat, else the claim (what
        :func:`gone_quiet` compares in the database)."""
        return self.heartbeat_at or self.started_at


class Broker(Protocol):
    """How tasks reach the workers, by their registered names (``lib.broker``): each
    call sends once and fails fast, since the outbox row is the retry."""

    def publish(self, task: str, *args: object, task_id: str | None = None) -> None: ...

    def publish_many(
        self, task: str, calls: Sequence[tuple[tuple[object, ...], str | None]]
    ) -> tuple[int, Exception | None]: ...

    def queue_length(self) -> int | None: ...


@dataclass(frozen=True)
class JobKind[M: Outbox]:
    """One kind of job: its model, its task and what its status values mean."""

    model: type[M]
    #: The registered name of the task that takes the row's id and works on it.
    task: str
    #: What one job is called in the log and in thread names ("run").
    label: str
    #: Sends the tasks: ``lib.broker``, whose functions are looked up on each send (so a
    #: test's stand-in for ``lib.broker.publish`` is the one used).
    broker: Broker
    #: The status of a job waiting for its task to be sent and taken.
    queued: str = "queued"
    #: The status of a job a worker took (:func:`claim`). None: the kind's task takes no
    #: claim and it has no heartbeat (a notification's task reads the queued row itself).
    running: str | None = "running"
    #: The row holds the id of the one task that may run it (``task_id``): the task is
    #: sent under that id and superseded once the row is queued again. False: a new id for
    #: each send.
    task_ids: bool = True

    def __post_init__(self) -> None:
        field = self.model._meta.get_field("status")
        statuses = {value for value, _label in getattr(field, "choices", None) or ()}
        if unknown := {self.queued, self.running} - {None} - statuses:
            raise ValueError(f"{self.label}: {unknown} are not statuses of {self.model}")

    def rows(self) -> QuerySet[M]:
        return self.model._default_manager.all()


def new_task_id() -> str:
    """An id for the next task of a job (Celery's are UUIDs too)."""
    return str(uuid.uuid4())


def publish_once(
    broker: Broker, task: str, *args: object, task_id: str | None = None, what: str
) -> bool:
    """Send ``task`` once; False, and a warning that ``what`` was not sent, when the broker
    cannot be reached. Never raises: it runs after a commit, the outbox being the retry."""
    try:
        broker.publish(task, *args, task_id=task_id)
    except Exception as error:  # the broker's errors vary by transport; any means "not sent"
        logger.warning(
            "%s was not sent (%s: %s); the dispatcher sends it when the broker is back",
            what,
            type(error).__name__,
            error,
        )
        return False
    return True


# --- Outbox ----------------------------------------------------------------------------------


def dispatch[M: Outbox](kind: JobKind[M], pk: int) -> bool:
    """Send the task of job ``pk`` and note that it reached the broker; False, the job left
    for the dispatcher, when the broker cannot be reached. Never raises.

    With task ids, only a queued job is sent, under its task id, and the send is noted only
    if the job still has that id; without, it is sent as it is and the first send is noted.
    """
    rows = kind.rows().filter(pk=pk)
    task_id: str | None = None
    if kind.task_ids:
        task_id = rows.filter(status=kind.queued).values_list("task_id", flat=True).first()
        if task_id is None:
            return False
        sent = rows.filter(task_id=task_id)
    else:
        sent = rows.filter(dispatched_at=None)
    what = f"{kind.label} {pk} is saved but its task"
    if not publish_once(kind.broker, kind.task, pk, task_id=task_id, what=what):
        return False
    sent.update(dispatched_at=timezone.now())
    return True


def unsent[M: Outbox](kind: JobKind[M]) -> QuerySet[M]:
    """The queued jobs whose task never reached the broker."""
    return kind.rows().filter(status=kind.queued, dispatched_at=None)


def dispatch_pending[M: Outbox](
    kind: JobKind[M], *, order_by: str = "created_at", limit: int = 500
) -> list[int]:
    """Send the tasks of the oldest ``limit`` unsent jobs, one by one; the ids sent."""
    ids = list(unsent(kind).order_by(order_by).values_list("pk", flat=True)[:limit])
    return [pk for pk in ids if dispatch(kind, pk)]


def dispatch_many[M: Job](
    kind: JobKind[M], *, where: Mapping[str, object], about: str, order_by: Sequence[str] = ("pk",)
) -> int:
    """Send the tasks of the unsent jobs that match ``where`` (a group: a plan's chunks) over
    one connection; how many reached the broker. Never raises.

    The rows are locked while they are sent (rows another sender holds are skipped), so two
    senders never both send a job; ``about`` names the group in the warning.
    """
    with transaction.atomic():
        locked = unsent(kind).select_for_update(skip_locked=True).filter(**where)
        pending = list(locked.order_by(*order_by).values_list("pk", "task_id"))
        calls: list[tuple[tuple[object, ...], str | None]] = [((pk,), t) for pk, t in pending]
        sent, error = kind.broker.publish_many(kind.task, calls)
        if error is not None:
            logger.warning(
                "%s: %d of its %ss were not sent (%s: %s); the dispatcher sends them when the "
                "broker is back",
                about,
                len(calls) - sent,
                kind.label,
                type(error).__name__,
                error,
            )
        kind.rows().filter(pk__in=[pk for pk, _ in pending[:sent]]).update(
            dispatched_at=timezone.now()
        )
    return sent


# --- Claim and heartbeat ---------------------------------------------------------------------


def claim[M: Job](
    kind: JobKind[M],
    pk: int,
    task_id: str | None,
    *,
    related: Sequence[str] = (),
    **fields: object,
) -> M | None:
    """Mark job ``pk`` running for the task ``task_id``, one more attempt, with ``fields``.

    None, the row left alone, when it is gone, no longer queued or running (finished,
    cancelled), or when ``task_id`` is not the job's current dispatch (it was queued again
    since). ``related`` are read and locked with it. In its own transaction, or the caller's.
    """
    assert kind.running is not None, f"{kind.label}: a job without a running status"
    with transaction.atomic():
        found = kind.rows().select_for_update()
        if related:
            found = found.select_related(*related)
        row = found.filter(pk=pk).first()
        if row is None or row.status not in (kind.queued, kind.running):
            return None
        if task_id and row.task_id and task_id != row.task_id:
            logger.info("%s %s: task %s is superseded by %s", kind.label, pk, task_id, row.task_id)
            return None
        now = timezone.now()
        row.status, row.attempts = kind.running, row.attempts + 1
        row.started_at = row.heartbeat_at = now
        for name, value in fields.items():
            setattr(row, name, value)
        row.save(update_fields=["status", "attempts", "started_at", "heartbeat_at", *fields])
        return row


def beat[M: Job](kind: JobKind[M], pk: int) -> None:
    """Write a sign of life on job ``pk`` while it is running."""
    kind.rows().filter(pk=pk, status=kind.running).update(heartbeat_at=timezone.now())


def beating[M: Job](
    kind: JobKind[M], pk: int, every_s: float | None
) -> AbstractContextManager[None]:
    """Beat on job ``pk`` every ``every_s`` seconds while the block runs (:func:`heartbeat`)."""
    return heartbeat(partial(beat, kind, pk), every_s, name=f"{kind.label}-{pk}-heartbeat")


@contextmanager
def heartbeat(beat: Callable[[], object], every_s: float | None, *, name: str) -> Iterator[None]:
    """Call ``beat`` every ``every_s`` seconds from a thread while the block runs, so the row
    does not look lost during a step that reports no progress; nothing when ``every_s`` is
    None (eager mode: nobody watches)."""
    if not every_s:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(every_s):
                beat()
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s)


# --- Lost workers ----------------------------------------------------------------------------


def gone_quiet[M: Job](running: QuerySet[M], *, stale_before: datetime) -> QuerySet[M]:
    """The rows of ``running`` whose worker stopped beating: last heartbeat (or start, or
    neither) before ``stale_before``. Locked for update; rows another dispatcher holds are
    skipped. Call it inside a transaction."""
    signed = running.select_for_update(skip_locked=True).alias(
        last_sign=Coalesce("heartbeat_at", "started_at")
    )
    lost: QuerySet[M] = signed.filter(Q(last_sign__lt=stale_before) | Q(last_sign=None))  # type: ignore[assignment]
    return lost


def requeue[M: Job](
    kind: JobKind[M], row: M, *, send: Callable[[M], object], **fields: object
) -> None:
    """Queue ``row`` again, with ``fields``, under a new task id, and ``send`` it once the
    transaction commits: a task of an earlier dispatch that still turns up (the broker
    redelivers it) finds it is no longer the row's and leaves it alone."""
    row.status, row.task_id, row.dispatched_at = kind.queued, new_task_id(), None
    for name, value in fields.items():
        setattr(row, name, value)
    row.save(update_fields=["status", "task_id", "dispatched_at", *fields])
    transaction.on_commit(partial(send, row))


def recover_lost[M: Job](
    kind: JobKind[M],
    *,
    stale_before: datetime,
    max_attempts: int,
    give_up: Callable[[M], object],
    send: Callable[[M], object],
    **requeue_fields: object,
) -> tuple[list[int], list[int]]:
    """Queue again (:func:`requeue`, with ``requeue_fields``) the running jobs whose worker
    stopped beating before ``stale_before``; ``give_up`` on those that already had
    ``max_attempts`` tries, called with the locked row inside the transaction. Returns the
    ids queued again and the ids given up on."""
    assert kind.running is not None, f"{kind.label}: a job without a running status"
    requeued, failed = [], []
    with transaction.atomic():
        running = kind.rows().filter(status=kind.running)
        for row in gone_quiet(running, stale_before=stale_before):
            if row.attempts >= max_attempts:
                give_up(row)
                failed.append(row.pk)
            else:
                requeue(kind, row, send=send, **requeue_fields)
                requeued.append(row.pk)
    if requeued or failed:
        logger.warning(
            "%ss whose worker was lost: queued again %s, failed %s", kind.label, requeued, failed
        )
    return requeued, failed


def recover_unclaimed[M: Job](
    kind: JobKind[M], *, sent_before: datetime, send: Callable[[M], object], limit: int = 200
) -> list[int]:
    """Queue again (:func:`requeue`, a new task id) the queued jobs whose task reached the
    broker before ``sent_before`` and that no worker has taken although the broker's queue
    is empty: their message was lost. Returns their ids.

    Nothing while messages wait in the queue (or the broker cannot be asked): a job behind
    them is late, not lost, and sending it again would only put it at the back. Should the
    superseded message turn up after all, its task finds the row is no longer its own
    (:func:`claim`) and does nothing.
    """
    assert kind.task_ids, f"{kind.label}: a job whose task ids are not kept"
    if kind.broker.queue_length() != 0:
        return []
    requeued = []
    with transaction.atomic():
        waiting = kind.rows().filter(status=kind.queued, dispatched_at__lt=sent_before)
        for row in waiting.select_for_update(skip_locked=True).order_by("pk")[:limit]:
            requeue(kind, row, send=send)
            requeued.append(row.pk)
    if requeued:
        logger.warning(
            "%ss sent but never taken while the queue is empty (their message was lost): "
            "sent again %s",
            kind.label,
            requeued,
        )
    return requeued
