"""Estimation runs: start one (a row, then a Celery task on commit), execute it, retry it.

A run copies the scenario's inputs and price when it starts. The run row is its own outbox:
``dispatched_at`` stays empty until its task reached the broker, so a run started while the
broker was down is saved and :func:`runs_dispatch_pending` (run by ``celery beat``) sends it
later. The task calls :func:`run_execute` with the run's id; that function is idempotent (a
finished run is left as it is), so a task redelivered after its worker died simply runs
again. The worker beats on the row (``heartbeat_at``) while it runs; a run whose heartbeat
went stale lost its worker, and the dispatcher queues it again or, after
``RUN_MAX_ATTEMPTS``, fails it with the reason. All of that is :mod:`lib.jobs`'s,
for runs as ``RUN_JOBS``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from estimator.core import ESTIMATOR_VERSION, ScenarioError, estimate
from estimator.core.estimate import stack_alternatives
from estimator.core.levers import levers
from estimator.core.montecarlo import MAX_SAMPLES, Uncertainty, monte_carlo
from estimator.core.sensitivity import sensitivity
from lib import broker, jobs
from lib.actors import Actor, actor_user
from planner.capacity.search import node_size
from planner.common.access import AUTHOR_ROLES, role_assert
from planner.common.errors import PlannerError, RunNotRetryable
from planner.scenarios.bill import input_pipeline, whole_bill
from planner.scenarios.budget_figures import budget_figures, cost_of
from planner.scenarios.models import (
    WORKER_LOST,
    EstimationRun,
    RunStatus,
    Scenario,
    heartbeat_stale_before,
    unclaimed_before,
)
from planner.scenarios.prices import price_snapshot, price_usage
from pricing.errors import PricingError
from pricing.models import Accelerator
from pricing.selectors import money_convert

logger = logging.getLogger(__name__)
DEFAULT_SAMPLES = 4000
#: The task that executes a run (``planner.tasks``), sent by this name.
ESTIMATION_RUN_TASK = "planner.estimation_run"
#: Runs as jobs, queued then running: each holds the id of the one task that may run it.
RUN_JOBS = jobs.JobKind(model=EstimationRun, task=ESTIMATION_RUN_TASK, label="run", broker=broker)


def run_dispatch(*, run_id: int) -> bool:
    """Send the run's task to the broker; False, and the run left for the dispatcher, when
    the broker cannot be reached. Never raises: it runs after the commit of a request."""
    return jobs.dispatch(RUN_JOBS, run_id)


def _dispatch_again(run: EstimationRun) -> None:
    run_dispatch(run_id=run.pk)


@transaction.atomic
def run_start(
    *,
    user: Actor,
    scenario: Scenario,
    seed: int | None = None,
    samples: int = DEFAULT_SAMPLES,
) -> EstimationRun:
    """Create a queued run of ``scenario`` and enqueue its task once the row is committed."""
    role_assert(user, scenario.project.organisation, AUTHOR_ROLES, action="run estimations")
    if not 100 <= samples <= MAX_SAMPLES:
        raise PlannerError(f"must be between 100 and {MAX_SAMPLES:,}", field="samples")
    if seed is not None and not 0 <= seed < 2**63:
        raise PlannerError("must be between 0 and 2^63 - 1", field="seed")
    # Lock the scenario's row: a delete in flight finishes first, and then there is nothing
    # to run (rather than a run pointing at a deleted scenario).
    locked = Scenario.objects.select_for_update(no_key=True).filter(pk=scenario.pk)
    if locked.values_list("pk", flat=True).first() is None:
        raise PlannerError("was deleted while the run was being started", field="scenario")
    assert scenario.price is not None  # the model's check constraint guarantees one source
    # What a run adds to the scenario's price: the whole bill's other prices (a few queries,
    # so only here, not where scenarios are listed with their prices).
    price = {**price_snapshot(scenario), "usage": price_usage(scenario.price)}
    run = EstimationRun.objects.create(
        scenario=scenario,
        seed=secrets.randbelow(2**31) if seed is None else seed,
        samples=samples,
        inputs={
            "scenario": with_capacity(scenario.spec, price),
            "pue": str(scenario.pue),
            "utilisation": [str(scenario.utilisation_low), str(scenario.utilisation_high)],
        },
        price=price,
        created_by=actor_user(user),
        task_id=jobs.new_task_id(),
    )
    transaction.on_commit(partial(run_dispatch, run_id=run.pk))
    return run


def with_capacity(spec: dict[str, Any], price: dict[str, Any]) -> dict[str, Any]:
    """The scenario a run estimates: priced at a spot price, its whole run is on spot
    capacity (``run.capacity``: preemptions join the whole-run parts) unless it says so."""
    if price.get("pricing_type") != "spot":
        return spec
    run = dict(spec.get("run") or {})
    run.setdefault("capacity", "spot")
    return {**spec, "run": run}


@transaction.atomic
def run_retry(*, user: Actor, run: EstimationRun) -> EstimationRun:
    """Queue a failed run again, with the same inputs, price and seed; or a run that waits
    for a worker although its task was sent long ago (its message may be lost), under a new
    task id, so that the earlier message does nothing should it turn up."""
    role_assert(user, run.scenario.project.organisation, AUTHOR_ROLES, action="retry runs")
    current = EstimationRun.objects.select_for_update().get(pk=run.pk)
    if not current.retryable:
        raise RunNotRetryable(
            f"Run {run.pk} is {current.status}; only a failed run, or one that waited more "
            f"than {settings.JOB_UNCLAIMED_AFTER_S} s for a worker, is retried."
        )
    jobs.requeue(
        RUN_JOBS, current, send=_dispatch_again, progress=0.0, progress_message="", error=""
    )
    return current


def _progress_report(run_id: int) -> Callable[[float, str], None]:
    def report(fraction: float, message: str) -> None:
        EstimationRun.objects.filter(pk=run_id).update(
            progress=min(max(fraction, 0.0), 1.0),
            progress_message=message[:200],
            heartbeat_at=timezone.now(),
        )

    return report


def _tdp_w(catalog_id: str) -> float:
    accelerator = Accelerator.objects.filter(catalog_id=catalog_id).first()
    return float(accelerator.tdp_w) if accelerator else 0.0


def _converted(run: EstimationRun, budget: dict[str, Any]) -> dict[str, Any] | None:
    """The P50 and P90 cost in the organisation's base currency, with the rate used."""
    target = run.scenario.project.organisation.base_currency
    if budget["currency"] == target:
        return None
    try:
        p50, p90 = (
            money_convert(
                amount=Decimal(budget["cost"][key]),
                from_currency=budget["currency"],
                to_currency=target,
                on=timezone.localdate(),
            )
            for key in ("p50", "p90")
        )
    except PricingError as error:
        return {"currency": target, "error": error.message}
    return {
        "currency": target,
        "p50": str(p50.amount.quantize(Decimal("0.01"))),
        "p90": str(p90.amount.quantize(Decimal("0.01"))),
        "rate": str(p50.rate),
        "rate_date": p50.rate_date.isoformat(),
        "rate_source": p50.rate_source,
    }


def _minimum_spend(price: dict[str, Any]) -> Decimal | None:
    return Decimal(price["minimum_spend"]) if price.get("minimum_spend") else None


def _committed(price: dict[str, Any]) -> tuple[int, int] | None:
    """The accelerators and months a committed price commits, when the run copied them."""
    if not price.get("minimum_spend") or not price.get("term_months"):
        return None
    return int(price["committed_accelerators"]), int(price["term_months"])


def run_compute(run: EstimationRun, report: Callable[[float, str], None]) -> dict[str, Any]:
    """Estimate, Monte Carlo and budget of a run's frozen inputs (no writes)."""
    spec = run.inputs["scenario"]
    report(
        0.05, "estimating (searching layouts)" if spec["parallelism"] == "auto" else "estimating"
    )
    result = estimate(spec)
    result["software_stack"] = stack_alternatives(spec, result)
    low, high = (float(value) for value in run.inputs["utilisation"])
    uncertainty = Uncertainty(utilisation=(low, high))
    report(0.2, f"Monte Carlo, {run.samples:,} samples")
    montecarlo = monte_carlo(
        spec,
        seed=run.seed,
        samples=run.samples,
        uncertainty=uncertainty,
        progress=lambda fraction: report(0.2 + 0.75 * fraction, "Monte Carlo"),
        baseline=result,
    )
    budget = budget_figures(
        estimate=result,
        montecarlo=montecarlo,
        price_per_gpu_hour=Decimal(run.price["price_per_gpu_hour"]),
        currency=run.price["currency"],
        tokens=float(spec["training"]["tokens"]),
        tdp_w=_tdp_w(spec["cluster"]["accelerator"]),
        pue=Decimal(run.inputs["pue"]),
        minimum_spend=_minimum_spend(run.price),
        committed=_committed(run.price),
    ).as_json()
    budget["converted"] = _converted(run, budget)
    budget["bill"] = run_bill(run, result, budget)
    report(0.96, "levers: single changes that save time or money")
    found = priced_levers(run, levers(spec)["levers"], budget)
    report(0.98, "sensitivity: what moves the budget")
    moves = sensitivity(
        spec,
        price_per_gpu_hour=float(run.price["price_per_gpu_hour"]),
        uncertainty=uncertainty,
        baseline=result,
        minimum_cost=float(_minimum_spend(run.price) or 0),
    )
    return {
        "result": result,
        "montecarlo": montecarlo,
        "budget": budget,
        "levers": found,
        "sensitivity": moves,
    }


def _usage(price: dict[str, Any], key: str) -> Decimal | None:
    found = (price.get("usage") or {}).get(key)
    if found is None:
        return None
    return Decimal(found["price"] if isinstance(found, dict) else found)


def _grid(price: dict[str, Any]) -> float | None:
    grid = (price.get("usage") or {}).get("grid_gco2e_per_kwh")
    return None if grid is None else float(grid["value"])


def run_bill(run: EstimationRun, result: dict[str, Any], budget: dict[str, Any]) -> dict[str, Any]:
    """The whole bill beyond accelerator-hours (``planner/scenarios/bill.py``) at the prices the run
    froze, and what the input pipeline must deliver per node."""
    spec = run.inputs["scenario"]
    bill = whole_bill(
        estimate=result,
        tokens=float(spec["training"]["tokens"]),
        storage_price_per_gb_month=_usage(run.price, "storage_per_gb_month"),
        egress_price_per_gb=_usage(run.price, "egress_per_gb"),
        energy_tariff_per_kwh=_usage(run.price, "energy_per_kwh"),
        energy_kwh=Decimal(budget["energy_kwh"]),
        currency=run.price["currency"],
        carbon_gco2e_per_kwh=_grid(run.price),
        run_days=float(budget["training_days"]["p50"]),
        priced_by=run.price.get("provider") or run.price["label"],
    ).as_json()
    stated = spec.get("data_pipeline") or {}
    bill["input_pipeline"] = input_pipeline(
        result,
        gpus_per_node=node_size(spec["cluster"]["accelerator"], spec["cluster"]),
        node_read_gbps=stated.get("read_gbps_per_node"),
        cpu_tokens_per_s_per_node=stated.get("cpu_tokens_per_s_per_node"),
    )
    return bill


def _lever_minimum(price: dict[str, Any], run_gpus: int, lever_gpus: int) -> Decimal | None:
    """The commitment a lever's cluster would pay: a price-book commitment covers the
    cluster bought (so it scales with it), a quote's covers the quote's accelerators."""
    if not price.get("minimum_spend"):
        return None
    minimum = Decimal(price["minimum_spend"])
    if price.get("source") == "price_entry" and lever_gpus != run_gpus:
        return (minimum * lever_gpus / run_gpus).quantize(Decimal("0.01"))
    return minimum


def priced_levers(
    run: EstimationRun, found: list[dict[str, Any]], budget: dict[str, Any]
) -> list[dict[str, Any]]:
    """The estimator's levers with their deterministic cost, priced as the run is
    (:func:`planner.scenarios.budget_figures.cost_of`), and the change against the run's own."""
    price = Decimal(run.price["price_per_gpu_hour"])
    run_gpus = int(run.inputs["scenario"]["cluster"]["num_gpus"])
    baseline = Decimal(budget["cost"]["deterministic"])
    priced = []
    for lever in found:
        gpus = int(lever["scenario"]["cluster"]["num_gpus"])
        cost = cost_of(lever["gpu_hours"], price, _lever_minimum(run.price, run_gpus, gpus))
        priced.append({**lever, "cost": str(cost), "cost_saved": str(baseline - cost)})
    priced.sort(
        key=lambda lever: (
            not lever["fits_in_memory"],
            not lever.get("makes_it_fit", False),  # levers stored before it was known: False
            -Decimal(lever["cost_saved"]),
        )
    )
    return priced


def _finish(run_id: int, **fields: Any) -> None:
    EstimationRun.objects.filter(pk=run_id).update(finished_at=timezone.now(), **fields)


def run_execute(
    *, run_id: int, task_id: str | None = None, heartbeat_s: float | None = None
) -> EstimationRun | None:
    """Run the estimation of ``run_id`` and store its figures; the Celery task's body.

    ``task_id`` is the task's own id: a task of an earlier dispatch does nothing. With
    ``heartbeat_s`` the run's heartbeat is written at least that often [s].
    Bad inputs (a scenario the estimator refuses) mark the run failed with the reason.
    Any other exception marks it failed too and is re-raised, so the worker logs it.
    """
    # None when the run is finished (a redelivered task) or the task is not the run's
    # current dispatch (the run was queued again since).
    run = jobs.claim(RUN_JOBS, run_id, task_id, progress=0.0, progress_message="starting")
    if run is None:
        return None
    try:
        with jobs.beating(RUN_JOBS, run_id, heartbeat_s):
            figures = run_compute(run, _progress_report(run_id))
    except (ScenarioError, PlannerError, PricingError) as error:
        message = f"{error.key}: {error.reason}" if isinstance(error, ScenarioError) else str(error)
        _finish(run_id, status=RunStatus.FAILED, error=message, progress_message="failed")
        return EstimationRun.objects.get(pk=run_id)
    except Exception as error:
        logger.exception("run %s failed", run_id)
        _finish(
            run_id,
            status=RunStatus.FAILED,
            error=f"internal error ({type(error).__name__}): {error}",
            progress_message="failed",
        )
        raise
    _finish(
        run_id,
        status=RunStatus.SUCCEEDED,
        progress=1.0,
        progress_message="done",
        estimator_version=ESTIMATOR_VERSION,
        **figures,
    )
    return EstimationRun.objects.get(pk=run_id)


def run_fail_timeout(*, run_id: int, seconds: int) -> None:
    """Mark a run failed because its task hit the time limit."""
    _finish(
        run_id,
        status=RunStatus.FAILED,
        error=f"the estimation took longer than its {seconds} s limit; retry it, or use "
        "fewer Monte Carlo samples",
        progress_message="failed",
    )


def runs_dispatch_pending() -> list[int]:
    """Send every queued run whose task never reached the broker; the ids sent."""
    return jobs.dispatch_pending(RUN_JOBS)


def runs_recover_unclaimed() -> list[int]:
    """Send again, under a new task id, the queued runs whose message the broker lost."""
    return jobs.recover_unclaimed(
        RUN_JOBS, sent_before=unclaimed_before(timezone.now()), send=_dispatch_again
    )


def runs_recover_lost() -> tuple[list[int], list[int]]:
    """Queue again the running runs whose worker stopped beating; fail those that already
    had ``RUN_MAX_ATTEMPTS`` tries. Returns the ids queued again and the ids failed."""
    return jobs.recover_lost(
        RUN_JOBS,
        stale_before=heartbeat_stale_before(timezone.now()),
        max_attempts=settings.RUN_MAX_ATTEMPTS,
        give_up=_fail_lost,  # at once, in the dispatcher's transaction
        send=_dispatch_again,
        progress=0.0,
        progress_message=WORKER_LOST,
    )


def _fail_lost(run: EstimationRun) -> None:
    _finish(
        run.pk,
        status=RunStatus.FAILED,
        error=f"the worker running this estimation was lost {run.attempts} times (it stopped "
        "sending heartbeats: killed, out of memory or restarted); retry it, or use fewer "
        "Monte Carlo samples",
        progress_message="failed",
    )
