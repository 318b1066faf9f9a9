"""Whole-run wall clock: what a training run spends beyond its steady-state steps.

``tokens / tokens_per_s`` is the steady state. A budget pays for the whole allocation, which
also covers (each a separate part of the estimate's ``whole_run``):

* **checkpoint writes** and **failures and restarts**: the Young/Daly model of
  :mod:`estimator.core.goodput` (blocking writes every sqrt(2 delta M) seconds; each
  interruption costs the restart time and, on average, half an interval of lost work);
* **preemptions** of spot capacity: extra interruptions at the spot reclaim rate, each also
  waiting for capacity to come back (only when the capacity is spot);
* **evaluation**: periodic validation loss and downstream benchmarks on the training
  devices, a share of the training time;
* **ramp-up**: job start (scheduling, initialisation, loading the starting checkpoint, the
  same work as a restart after an interruption) and the slow first steps and batch-size
  ramp, one restart time plus a small share;
* **stragglers**: slow or throttled devices and hosts that every synchronous step waits
  for until they are found and drained, growing with the number of nodes;
* **allocation idle**: time the allocation is held but not training (loss spikes being
  investigated and rolled back, data-pipeline fixes, queueing for a replacement node,
  maintenance). Such time comes with incidents, so its share grows with the interruptions
  the run expects, E = held hours x devices x interruption rate (run length and cluster size
  together): s (1 - e^-E), the saturated share s fitted to published whole-run GPU-hours.
  A run of a few hours on a few nodes, which expects no interruption, holds almost none
  idle; a run that expects several holds the fitted share.

Nothing here names a run: the constants are physical assumptions with their reasons, and
``allocation_idle`` (the saturated share) is the one figure fitted to published runs
(``python -m estimator calibrate --whole-runs-only``,
``estimator/data/whole_run.json``; docs/accuracy.md lists
every run with its error and the leave-one-out figures).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from estimator.core._types import Numeric
from estimator.core.constants import SECONDS_PER_DAY, SECONDS_PER_HOUR
from estimator.core.goodput import (
    FAILURES_PER_DEVICE_HOUR,
    RESTART_S,
    checkpoint_write_time,
    expected_segment_time,
    mean_time_between_failures,
    young_interval,
)
from estimator.core.scenario import RunSettings
from estimator.core.schema import default

#: Periodic evaluation (validation loss every few hundred steps, downstream benchmarks at
#: checkpoints) as a share of training time: OLMo and Megatron-LM defaults evaluate on the
#: order of 1 % of the tokens trained; the default of ``run.evaluation_fraction``. [1]
EVALUATION_FRACTION: float = default("run.evaluation_fraction")
#: Start-up of a run: allocation, container start, initialisation and loading the starting
#: checkpoint, the same work as a restart after an interruption (settling a new configuration
#: and its early restarts is part of the allocation idle, which scales with the run). [s]
START_UP_S = RESTART_S
#: Steady-state throughput lost to learning-rate warm-up/batch-size ramp steps (small
#: batches run at lower utilisation), as a share of training time. [1]
RAMP_UP_FRACTION = 0.005
#: Time lost to stragglers per doubling of the node count beyond one node: one slow GPU or
#: host holds every synchronous step until it is drained. [1]
STRAGGLER_FRACTION_PER_DOUBLING = 0.004
#: Spot reclaim rate per node: cloud providers' spot advisors put GPU instances in their
#: highest interruption band, above 20 % of instances per month. [1/h]
SPOT_PREEMPTIONS_PER_NODE_HOUR = 0.20 / (30.0 * 24.0)
#: Waiting for spot capacity to come back after a reclaim, beyond the restart. [s]
SPOT_REACQUIRE_S = 3600.0
#: Default saturated share of the allocation held idle, when the fitted file is absent. [1]
DEFAULT_ALLOCATION_IDLE = 0.05
#: Expected interruptions over which the idle share approaches its saturated value: the
#: share is s (1 - exp(-E / this)); one, the run length at which the first interruption is
#: expected (an assumption, not fitted: the published runs all expect one or more). [1]
IDLE_INTERRUPTIONS_SCALE = 1.0
_FIT_FILE = Path(__file__).resolve().parent.parent / "data" / "whole_run.json"
PARTS = (
    "checkpoint_writes",
    "failures_and_restarts",
    "preemptions",
    "evaluation",
    "ramp_up",
    "stragglers",
    "allocation_idle",
)


#: Default spread of published whole runs around the model, when the fitted file is absent.
DEFAULT_WHOLE_RUN_SIGMA = 0.25


def _fitted() -> dict[str, float]:
    try:
        return dict(json.loads(_FIT_FILE.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {}


FIT_PATH = _FIT_FILE
_FIT = _fitted()
#: Saturated share of the allocation held but idle, fitted to published whole runs. [1]
ALLOCATION_IDLE = float(_FIT.get("allocation_idle", DEFAULT_ALLOCATION_IDLE))
#: Log-sd of published whole runs around the model, beyond the efficiency spread. [1]
WHOLE_RUN_SIGMA = float(_FIT.get("sigma", DEFAULT_WHOLE_RUN_SIGMA))


def idle_share(expected_interruptions: Numeric, saturated: float = ALLOCATION_IDLE) -> Numeric:
    """Share of the allocation held idle by a run that expects ``expected_interruptions``.

    s (1 - exp(-E / :data:`IDLE_INTERRUPTIONS_SCALE`)): idle time comes with incidents
    (rollbacks, triage, replacement nodes), so a run expected to see none holds almost none
    idle and one expected to see several holds the saturated share ``s``. Broadcasts over
    arrays. [1]
    """
    e = np.asarray(expected_interruptions, dtype=np.float64)
    share = saturated * -np.expm1(-e / IDLE_INTERRUPTIONS_SCALE)
    return float(share) if share.ndim == 0 else share


@dataclass(frozen=True)
class WholeRun:
    """Whole-run days: the steady state plus each part (days, same keys as :data:`PARTS`)."""

    steady_state_days: float
    parts_days: dict[str, float]
    mtbf_hours: float
    interruptions_per_day: float
    checkpoint_write_s: float
    checkpoint_interval_s: float
    restart_s: float

    @property
    def training_days(self) -> float:
        """Whole-run wall clock: the steady state plus every part. [days]"""
        return self.steady_state_days + sum(self.parts_days.values())

    @property
    def goodput(self) -> float:
        """Share of the wall clock spent on steady-state training steps. [1]"""
        return self.steady_state_days / self.training_days


def _interruption_overheads(
    work_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float
) -> tuple[float, float]:
    """(checkpoint-write share, failure share) of the work time under Young/Daly. [1]"""
    tau = young_interval(checkpoint_s, mtbf_s)
    segment = expected_segment_time(tau, checkpoint_s, restart_s, mtbf_s)
    return checkpoint_s / tau, (segment - tau - checkpoint_s) / tau


def whole_run(
    steady_state_s: float,
    parameters: float,
    num_devices: int,
    node_size: int,
    settings: RunSettings | None = None,
    *,
    failure_rate: float = FAILURES_PER_DEVICE_HOUR,
    restart_s: float = RESTART_S,
) -> WholeRun:
    """The whole run of ``steady_state_s`` seconds of training steps.

    Parameters
    ----------
    steady_state_s : float
        tokens / tokens per second, margins applied. [s]
    parameters : float
        Model parameters (checkpoint size). [parameters]
    num_devices, node_size : int
        Accelerators in the job, and per node (stragglers and spot reclaims are per node).
        [devices]
    settings : RunSettings, optional
        The scenario's ``run`` object.
    failure_rate : float
        Interruptions per device-hour. [1/h]
    restart_s : float
        Time from an interruption to training again. [s]

    Returns
    -------
    WholeRun
        Steady-state and per-part days [days], the job's MTBF [h], interruptions per day
        [1/day], checkpoint write time and interval [s] and the restart time [s].

    References
    ----------
    Young 1974, "A first order approximation to the optimum checkpoint interval", CACM
    17(9); Daly 2006, "A higher order estimate of the optimum checkpoint interval for
    restart dumps", FGCS 22(3), eq. 6; Kokolis et al. 2024, "Revisiting Reliability in
    Large-Scale Machine Learning Research Clusters", arXiv 2410.21680 (interruption rate).
    """
    s = settings or RunSettings()
    evaluation = EVALUATION_FRACTION if s.evaluation_fraction is None else s.evaluation_fraction
    nodes = max(1.0, num_devices / max(node_size, 1))
    mtbf = mean_time_between_failures(num_devices, failure_rate)
    delta = checkpoint_write_time(parameters, num_devices)
    writes, failures = _interruption_overheads(steady_state_s, delta, restart_s, mtbf)
    preempt = 0.0
    if s.capacity == "spot":
        spot_rate = failure_rate + SPOT_PREEMPTIONS_PER_NODE_HOUR * nodes / num_devices
        spot_mtbf = mean_time_between_failures(num_devices, spot_rate)
        spot_writes, spot_failures = _interruption_overheads(
            steady_state_s, delta, restart_s + SPOT_REACQUIRE_S, spot_mtbf
        )
        preempt = spot_writes + spot_failures - writes - failures
    busy = {
        "checkpoint_writes": writes * steady_state_s,
        "failures_and_restarts": failures * steady_state_s,
        "preemptions": preempt * steady_state_s,
        "evaluation": evaluation * steady_state_s,
        "ramp_up": START_UP_S + RAMP_UP_FRACTION * steady_state_s,
        "stragglers": STRAGGLER_FRACTION_PER_DOUBLING * math.log2(nodes) * steady_state_s,
    }
    held = steady_state_s + sum(busy.values())
    # A stated share is the share, whatever the run's length. (The Monte Carlo passes
    # arrays of samples through these float annotations; idle_share broadcasts.)
    modelled = cast(float, idle_share(held / mtbf))
    idle = modelled if s.allocation_idle is None else s.allocation_idle
    busy["allocation_idle"] = held * idle / (1.0 - idle)
    days = {k: v / SECONDS_PER_DAY for k, v in busy.items()}
    return WholeRun(
        steady_state_days=steady_state_s / SECONDS_PER_DAY,
        parts_days={k: days[k] for k in PARTS},
        mtbf_hours=mtbf / SECONDS_PER_HOUR,
        interruptions_per_day=SECONDS_PER_DAY / mtbf,
        checkpoint_write_s=delta,
        checkpoint_interval_s=young_interval(delta, mtbf),
        restart_s=restart_s,
    )
