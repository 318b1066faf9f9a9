"""Fitted and assumed efficiency parameters, a handful of physical numbers per family.

Nothing here names a model, a case or a source: every scenario on the same accelerator
family gets the same numbers. How each value was obtained is recorded next to it and in
docs/methodology.md (section "Calibration"); ``scripts/accuracy_report.py --fit`` redoes the
least-squares fit of the ``fitted`` values against the published measurements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of datasheet peaks on one accelerator family.

    Attributes
    ----------
    gemm : float
        Fraction of dense peak a large, well-shaped matmul reaches (the small-shape penalty
        comes on top, from the roofline term of ``compute.gemm_time``). [1]
    attention : float
        Fraction of 16-bit dense peak FlashAttention reaches on the FLOPs it executes. [1]
    memory_bandwidth : float
        Fraction of peak memory bandwidth streaming kernels reach. [1]
    intra_node_bandwidth : float
        Collective bus bandwidth over the fast-domain link, as a fraction of its peak. [1]
    inter_node_bandwidth : float
        Collective bus bandwidth over the scale-out network, as a fraction of its peak. [1]
    intra_node_latency_s, inter_node_latency_s : float
        alpha of the alpha-beta model, per ring step. [s]
    fitted : tuple of str
        Names of the attributes fitted to measurements (the rest are assumed).
    """

    gemm: float
    attention: float
    memory_bandwidth: float = 0.80
    intra_node_bandwidth: float = 0.75
    inter_node_bandwidth: float = 0.80
    intra_node_latency_s: float = 3e-6
    inter_node_latency_s: float = 35.6e-6
    fitted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Software:
    """Framework behaviour shared by all families (fitted on all cases together).

    Attributes
    ----------
    layer_overhead_s : float
        Fixed time per layer per micro-batch for forward + backward: kernel launches and
        framework (Python, hooks) work that does not shrink with the micro-batch. [s]
    overlap : float
        Share of an overlappable collective that is hidden behind concurrent compute (DP
        gradient reduction, ZeRO-3 gathers, ring-attention exchanges). [1]
    optimizer_bytes_per_parameter : float
        Memory traffic of one mixed-precision Adam update per parameter: read fp32 master,
        m, v and the fp32 gradient, write master, m, v and the 16-bit copy. [B]
    """

    layer_overhead_s: float = 500e-6
    overlap: float = 0.80
    optimizer_bytes_per_parameter: float = 32.0


#: Fitted on the published measurements (see module docstring); rounded to 3 digits.
_FITTED = ("gemm", "attention", "inter_node_latency_s")
#: Scale-out latency per node crossing, fitted on the NVIDIA families; assumed elsewhere.
_INTER_NODE_LATENCY_S = 35.6e-6

_HOPPER = Efficiency(
    gemm=0.690, attention=0.189, inter_node_latency_s=_INTER_NODE_LATENCY_S, fitted=_FITTED
)
#: Hopper's maximum achievable matmul fraction of peak (MAMF; stas00/ml-engineering,
#: compute/accelerator README @b9e2972: 794 of 989 TFLOP/s bf16).
_HOPPER_MAMF = 0.80
#: Scale for families with no published MAMF figure: a conservative 0.7 x Hopper.
_UNKNOWN_SCALE = 0.7


def _prior(scale: float, **assumed: Any) -> Efficiency:
    """An unfitted family: the Hopper fit's gemm and attention fractions times ``scale``;
    ``assumed`` replaces any field (e.g. attention without FlashAttention)."""
    prior = Efficiency(
        gemm=round(_HOPPER.gemm * scale, 3), attention=round(_HOPPER.attention * scale, 3)
    )
    return dataclasses.replace(prior, **assumed)


#: Unfitted families are assumptions, flagged in every estimate's warnings.
FAMILY_EFFICIENCY: dict[str, Efficiency] = {
    "nvidia-ampere": Efficiency(
        gemm=0.820, attention=0.339, inter_node_latency_s=_INTER_NODE_LATENCY_S, fitted=_FITTED
    ),
    "nvidia-hopper": _HOPPER,
    "nvidia-volta": _prior(_UNKNOWN_SCALE, attention=0.05),  # no FlashAttention before sm80
    "nvidia-blackwell": _prior(_UNKNOWN_SCALE),
    "nvidia-ada": _prior(_UNKNOWN_SCALE),
    "amd-cdna2": _prior(_UNKNOWN_SCALE),
    "amd-cdna3": _prior(0.55 / _HOPPER_MAMF),  # MI300X MAMF 668-782 of 1307 TFLOP/s
    "google-tpu": _prior(_UNKNOWN_SCALE, intra_node_bandwidth=0.70),
    "intel-gaudi": _prior(_UNKNOWN_SCALE, intra_node_bandwidth=0.70),
    "aws-trainium": _prior(_UNKNOWN_SCALE, intra_node_bandwidth=0.70),
    "generic": _prior(_UNKNOWN_SCALE),
}

SOFTWARE = Software()


def efficiency_for(family: str) -> Efficiency:
    """Efficiency parameters of an accelerator family (``generic`` when unknown)."""
    return FAMILY_EFFICIENCY.get(family, FAMILY_EFFICIENCY["generic"])
