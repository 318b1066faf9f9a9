"""Goodput: the share of wall-clock time spent on useful training steps at cluster scale.

Failures arrive as a Poisson process at a rate proportional to the device count. After each
one the job restarts (fixed time R) from the last checkpoint, redoing on average half a
checkpoint interval. Checkpoints take delta seconds to write and are taken every
tau = sqrt(2 delta M) seconds of work (Young 1974, "A first order approximation to the
optimum checkpoint interval", CACM 17(9)), M being the job's mean time between failures.
The expected wall time of one interval of work is M e^(R/M) (e^((tau + delta)/M) - 1)
(Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart dumps",
FGCS 22(3), eq. 6 with exponential failures), so goodput = tau / that.

Calibration point (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4): 466 job
interruptions in a 54-day snapshot of Llama 3 405B pre-training on 16,384 H100s, with more
than 90 % effective training time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Interruptions per device-hour: 466 / (54 days x 24 h x 16,384 GPUs) (Llama 3, sec. 3.3.4).
FAILURES_PER_DEVICE_HOUR = 466.0 / (54.0 * 24.0 * 16384.0)
#: Time from an interruption to training again: reschedule, initialise, load the checkpoint. [s]
RESTART_S = 600.0
#: Checkpoint write bandwidth per device of the job (shared parallel file system). [B/s]
CHECKPOINT_WRITE_BYTES_PER_S_PER_DEVICE = 0.25e9
#: Checkpoint bytes per parameter: 16-bit weights + fp32 master, Adam m and v (2 + 12). [B]
CHECKPOINT_BYTES_PER_PARAMETER = 14.0


@dataclass(frozen=True)
class Goodput:
    """Result of :func:`goodput` (times in seconds)."""

    goodput: float
    mtbf_s: float
    checkpoint_write_s: float
    checkpoint_interval_s: float
    restart_s: float
    interruptions_per_day: float


def mean_time_between_failures(
    num_devices: int, rate_per_device_hour: float = FAILURES_PER_DEVICE_HOUR
) -> float:
    """Job-level MTBF, 1 / (lambda N). [s]"""
    return 3600.0 / (rate_per_device_hour * num_devices)


def checkpoint_write_time(parameters: float, num_devices: int) -> float:
    """Blocking time to write one checkpoint, 14 Psi bytes at 0.25 GB/s per device. [s]"""
    size = CHECKPOINT_BYTES_PER_PARAMETER * parameters
    return size / (CHECKPOINT_WRITE_BYTES_PER_S_PER_DEVICE * num_devices)


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's optimum checkpoint interval sqrt(2 delta M). [s]"""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def expected_segment_time(
    work_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float
) -> float:
    """Expected wall time to finish ``work_s`` of work plus a checkpoint under failures.

    Daly 2006, eq. 6: M e^(R/M) (e^((tau + delta)/M) - 1). [s]
    """
    return mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((work_s + checkpoint_s) / mtbf_s)


def goodput(
    parameters: float,
    num_devices: int,
    restart_s: float = RESTART_S,
    rate_per_device_hour: float = FAILURES_PER_DEVICE_HOUR,
) -> Goodput:
    """Share of wall-clock time doing useful training, for a job of ``num_devices``.

    Parameters
    ----------
    parameters : float
        Model parameters (sets the checkpoint size). [parameters]
    num_devices : int
        Accelerators in the job.
    restart_s : float
        Time from a failure to training again. [s]
    rate_per_device_hour : float
        Interruptions per device-hour. [1/h]
    """
    mtbf = mean_time_between_failures(num_devices, rate_per_device_hour)
    delta = checkpoint_write_time(parameters, num_devices)
    tau = young_interval(delta, mtbf)
    useful = tau / expected_segment_time(tau, delta, restart_s, mtbf)
    return Goodput(
        goodput=useful,
        mtbf_s=mtbf,
        checkpoint_write_s=delta,
        checkpoint_interval_s=tau,
        restart_s=restart_s,
        interruptions_per_day=86400.0 / mtbf,
    )
