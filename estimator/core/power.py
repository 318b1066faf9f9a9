"""Compute peaks under a board power limit (``cluster.power_limit_w``).

On-prem clusters often cap each board below its TDP (``nvidia-smi -pl``; an H100 SXM at
500 W instead of 700 W). The board keeps its draw under the cap by lowering the SM clock,
so every compute peak (tensor-core and vector FLOP/s, all precisions) falls with it; the
memory clock and the links are not throttled, so memory bandwidth and link bandwidths stay.

The share of the datasheet peaks a capped board sustains is read off measured training
throughput: Chung et al. 2024 [1]_ swept one power limit over every GPU of a 4-stage
pipeline on 4 A100s, from the board's maximum (300 W) down to 175 W in 25 W steps, for
GPT-3 XL, BLOOM-3B, BERT-huge and T5-3B (``estimator/data/power_limits.csv``, copied from
the artifact). At each cap the throughput share is t(TDP) / t(cap), averaged over the four
models; between caps it is interpolated linearly, at and above the TDP it is 1, below the
lowest measured cap (7/12 of the TDP) it is not defined: the clock-power curve steepens
there (the voltage floor) and nothing was measured. Mean shares (and the four models'
spread): 11/12 of TDP 0.971 (+-0.003), 5/6 0.929 (+-0.008), 3/4 0.842 (+-0.022), 2/3
0.713 (+-0.030), 7/12 0.582 (+-0.016).

The measured runs are taken as compute-bound (micro-batches of 4-8 sequences, no tensor
parallelism), so the throughput share is taken as the compute-peak share; the caps are
shares of the TDP, the same curve for every accelerator. Two cross-checks from the same
group, on other boards, lose less at the same share: A40 (300 W) pipelines of GPT-3 2.7B
and 6.7B, BLOOM-3B and BERT-huge [1]_ keep 0.78-0.85 at 2/3 of TDP, and a V100 swept up to
250 W fine-tuning BERT-base [2]_ keeps 0.89 at 0.7 and 0.94 at 0.8 of that: the curve is
the pessimistic one of the three.

References
----------
.. [1] Chung, Gu, Jang, Meng, Bansal & Chowdhury 2024, "Reducing Energy Bloat in Large
   Model Training" (Perseus), SOSP '24, arXiv:2312.06902; artifact ml-energy/zeus at
   38cb3f90c30d9041d4b141cfe5c922dba55baa45, ``sosp24_data/zeus/csv/A100/zeus_global.csv``
   (and ``.../A40/zeus_global.csv``): iteration time at each global power limit.
.. [2] You, Chung & Chowdhury 2023, "Zeus: Understanding and Optimizing GPU Energy
   Consumption of DNN Training", NSDI '23; ml-energy/zeus
   ``examples/research_reproducibility/zeus_nsdi23/trace/summary_power_v100.csv``
   (squad, bert_base_uncased, batch 32: time per epoch at 100-250 W).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
from collections import defaultdict
from pathlib import Path
from typing import overload

import numpy as np

from estimator.core._types import FloatArray, Numeric
from estimator.core.catalog import AcceleratorSpec
from estimator.core.errors import ScenarioError

MEASUREMENTS_PATH = Path(__file__).resolve().parent.parent / "data" / "power_limits.csv"
#: The scenario key this module's rules are about.
KEY = "cluster.power_limit_w"


@functools.cache
def measured_throughput_shares() -> tuple[tuple[float, float], ...]:
    """Mean training-throughput share at each measured power-limit share [1]_.

    Returns
    -------
    tuple of (float, float)
        (power limit / TDP [1], mean over the workloads of t(TDP) / t(limit) [1]), by
        rising power limit; the last pair is (1, 1).

    References
    ----------
    .. [1] Chung et al. 2024, "Reducing Energy Bloat in Large Model Training" (Perseus),
       SOSP '24: the artifact's A100 power-limit sweep (``estimator/data/power_limits.csv``).
    """
    with open(MEASUREMENTS_PATH, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    at_tdp = {
        row["workload"]: float(row["iteration_time_s"])
        for row in rows
        if float(row["power_limit_w"]) == float(row["tdp_w"])
    }
    shares: dict[float, list[float]] = defaultdict(list)
    for row in rows:
        limit_share = float(row["power_limit_w"]) / float(row["tdp_w"])
        shares[limit_share].append(at_tdp[row["workload"]] / float(row["iteration_time_s"]))
    return tuple((share, float(np.mean(shares[share]))) for share in sorted(shares))


def min_power_limit_share() -> float:
    """Lowest power limit the model holds, as a share of the TDP: the lowest measured. [1]"""
    return measured_throughput_shares()[0][0]


@overload
def compute_peak_fraction(power_limit_w: float, tdp_w: float) -> float: ...
@overload
def compute_peak_fraction(power_limit_w: Numeric, tdp_w: Numeric) -> Numeric: ...
def compute_peak_fraction(power_limit_w: Numeric, tdp_w: Numeric) -> Numeric:
    """Share of the datasheet compute peaks a board sustains under a power limit [1]_.

    Piecewise-linear in the limit's share of the TDP through the measured mean training
    throughput shares (:func:`measured_throughput_shares`); monotone, 1 at and above the
    TDP.

    Parameters
    ----------
    power_limit_w : numeric
        Board power limit. [W]
    tdp_w : numeric
        The board's TDP (its default limit). [W]

    Returns
    -------
    numeric
        Sustained compute peak / datasheet peak, in (0, 1]; NaN below
        :func:`min_power_limit_share` of the TDP (outside the measurements). A float for
        scalar inputs. [1]

    References
    ----------
    .. [1] Chung et al. 2024, "Reducing Energy Bloat in Large Model Training" (Perseus),
       SOSP '24, arXiv:2312.06902: A100 iteration time of GPT-3 XL, BLOOM-3B, BERT-huge and
       T5-3B at power limits from 300 W down to 175 W.
    """
    points = np.array(measured_throughput_shares())
    share = np.divide(power_limit_w, tdp_w, dtype=np.float64)
    fraction: FloatArray = np.interp(share, points[:, 0], points[:, 1], left=np.nan, right=1.0)
    return float(fraction) if np.ndim(fraction) == 0 else fraction


def _checked_limit(spec: AcceleratorSpec, power_limit_w: object) -> float:
    positive = f"must be a positive number of watts, got {power_limit_w!r}"
    if isinstance(power_limit_w, bool) or not isinstance(power_limit_w, int | float):
        raise ScenarioError(KEY, positive)
    limit = float(power_limit_w)
    if not math.isfinite(limit) or limit <= 0:
        raise ScenarioError(KEY, positive)
    if spec.tdp_w <= 0:
        raise ScenarioError(
            KEY,
            f"{spec.id} has no TDP in the catalog (tdp_w 0), so a limit cannot be set against "
            "it; give cluster.accelerator_spec.tdp_w",
        )
    if limit > spec.tdp_w:
        raise ScenarioError(
            KEY,
            f"must not exceed {spec.id}'s TDP of {spec.tdp_w:g} W (a limit above it cannot "
            f"raise the datasheet peaks), got {limit:g}",
        )
    floor_share = min_power_limit_share()
    if limit < floor_share * spec.tdp_w - 1e-9:
        raise ScenarioError(
            KEY,
            f"must be at least {math.ceil(floor_share * spec.tdp_w - 1e-9)} W for {spec.id} "
            f"({floor_share:.0%} of its {spec.tdp_w:g} W TDP, the lowest limit the power model "
            f"was measured at), got {limit:g}",
        )
    return limit


def spec_at_power_limit(spec: AcceleratorSpec, power_limit_w: object) -> AcceleratorSpec:
    """The accelerator as a board capped at ``power_limit_w`` runs: compute peaks scaled.

    Every precision's peak is multiplied by :func:`compute_peak_fraction`; memory and link
    bandwidths are unchanged. The datasheet peaks stay on the spec
    (:meth:`AcceleratorSpec.datasheet`), the yardstick MFU is measured against.

    Parameters
    ----------
    spec : AcceleratorSpec
        The resolved accelerator (catalog plus ``cluster.accelerator_spec``), uncapped.
    power_limit_w : float
        ``cluster.power_limit_w``, per device. [W]

    Returns
    -------
    AcceleratorSpec
        A copy with ``peak_tflops`` scaled [TFLOP/s], ``power_limit_w`` [W] and
        ``datasheet_peak_tflops`` [TFLOP/s] set.

    Raises
    ------
    ScenarioError
        Naming ``cluster.power_limit_w``: not a positive number, no TDP in the catalog,
        above the TDP, or below the lowest measured share of it.
    """
    limit = _checked_limit(spec, power_limit_w)
    fraction = compute_peak_fraction(limit, spec.tdp_w)
    return dataclasses.replace(
        spec,
        peak_tflops={
            precision: tflops * fraction for precision, tflops in spec.peak_tflops.items()
        },
        power_limit_w=limit,
        datasheet_peak_tflops=dict(spec.peak_tflops),
    )
