"""Goodput: the share of wall-clock time spent on useful training steps at cluster scale.

Failures arrive as a Poisson process at a rate proportional to the device count. After each
one the job restarts (fixed time R) from the last checkpoint, redoing on average half a
checkpoint interval. Checkpoints take delta seconds to write and are taken every
tau = sqrt(2 delta M) seconds of work (Young 1974, "A first order approximation to the
optimum checkpoint interval", CACM 17(9)), M being the job's mean time between failures.
The expected wall time of one interval of work is M e^(R/M) (e^((tau + delta)/M) - 1)
(Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart dumps",
FGCS 22(3), eq. 6 with exponential failures), so goodput = tau / that.

Failure rate (Kokolis et al. 2024, "Revisiting Reliability in Large-Scale Machine Learning
Research Clusters", arXiv:2410.21680, HPCA 2025): over 11 months Meta's RSC-1 (16k A100s in
8-GPU nodes) saw r_f = 6.50 job-stopping infrastructure failures per 1,000 node-days, counted on
jobs of more than 128 GPUs (RSC-2, 8k A100s: 2.34). Their model, MTTF = 1 / (N_nodes r_f),
is the one here; it gives their projected job MTTF of 1.8 h at 16,384 GPUs and 0.23 h at
131,072 (Fig. 7 and the text around it). r_f leaves out failures of the job's own code; the
paper's measured MTTF of 1,024-GPU jobs (7.9 h, Fig. 7) is shorter than r_f predicts (29 h).

Every function takes scalars or numpy arrays (broadcast against each other), so the Monte
Carlo evaluates all its samples in one call; with scalar inputs the results are Python
floats, the same as with the scalar formulas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np

from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import (
    ADAM_MIXED_PRECISION_STATE_BYTES,
    HALF_PRECISION_BYTES,
    HOURS_PER_DAY,
    SECONDS_PER_DAY,
    SECONDS_PER_HOUR,
)

#: Interruptions per device-hour: RSC-1's r_f = 6.50 failures per 1,000 node-days (Kokolis et
#: al. 2024) over 24 h x 8 GPUs per node: 6.50e-3 / (24 x 8) = 3.39e-5. RSC-1 rather than
#: RSC-2 (2.34, 1.22e-5) because it ran the general and largest jobs, LLMs among them.
FAILURES_PER_DEVICE_HOUR = 6.50e-3 / (HOURS_PER_DAY * 8.0)
#: Time from an interruption to training again: reschedule, initialise, load the checkpoint. [s]
RESTART_S = 600.0
#: Checkpoint write bandwidth per device of the job (shared parallel file system). [B/s]
CHECKPOINT_WRITE_BYTES_PER_S_PER_DEVICE = 0.25e9
#: Checkpoint bytes per parameter: 16-bit weights + fp32 master, Adam m and v (2 + 12). [B]
CHECKPOINT_BYTES_PER_PARAMETER = HALF_PRECISION_BYTES + ADAM_MIXED_PRECISION_STATE_BYTES


@dataclass(frozen=True)
class Goodput:
    """Result of :func:`goodput`: floats for scalar inputs, arrays for array inputs.

    Attributes
    ----------
    goodput : float or array
        Share of wall-clock time spent on useful training steps. [1]
    mtbf_s : float or array
        Job-level mean time between failures, M. [s]
    checkpoint_write_s : float or array
        Blocking time to write one checkpoint, delta. [s]
    checkpoint_interval_s : float or array
        Work between checkpoints, tau (Young's interval). [s]
    restart_s : float or array
        Time from an interruption to training again, R. [s]
    interruptions_per_day : float or array
        Expected job interruptions per day of wall clock. [1/day]
    """

    goodput: Numeric
    mtbf_s: Numeric
    checkpoint_write_s: Numeric
    checkpoint_interval_s: Numeric
    restart_s: Numeric
    interruptions_per_day: Numeric


def _as_inputs(value: FloatArray | np.floating) -> Numeric:
    """A numpy result as a Python float when every input was a scalar (0-d)."""
    return float(value) if np.ndim(value) == 0 else np.asarray(value)


@overload
def mean_time_between_failures(num_devices: float, rate_per_device_hour: float = ...) -> float: ...
@overload
def mean_time_between_failures(
    num_devices: Numeric, rate_per_device_hour: Numeric = ...
) -> Numeric: ...
def mean_time_between_failures(
    num_devices: Numeric, rate_per_device_hour: Numeric = FAILURES_PER_DEVICE_HOUR
) -> Numeric:
    """Job-level mean time between failures, M = 1 / (lambda N) [1]_.

    Parameters
    ----------
    num_devices : numeric
        Accelerators in the job, N. [1]
    rate_per_device_hour : numeric
        Interruptions per device-hour, lambda. [1/h]

    Returns
    -------
    numeric
        M. [s]

    References
    ----------
    .. [1] Kokolis et al. 2024, "Revisiting Reliability in Large-Scale Machine Learning
       Research Clusters", arXiv:2410.21680: MTTF = 1 / (N_nodes r_f), and the default
       lambda from RSC-1's r_f = 6.50 failures per 1,000 node-days at 8 GPUs per node.
    """
    return _as_inputs(np.divide(SECONDS_PER_HOUR, np.multiply(rate_per_device_hour, num_devices)))


@overload
def checkpoint_write_time(parameters: float, num_devices: float) -> float: ...
@overload
def checkpoint_write_time(parameters: Numeric, num_devices: Numeric) -> Numeric: ...
def checkpoint_write_time(parameters: Numeric, num_devices: Numeric) -> Numeric:
    """Blocking time to write one checkpoint, delta = 14 Psi / (0.25 GB/s x N).

    Parameters
    ----------
    parameters : numeric
        Parameters saved, Psi. [parameters]
    num_devices : numeric
        Accelerators writing in parallel, N. [1]

    Returns
    -------
    numeric
        delta. [s]
    """
    size = np.multiply(CHECKPOINT_BYTES_PER_PARAMETER, parameters)
    bandwidth = np.multiply(CHECKPOINT_WRITE_BYTES_PER_S_PER_DEVICE, num_devices)
    return _as_inputs(np.divide(size, bandwidth))


@overload
def young_interval(checkpoint_s: float, mtbf_s: float) -> float: ...
@overload
def young_interval(checkpoint_s: Numeric, mtbf_s: Numeric) -> Numeric: ...
def young_interval(checkpoint_s: Numeric, mtbf_s: Numeric) -> Numeric:
    """Young's optimum checkpoint interval, tau = sqrt(2 delta M) [1]_.

    Parameters
    ----------
    checkpoint_s : numeric
        Time to write one checkpoint, delta. [s]
    mtbf_s : numeric
        Job-level mean time between failures, M. [s]

    Returns
    -------
    numeric
        tau, work between checkpoints. [s]

    References
    ----------
    .. [1] Young 1974, "A first order approximation to the optimum checkpoint interval",
       Communications of the ACM 17(9).
    """
    return _as_inputs(np.sqrt(np.multiply(np.multiply(2.0, checkpoint_s), mtbf_s)))


@overload
def expected_segment_time(
    work_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float
) -> float: ...
@overload
def expected_segment_time(
    work_s: Numeric, checkpoint_s: Numeric, restart_s: Numeric, mtbf_s: Numeric
) -> Numeric: ...
def expected_segment_time(
    work_s: Numeric, checkpoint_s: Numeric, restart_s: Numeric, mtbf_s: Numeric
) -> Numeric:
    """Expected wall time to finish ``work_s`` of work plus a checkpoint under failures,
    M e^(R/M) (e^((tau + delta)/M) - 1) [1]_.

    Parameters
    ----------
    work_s : numeric
        Work between checkpoints, tau. [s]
    checkpoint_s : numeric
        Time to write one checkpoint, delta. [s]
    restart_s : numeric
        Time from an interruption to training again, R. [s]
    mtbf_s : numeric
        Job-level mean time between failures, M (exponential failures). [s]

    Returns
    -------
    numeric
        Expected wall time of the segment. [s]

    References
    ----------
    .. [1] Daly 2006, "A higher order estimate of the optimum checkpoint interval for
       restart dumps", Future Generation Computer Systems 22(3), eq. 6.
    """
    restarts = np.exp(np.divide(restart_s, mtbf_s))
    attempts = np.expm1(np.divide(np.add(work_s, checkpoint_s), mtbf_s))
    return _as_inputs(np.multiply(np.multiply(mtbf_s, restarts), attempts))


def goodput(
    parameters: Numeric,
    num_devices: Numeric,
    restart_s: Numeric = RESTART_S,
    rate_per_device_hour: Numeric = FAILURES_PER_DEVICE_HOUR,
) -> Goodput:
    """Share of wall-clock time doing useful training, for a job of ``num_devices``.

    Checkpoints every tau = sqrt(2 delta M) seconds of work (Young 1974); one interval
    takes M e^(R/M) (e^((tau + delta)/M) - 1) of wall clock (Daly 2006, eq. 6), so
    goodput = tau / that.

    Parameters
    ----------
    parameters : numeric
        Model parameters (sets the checkpoint size). [parameters]
    num_devices : numeric
        Accelerators in the job. [1]
    restart_s : numeric
        Time from a failure to training again. [s]
    rate_per_device_hour : numeric
        Interruptions per device-hour. [1/h]

    Returns
    -------
    Goodput
        Floats when every input is a scalar, else arrays broadcast over the inputs.

    References
    ----------
    .. [1] Young 1974, "A first order approximation to the optimum checkpoint interval",
       CACM 17(9).
    .. [2] Daly 2006, "A higher order estimate of the optimum checkpoint interval for
       restart dumps", FGCS 22(3), eq. 6.
    """
    mtbf = mean_time_between_failures(num_devices, rate_per_device_hour)
    delta = checkpoint_write_time(parameters, num_devices)
    tau = young_interval(delta, mtbf)
    useful = _as_inputs(np.divide(tau, expected_segment_time(tau, delta, restart_s, mtbf)))
    return Goodput(
        goodput=useful,
        mtbf_s=mtbf,
        checkpoint_write_s=delta,
        checkpoint_interval_s=tau,
        restart_s=restart_s if np.ndim(restart_s) == 0 else np.asarray(restart_s),
        interruptions_per_day=_as_inputs(np.divide(SECONDS_PER_DAY, mtbf)),
    )
