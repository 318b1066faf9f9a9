"""Capacity plans: saved in a request, searched by the workers chunk by chunk, then merged.

:func:`capacity_plan_create` checks the question, reads the prices into priced options and
writes the plan and its chunks (:func:`planner.capacity.search.plan_chunks`); once committed, each
chunk's task is sent (``planner.capacity_chunk``). A request never searches: it writes rows.

Each chunk row is its own outbox, as a run is (:mod:`lib.jobs`): it holds the
id of the one task that may run it, ``dispatched_at`` stays empty until that task reached the
broker, and a done chunk is never searched again, so a task redelivered after its worker died
(tasks are acknowledged late) is harmless. The worker that finishes the last chunk sends the
merge task (``planner.capacity_merge``), which prices every point exactly as a run is priced
and stores the plan's result. The dispatcher (``celery beat``) sends what the broker missed,
queues again the chunks whose worker stopped beating and re-sends a merge that never ran.

Cancelling marks the plan and its unfinished chunks cancelled: a chunk task that arrives
later finds it so and does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from estimator.core import ESTIMATOR_VERSION, ScenarioError, validate_scenario
from lib import broker, jobs
from lib.actors import Actor, actor_user
from organisations.models import Organisation
from organisations.selectors import organisations_for
from planner.capacity.models import CapacityPlan, CapacityPlanChunk, ChunkStatus, PlanStatus
from planner.capacity.pruning import Pruner
from planner.capacity.search import (
    PricedOption,
    capacity_options,
    capacity_scenario,
    chunk_compute,
    deadline_days,
    plan_chunks,
    plan_merge,
    plan_pruner,
)
from planner.common.access import AUTHOR_ROLES, role_assert
from planner.common.errors import PlannerError
from planner.scenarios.models import (
    Project,
    Scenario,
    heartbeat_stale_before,
    unclaimed_before,
)
from planner.scenarios.prices import price_get, price_key_parse
from planner.scenarios.services.scenarios import scenario_create, scenario_name_free
from pricing.access import visible
from pricing.currency import currency_code_check
from pricing.errors import PricingError
from pricing.models import PriceBook

logger = logging.getLogger(__name__)

#: The largest cluster a plan searches: beyond any published training run (Llama 3 405B
#: trained on 16,384 H100s; the largest announced clusters hold ~100,000). [accelerators]
MAX_PLAN_GPUS = 100_000

#: The tasks of a plan (``planner.tasks``), sent by these names: the one that sends its
#: chunks' tasks, a chunk's search, and the merge of a plan whose chunks are all done.
CAPACITY_DISPATCH_TASK = "planner.capacity_dispatch"
CAPACITY_CHUNK_TASK = "planner.capacity_chunk"
CAPACITY_MERGE_TASK = "planner.capacity_merge"
#: Chunks as jobs, queued then running: each holds the id of the one task that may search it;
#: a plan's chunks are sent together (:func:`plan_dispatch`).
CHUNK_JOBS = jobs.JobKind(
    model=CapacityPlanChunk, task=CAPACITY_CHUNK_TASK, label="chunk", broker=broker
)


class PlanNotCancellable(PlannerError):
    """Only a queued or running plan can be cancelled."""

    code = "plan_not_cancellable"
    kind = "conflict"


@dataclass(frozen=True)
class CapacityQuestion:
    """What a plan asks: train this model on ``tokens`` by ``deadline`` within ``budget``.

    The model is a preset's (``model_preset``) or an existing scenario's (``scenario``), or,
    for a re-run, the frozen ``spec`` of the earlier plan.
    """

    deadline: date
    currency: str
    max_gpus: int
    model_preset: str = ""
    scenario: Scenario | None = None
    spec: dict[str, Any] | None = None
    tokens: float | None = None
    budget: Decimal | None = None
    book: PriceBook | None = None
    include_spot: bool = False
    include_quotes: bool = True
    include_onprem: bool = True
    #: A re-run's record of the scenario first asked about (its id and name), since it
    #: asks with the frozen ``spec`` instead.
    asked_scenario: Mapping[str, Any] | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> CapacityQuestion:
        """The question from a form's cleaned data or a serializer's validated data."""
        return cls(
            deadline=data["deadline"],
            currency=data["currency"],
            max_gpus=data["max_gpus"],
            model_preset=data.get("model_preset") or "",
            scenario=data.get("scenario"),
            tokens=data.get("tokens"),
            budget=data.get("budget"),
            book=data.get("book"),
            include_spot=bool(data.get("include_spot")),
            include_quotes=bool(data.get("include_quotes")),
            include_onprem=bool(data.get("include_onprem")),
        )

    def as_inputs(self) -> dict[str, Any]:
        """JSON of the question as asked: what the page shows and a re-run asks again."""
        asked = dict(self.asked_scenario or {})
        if self.scenario is not None:
            asked = {"scenario": self.scenario.pk, "scenario_name": str(self.scenario)}
        return {
            "model_preset": self.model_preset,
            "scenario": asked.get("scenario"),
            "scenario_name": asked.get("scenario_name", ""),
            "tokens": self.tokens,
            "deadline": self.deadline.isoformat(),
            "budget": None if self.budget is None else str(self.budget),
            "currency": self.currency,
            "max_gpus": self.max_gpus,
            "book": self.book.pk if self.book is not None else None,
            "book_name": self.book.name if self.book is not None else "",
            "include_spot": self.include_spot,
            "include_quotes": self.include_quotes,
            "include_onprem": self.include_onprem,
        }


def _organisation_of(user: Actor, project: Project | None) -> Organisation:
    if project is not None:
        return project.organisation
    organisations = list(organisations_for(user)[:2])
    if len(organisations) != 1:
        raise PlannerError(
            "name the project the plan is for (you belong to several organisations)"
            if organisations
            else "you belong to no organisation",
            field="project",
        )
    return organisations[0]


def _question_check(question: CapacityQuestion, organisation: Organisation, today: date) -> None:
    """Each input's own rule, naming the field (the form and the serializer check them too;
    this is what holds for every caller)."""
    if not question.model_preset and question.scenario is None and question.spec is None:
        raise PlannerError("pick a model preset or a scenario", field="model_preset")
    if question.scenario is not None and question.scenario.project.organisation != organisation:
        raise PlannerError("no such scenario in this organisation", field="scenario")
    if deadline_days(question.deadline, today=today) < 1:
        raise PlannerError("pick a date after today", field="deadline")
    if not 1 <= question.max_gpus <= MAX_PLAN_GPUS:
        raise PlannerError(f"must be between 1 and {MAX_PLAN_GPUS:,}", field="max_gpus")
    if question.budget is not None and question.budget < 0:
        raise PlannerError("must not be negative", field="budget")
    if question.tokens is not None and not question.tokens > 0:
        raise PlannerError("must be more than 0", field="tokens")
    try:
        currency_code_check(question.currency)
    except PricingError as error:
        raise PlannerError(error.message, field="currency") from None
    if not (question.book or question.include_quotes or question.include_onprem):
        raise PlannerError("pick at least one price source", field="book")
    if question.book is not None:
        books = PriceBook.objects.filter(pk=question.book.pk, status=PriceBook.Status.PUBLISHED)
        if not visible(books, organisation, field="organisation", public=True).exists():
            raise PlannerError("no such published price book", field="book")


def _plan_scenario(question: CapacityQuestion) -> dict[str, Any]:
    try:
        scenario = capacity_scenario(
            preset_id=question.model_preset,
            spec=question.spec
            if question.spec is not None
            else (question.scenario.spec if question.scenario is not None else None),
            tokens=question.tokens,
        )
        validate_scenario({**scenario, "cluster": {"accelerator": "H100-SXM", "num_gpus": 8}})
    except ScenarioError as error:
        where = "tokens" if error.key.startswith("training.tokens") else "model_preset"
        raise PlannerError(f"{error.key}: {error.reason}", field=where) from None
    return scenario


def _plan_name(question: CapacityQuestion, scenario: dict[str, Any]) -> str:
    """``Llama 3 70B · 2 T tokens by 2027-06-30``."""
    model = str(scenario.get("model", {}).get("name") or question.model_preset or "model")
    tokens = float(scenario["training"]["tokens"])
    return f"{model} · {tokens / 1e12:,.3g} T tokens by {question.deadline:%Y-%m-%d}"[:200]


@transaction.atomic
def capacity_plan_create(
    *,
    user: Actor,
    question: CapacityQuestion,
    project: Project | None = None,
    rerun_of: CapacityPlan | None = None,
) -> CapacityPlan:
    """Save a queued plan and its chunks; their tasks are sent once the rows are committed.

    The prices are read now and frozen on the plan (a re-run reads them again). With no
    priced option the plan is finished at once: nothing to search, the reasons listed.
    """
    organisation = _organisation_of(user, project)
    role_assert(user, organisation, AUTHOR_ROLES, action="plan capacity")
    today = timezone.localdate()
    _question_check(question, organisation, today)
    scenario = _plan_scenario(question)
    built = capacity_options(
        book=question.book,
        include_quotes=question.include_quotes,
        include_onprem=question.include_onprem,
        include_spot=question.include_spot,
        currency=question.currency,
        max_gpus=question.max_gpus,
        on=today,
        viewer=organisation,
    )
    chunks = plan_chunks(built.options)
    plan = CapacityPlan.objects.create(
        organisation=organisation,
        project=project,
        name=_plan_name(question, scenario),
        inputs=question.as_inputs(),
        scenario=scenario,
        options=[option.as_json() for option in built.options],
        skipped=built.skipped,
        deadline=question.deadline,
        deadline_days=deadline_days(question.deadline, today=today),
        budget=question.budget,
        currency=question.currency,
        chunks_total=len(chunks),
        rerun_of=rerun_of,
        created_by=actor_user(user),
    )
    CapacityPlanChunk.objects.bulk_create(
        CapacityPlanChunk(plan=plan, index=index, work=work, task_id=jobs.new_task_id())
        for index, work in enumerate(chunks)
    )
    if not chunks:
        _merge_into(plan)
    else:
        transaction.on_commit(partial(plan_send, plan_id=plan.pk))
    return plan


def capacity_plan_rerun(*, user: Actor, plan: CapacityPlan) -> CapacityPlan:
    """A new plan asking the same question of today's prices (the model as frozen)."""
    inputs = plan.inputs
    book = None
    if inputs.get("book") is not None:
        book = PriceBook.objects.filter(pk=inputs["book"]).first()
        if book is None:
            raise PlannerError(f"price book '{inputs.get('book_name')}' was deleted", field="book")
    question = CapacityQuestion(
        deadline=plan.deadline,
        currency=plan.currency,
        max_gpus=int(inputs["max_gpus"]),
        model_preset=inputs.get("model_preset") or "",
        spec=plan.scenario,
        tokens=inputs.get("tokens"),
        budget=plan.budget,
        book=book,
        include_spot=bool(inputs.get("include_spot")),
        include_quotes=bool(inputs.get("include_quotes")),
        include_onprem=bool(inputs.get("include_onprem")),
        asked_scenario={key: inputs.get(key) for key in ("scenario", "scenario_name")},
    )
    return capacity_plan_create(user=user, question=question, project=plan.project, rerun_of=plan)


@transaction.atomic
def capacity_plan_cancel(*, user: Actor, plan: CapacityPlan) -> CapacityPlan:
    """Stop a queued or running plan: its unfinished chunks are not searched."""
    role_assert(user, plan.organisation, AUTHOR_ROLES, action="cancel capacity plans")
    current = CapacityPlan.objects.select_for_update().get(pk=plan.pk)
    if current.status == PlanStatus.CANCELLED:
        return current
    if current.is_finished:
        raise PlanNotCancellable(f"Plan {plan.pk} is {current.status}; it cannot be cancelled.")
    now = timezone.now()
    current.status, current.finished_at = PlanStatus.CANCELLED, now
    current.cancelled_by = actor_user(user)
    current.save(update_fields=["status", "finished_at", "cancelled_by"])
    current.chunks.filter(status__in=[ChunkStatus.QUEUED, ChunkStatus.RUNNING]).update(
        status=ChunkStatus.CANCELLED, finished_at=now
    )
    return current


def plan_send(*, plan_id: int) -> bool:
    """After the plan's commit, send one task that sends its chunks' tasks from a worker:
    the request publishes once, whatever the plan's size. Never raises; when the broker
    cannot be reached the chunks stay unsent and the dispatcher sends them."""
    what = f"plan {plan_id} is saved but the task that sends its chunks"
    return jobs.publish_once(broker, CAPACITY_DISPATCH_TASK, plan_id, what=what)


def plan_dispatch(*, plan_id: int) -> int:
    """Send the tasks of the plan's queued chunks not yet sent; how many reached the broker.

    The rows are locked while they are sent (others' locked rows skipped), so the
    dispatcher and the plan's own send never both send a chunk. Never raises.
    """
    return jobs.dispatch_many(
        CHUNK_JOBS, where={"plan_id": plan_id}, about=f"plan {plan_id}", order_by=["index"]
    )


def _dispatch_again(chunk: CapacityPlanChunk) -> None:
    plan_dispatch(plan_id=chunk.plan_id)


def _claim(chunk_id: int, task_id: str | None, worker: str) -> CapacityPlanChunk | None:
    """Mark the chunk running, and its plan if it was queued; None when the chunk is
    finished, cancelled, or not this task's. The plan's row is locked with the chunk's."""
    with transaction.atomic():
        chunk = jobs.claim(CHUNK_JOBS, chunk_id, task_id, related=["plan"], worker=worker[:200])
        if chunk is not None:
            CapacityPlan.objects.filter(pk=chunk.plan_id, status=PlanStatus.QUEUED).update(
                status=PlanStatus.RUNNING, started_at=chunk.started_at
            )
        return chunk


def capacity_chunk_execute(
    *,
    chunk_id: int,
    task_id: str | None = None,
    worker: str = "",
    heartbeat_s: float | None = None,
) -> str:
    """Search one chunk and store its points; the chunk task's body. Returns what happened.

    The last chunk of a plan to finish sends the merge task. An unexpected error fails the
    plan with the reason and is re-raised, so the worker logs it.
    """
    chunk = _claim(chunk_id, task_id, worker)
    if chunk is None:
        return "skipped (finished, cancelled or superseded)"
    try:
        with jobs.beating(CHUNK_JOBS, chunk_id, heartbeat_s):
            found = chunk_compute(chunk.plan.scenario, chunk.work, _chunk_pruner(chunk))
    except Exception as error:
        logger.exception("chunk %s of plan %s failed", chunk_id, chunk.plan_id)
        _plan_fail(chunk, f"internal error ({type(error).__name__}): {error}")
        raise
    return _chunk_store(chunk, found)


def _chunk_pruner(chunk: CapacityPlanChunk) -> Pruner:
    """Prune with every point the plan's chunks found so far: any searched point may rule a
    size out (:mod:`planner.capacity.pruning`), so what another worker found helps too."""
    plan = chunk.plan
    options = [PricedOption.from_json(option) for option in plan.options]
    pruner = plan_pruner(options, deadline_days=plan.deadline_days, budget=plan.budget)
    done = plan.chunks.filter(status=ChunkStatus.DONE).exclude(pk=chunk.pk)
    pruner.learn_chunks(result for result in done.values_list("result", flat=True) if result)
    return pruner


def _chunk_store(chunk: CapacityPlanChunk, found: dict[str, Any]) -> str:
    with transaction.atomic():
        plan = CapacityPlan.objects.select_for_update().get(pk=chunk.plan_id)
        now = timezone.now()
        mine = CapacityPlanChunk.objects.filter(
            pk=chunk.pk, task_id=chunk.task_id, status=ChunkStatus.RUNNING
        )
        if plan.is_finished:
            mine.update(status=ChunkStatus.CANCELLED, finished_at=now)
            return f"plan {plan.status}"
        if not mine.update(status=ChunkStatus.DONE, result=found, finished_at=now):
            return "superseded"
        done = plan.chunks.filter(status=ChunkStatus.DONE).count()
        plan.progress = done / plan.chunks_total
        plan.save(update_fields=["progress"])
        if done == plan.chunks_total:
            plan.merge_sent_at = now
            plan.save(update_fields=["merge_sent_at"])
            transaction.on_commit(partial(_merge_send, plan_id=plan.pk))
    return "done"


def _plan_fail(chunk: CapacityPlanChunk, error: str) -> None:
    now = timezone.now()
    with transaction.atomic():
        CapacityPlanChunk.objects.filter(pk=chunk.pk).update(
            status=ChunkStatus.FAILED, finished_at=now
        )
        CapacityPlan.objects.filter(pk=chunk.plan_id).exclude(
            status__in=[PlanStatus.SUCCEEDED, PlanStatus.FAILED, PlanStatus.CANCELLED]
        ).update(
            status=PlanStatus.FAILED,
            error=f"chunk {chunk.index} ({chunk.work['accelerator']}): {error}",
            finished_at=now,
        )
        CapacityPlanChunk.objects.filter(
            plan_id=chunk.plan_id, status__in=[ChunkStatus.QUEUED, ChunkStatus.RUNNING]
        ).update(status=ChunkStatus.CANCELLED, finished_at=now)


def _merge_send(*, plan_id: int) -> bool:
    return jobs.publish_once(
        broker, CAPACITY_MERGE_TASK, plan_id, what=f"plan {plan_id}: the merge task"
    )


def _merge_into(plan: CapacityPlan) -> None:
    """Price and merge the plan's chunk results into ``plan.result`` (the caller locks)."""
    options = [PricedOption.from_json(option) for option in plan.options]
    results = [chunk.result for chunk in plan.chunks.order_by("index") if chunk.result]
    merged = plan_merge(options, results, deadline_days=plan.deadline_days, budget=plan.budget)
    plan.result = merged
    plan.status, plan.progress, plan.finished_at = PlanStatus.SUCCEEDED, 1.0, timezone.now()
    plan.estimator_version = ESTIMATOR_VERSION
    plan.save(update_fields=["result", "status", "progress", "finished_at", "estimator_version"])


def capacity_plan_merge(*, plan_id: int) -> str:
    """The merge task's body: once every chunk is done, price and store the plan's result.
    Idempotent: a finished plan, or one with chunks still to search, is left as it is."""
    with transaction.atomic():
        plan = CapacityPlan.objects.select_for_update().filter(pk=plan_id).first()
        if plan is None or plan.is_finished:
            return "skipped (finished)"
        if plan.chunks.exclude(status=ChunkStatus.DONE).exists():
            return "waiting for chunks"
        _merge_into(plan)
    return "succeeded"


def capacity_plans_dispatch_pending() -> dict[str, list[int]]:
    """The dispatcher's share for plans: send unsent chunks, queue again (or give up on)
    chunks whose worker went quiet, send again chunks whose message the broker lost, send
    merges that never ran. Ids of what it did."""
    unsent = jobs.unsent(CHUNK_JOBS).values_list("plan_id", flat=True).distinct()
    sent = [plan_id for plan_id in list(unsent[:200]) if plan_dispatch(plan_id=plan_id)]
    requeued, failed = _chunks_recover_lost()
    resent = jobs.recover_unclaimed(
        CHUNK_JOBS, sent_before=unclaimed_before(timezone.now()), send=_dispatch_again
    )
    stale = heartbeat_stale_before(timezone.now())
    merges = list(
        CapacityPlan.objects.filter(status__in=[PlanStatus.QUEUED, PlanStatus.RUNNING])
        .filter(merge_sent_at__lt=stale)
        .values_list("pk", flat=True)[:200]
    )
    merged = [plan_id for plan_id in merges if _merge_send(plan_id=plan_id)]
    CapacityPlan.objects.filter(pk__in=merged).update(merge_sent_at=timezone.now())
    return {
        "plans_sent": sent,
        "chunks_requeued": requeued,
        "chunks_resent": resent,
        "chunks_failed": failed,
        "merges_sent": merged,
    }


def _chunks_recover_lost() -> tuple[list[int], list[int]]:
    return jobs.recover_lost(
        CHUNK_JOBS,
        stale_before=heartbeat_stale_before(timezone.now()),
        max_attempts=settings.RUN_MAX_ATTEMPTS,
        give_up=_fail_lost,
        send=_dispatch_again,  # its plan's unsent chunks, over one connection
    )


def _fail_lost(chunk: CapacityPlanChunk) -> None:
    """Fail the plan of a chunk that lost its worker too often, once the dispatcher's
    transaction is committed: that writes the plan's row and its other chunks."""
    reason = f"its worker was lost {chunk.attempts} times (killed, out of memory or restarted)"
    transaction.on_commit(partial(_plan_fail, chunk, reason))


def plan_point(plan: CapacityPlan, option_index: int, num_gpus: int) -> dict[str, Any] | None:
    """The plan's point for option ``option_index`` at ``num_gpus``, if it found one."""
    result = plan.result or {}
    for group in ("feasible", "frontier", "points"):
        for point in result.get(group, []):
            if point["option"] == option_index and point["num_gpus"] == num_gpus:
                return dict(point)
    return None


def capacity_option_scenario_create(
    *,
    user: Actor,
    plan: CapacityPlan,
    option_index: int,
    num_gpus: int,
    project: Project,
    name: str = "",
) -> Scenario:
    """A scenario in ``project`` with the option's cluster, layout and price record: a run
    of it costs what the plan said (same estimate, same pricing)."""
    if project.organisation_id != plan.organisation_id:
        raise PlannerError("no such project in the plan's organisation", field="project")
    if plan.status != PlanStatus.SUCCEEDED:
        raise PlannerError("the plan has no result yet", field="option")
    point = plan_point(plan, option_index, num_gpus)
    if point is None or not 0 <= option_index < len(plan.options):
        raise PlannerError(
            f"the plan has no option {option_index} at {num_gpus} GPUs", field="option"
        )
    option = PricedOption.from_json(plan.options[option_index])
    source, pk = price_key_parse(option.key)
    price = price_get(source, pk)
    if price is None:
        raise PlannerError(f"its price ({option.label}) was deleted since the plan", field="option")
    spec = {
        **plan.scenario,
        "cluster": {"accelerator": option.accelerator, "num_gpus": num_gpus},
        "parallelism": point["parallelism"],
    }
    title = name.strip() or f"{option.accelerator} x {num_gpus:,} · {option.label}"
    return scenario_create(
        user=user,
        project=project,
        name=scenario_name_free(project, title),
        description=f"From capacity plan {plan.pk} ({plan.name}).",
        spec=spec,
        price_source=source,
        price=price,
        model_preset=str(plan.inputs.get("model_preset") or ""),
    )
