"""Fitted and assumed efficiency parameters, a handful of physical numbers per family.

Nothing here names a model, a case or a source: every scenario on the same accelerator
family gets the same numbers. Each family starts from physical assumptions (:data:`PRIORS`,
with their reasons); ``scripts/accuracy_report.py --fit`` fits a few of them per family to
the published measurements (``../shared/calibration`` and ``estimator/calibration/cases``)
and writes the result, with each family's leave-one-source-out error, to
``estimator/data/calibration.json``, which this module reads. docs/methodology.md
(section "Calibration") explains the fit; docs/accuracy.md shows its errors.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of datasheet peaks on one accelerator family.

    Attributes
    ----------
    gemm : float
        Fraction of dense peak a large, well-shaped matmul reaches (the small-shape penalty
        comes on top, from the roofline's memory term, ``compute.gemm_byte_time``). [1]
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
    fp8_gemm : float
        Fraction of the fp8 dense peak an fp8 matmul with per-tensor scaling reaches; 0 means
        ``gemm`` (no separate figure). [1]
    matmul_tile : int
        Side of the matmul unit's output tile: a matmul dimension is padded up to a multiple
        of it (NVIDIA, "Matrix Multiplication Background User's Guide", tile quantization:
        128 on tensor-core GPUs; the MXU is 128 x 128 on TPU v4/v5, 256 x 256 on v6e). [1]
    reserved_memory_gib : float
        Device memory the runtime holds outside tensors: CUDA context, library workspaces
        and NCCL buffers on GPUs; XLA's program and scratch space on TPUs. [GiB]
    fragmentation : float
        Allocator fragmentation as a fraction of the tensors held (PyTorch's caching
        allocator; XLA plans buffers ahead of time and wastes little). [1]
    host_link_gbs : float
        Device-to-host bandwidth per device, one direction, as copies reach it (PCIe Gen4
        x16 about 25 GB/s, Gen5 about 50 GB/s), for offloaded activations and optimizer. [GB/s]
    native_block_fp8 : bool
        Whether block-scaled fp8 (MXFP8) runs in the tensor cores (Blackwell) rather than
        in software around per-tensor matmuls.
    tp_overlap : float
        Share of the tensor-parallel collectives hidden behind the matmuls they feed
        (chunked and pipelined: Megatron-LM's --tp-comm-overlap, PyTorch async TP, XLA's
        collective matmul); 0 when they block. [1]
    compiler_remat : bool
        Whether the compiler rematerialises activations that do not fit instead of
        failing (XLA on TPU), trading memory for recompute time. [1]
    layer_overhead_scale : float
        Multiplies the software's per-layer fixed overhead: 1 for eager PyTorch frameworks
        (kernel launches, hooks), about 0.1 where XLA compiles the whole step into a few
        fused programs (TPU). [1]
    logits_bytes : float
        Bytes per logit kept for the cross-entropy backward: fp32 logits in PyTorch
        frameworks (Korthikanti et al. 2022, section 4.3), 16-bit where XLA fuses the loss
        into the output projection's consumer (MaxText). [B]
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
    fp8_gemm: float = 0.0
    matmul_tile: int = 128
    reserved_memory_gib: float = 2.0
    fragmentation: float = 0.05
    host_link_gbs: float = 25.0
    native_block_fp8: bool = False
    tp_overlap: float = 0.0
    compiler_remat: bool = False
    layer_overhead_scale: float = 1.0
    logits_bytes: float = 4.0
    fitted: tuple[str, ...] = ()

    @property
    def fp8_gemm_fraction(self) -> float:
        """Fraction of fp8 peak an fp8 matmul reaches (``gemm`` when not set). [1]"""
        return self.fp8_gemm or self.gemm


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
    moe_load_imbalance : float
        Extra time of the busiest expert over a perfectly balanced one, dropless routing
        with an auxiliary balancing loss: tokens per expert vary by about +-10 % around
        the mean in trained routers (Fedus et al. 2022, "Switch Transformers", section 2.2,
        capacity factors 1.0-1.25; Gale et al. 2023, "MegaBlocks", figure 2). [1]
    grouped_gemm : float
        Efficiency of the experts' grouped matmuls relative to one dense matmul of the same
        FLOPs (ragged per-expert shapes, one launch per group). [1]
    fp8_recipe_gemm : dict
        Matmul speed of each fp8 scaling recipe relative to per-tensor scaling: row-wise
        and block-wise scales are applied in the matmul's epilogue or main loop (torchao
        float8 README: row-wise trains slower than tensor-wise; DeepSeek-style 1 x 128
        blocks run in software on Hopper, natively as MXFP8 on Blackwell). [1]
    fp8_recipe_casts : dict
        Quantisation traffic of each recipe relative to per-tensor scaling (row-wise and
        block-wise scaling need an extra amax pass over each input). [1]
    cpu_adam_bytes_per_s : float
        Host-memory bandwidth one device's share of the host reaches in a CPU Adam step
        (ZeRO-Offload's vectorised CPU Adam; Ren et al. 2021, section 5: about 1-2 B
        parameters per second on a two-socket server shared by its GPUs). [B/s]
    """

    layer_overhead_s: float = 500e-6
    overlap: float = 0.80
    optimizer_bytes_per_parameter: float = 32.0
    moe_load_imbalance: float = 0.10
    grouped_gemm: float = 0.90
    fp8_recipe_gemm: tuple[tuple[str, float], ...] = (
        ("tensorwise", 1.0),
        ("rowwise", 0.90),
        ("blockwise", 0.90),
    )
    fp8_recipe_casts: tuple[tuple[str, float], ...] = (
        ("tensorwise", 1.0),
        ("rowwise", 1.5),
        ("blockwise", 1.5),
    )
    cpu_adam_bytes_per_s: float = 40e9


#: Scale-out latency per node crossing, fitted on the NVIDIA families (2024); assumed elsewhere.
_INTER_NODE_LATENCY_S = 35.6e-6
#: Hopper's maximum achievable matmul fraction of peak (MAMF; stas00/ml-engineering,
#: compute/accelerator README @b9e2972: 794 of 989 TFLOP/s bf16).
_HOPPER_MAMF = 0.80
#: The Hopper fit the priors of unmeasured families scale from (gemm, attention).
_HOPPER_PRIOR = (0.690, 0.189)
#: Scale for families with no published MAMF figure: a conservative 0.7 x Hopper.
_UNKNOWN_SCALE = 0.7
#: Where ``scripts/accuracy_report.py --fit`` writes the fitted values and the
#: cross-validated error of each family (generated, never edited by hand).
FIT_PATH = Path(__file__).resolve().parent.parent / "data" / "calibration.json"


def _prior(scale: float, **assumed: Any) -> Efficiency:
    """An unmeasured family: Hopper's gemm and attention fractions times ``scale``;
    ``assumed`` replaces any field (e.g. attention without FlashAttention)."""
    gemm, attention = _HOPPER_PRIOR
    prior = Efficiency(gemm=round(gemm * scale, 3), attention=round(attention * scale, 3))
    return dataclasses.replace(prior, **assumed)


#: Physical assumptions of each family before any fit: what a family without
#: measurements runs on, and the starting point of the fit for those with some.
PRIORS: dict[str, Efficiency] = {
    "nvidia-ampere": _prior(1.0, inter_node_latency_s=_INTER_NODE_LATENCY_S),
    "nvidia-hopper": _prior(1.0, inter_node_latency_s=_INTER_NODE_LATENCY_S, host_link_gbs=50.0),
    "nvidia-volta": _prior(_UNKNOWN_SCALE, attention=0.05),  # no FlashAttention before sm80
    "nvidia-blackwell": _prior(_UNKNOWN_SCALE, host_link_gbs=50.0, native_block_fp8=True),
    "nvidia-ada": _prior(_UNKNOWN_SCALE),
    "amd-cdna2": _prior(_UNKNOWN_SCALE),
    "amd-cdna3": _prior(0.55 / _HOPPER_MAMF, host_link_gbs=50.0),  # MI300X MAMF 668-782/1307
    # XLA plans every buffer ahead of time: no caching-allocator fragmentation, no CUDA
    # context; a slice's chips talk over ICI links in a 2D/3D torus, several at once.
    "google-tpu": _prior(
        _UNKNOWN_SCALE,
        intra_node_bandwidth=0.70,
        reserved_memory_gib=0.5,
        fragmentation=0.0,
        layer_overhead_scale=0.1,
        logits_bytes=2.0,
        compiler_remat=True,
    ),
    "intel-gaudi": _prior(_UNKNOWN_SCALE, intra_node_bandwidth=0.70),
    "aws-trainium": _prior(_UNKNOWN_SCALE, intra_node_bandwidth=0.70),
    "generic": _prior(_UNKNOWN_SCALE),
}


@dataclass(frozen=True)
class FamilyFit:
    """What the calibration knows of one family (from :data:`FIT_PATH`).

    Attributes
    ----------
    fitted : dict of str to float
        Efficiency fields fitted to the family's measurements.
    cases, sources : int
        Measurements and independent sources the fit used.
    sigma : float
        Log-sd of the out-of-sample error of throughput: the 80th percentile of
        |ln(predicted / measured)| over leave-one-source-out predictions divided by
        Phi^-1(0.9), so that a lognormal band P10-P90 covers 80 % of unseen runs. [1]
    bias : float
        Median ln(predicted / measured) out of sample (informative; not applied). [1]
    """

    fitted: dict[str, float]
    cases: int
    sources: int
    sigma: float
    bias: float = 0.0


#: Spread assumed for a family with no measurements where no fit has been written yet (a
#: checkout without ``calibration.json``); the fit's own measurement replaces it below.
UNMEASURED_SIGMA_WITHOUT_FIT = 0.30


def _load_fits(path: Path = FIT_PATH) -> tuple[dict[str, FamilyFit], dict[str, Any]]:
    """The fitted families of ``path`` and the whole record; empty when it is absent."""
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text(encoding="utf-8"))
    fits = {
        family: FamilyFit(
            fitted={k: float(v) for k, v in entry["fitted"].items()},
            cases=int(entry["cases"]),
            sources=int(entry["sources"]),
            sigma=float(entry["sigma"]),
            bias=float(entry.get("bias", 0.0)),
        )
        for family, entry in data.get("families", {}).items()
    }
    return fits, data


FAMILY_FITS, FIT_RECORD = _load_fits()
#: Spread of the throughput error of a family with no measurements: the leave-one-source-out
#: error of the families predicted from their priors alone, as ``make accuracy`` measures it
#: and writes it (``calibration.json``, ``unmeasured.sigma``; docs/accuracy.md).
UNMEASURED_SIGMA = float(
    FIT_RECORD.get("unmeasured", {}).get("sigma", UNMEASURED_SIGMA_WITHOUT_FIT)
)


def with_fitted(prior: Efficiency, fitted: Mapping[str, float]) -> Efficiency:
    """``prior`` with the fitted fields replaced and named in ``fitted``.

    Parameters
    ----------
    prior : Efficiency
        The family's assumptions (:data:`PRIORS`).
    fitted : mapping of str to float
        Fitted values by :class:`Efficiency` field name (fractions [1], latencies [s]).

    Returns
    -------
    Efficiency
        A copy whose ``fitted`` attribute lists the replaced fields, sorted.
    """
    changes: dict[str, Any] = dict(fitted)
    return dataclasses.replace(prior, **changes, fitted=tuple(sorted(fitted)))


#: The family whose bf16 / fp8 matmul ratio stands in for families measured only in fp8.
FP8_REFERENCE_FAMILY = "nvidia-hopper"


def with_bf16_from_fp8(table: Mapping[str, Efficiency]) -> dict[str, Efficiency]:
    """Give a family measured only in fp8 a bf16 matmul fraction.

    Its fp8 fraction times the bf16 / fp8 ratio of the reference family measured in both
    (:data:`FP8_REFERENCE_FAMILY`, the previous NVIDIA generation), never below its prior
    and at most 0.95. Families with a bf16 fit are left alone.

    Parameters
    ----------
    table : mapping of str to Efficiency
        Efficiencies by family.

    Returns
    -------
    dict of str to Efficiency
        A copy of ``table``; ``gemm`` [1] replaced, rounded to 4 decimals, for the families
        fitted in fp8 only. Unchanged when the reference family lacks either fit.
    """
    reference = table.get(FP8_REFERENCE_FAMILY)
    if reference is None or not {"gemm", "fp8_gemm"} <= set(reference.fitted):
        return dict(table)
    ratio = reference.gemm / reference.fp8_gemm
    out = dict(table)
    for family, efficiency in table.items():
        if "fp8_gemm" in efficiency.fitted and "gemm" not in efficiency.fitted:
            gemm = max(efficiency.gemm, min(0.95, efficiency.fp8_gemm * ratio))
            out[family] = dataclasses.replace(efficiency, gemm=round(gemm, 4))
    return out


def _calibrated(family: str, prior: Efficiency) -> Efficiency:
    """``prior`` with the family's fitted values (:data:`FAMILY_FITS`), if any."""
    fit = FAMILY_FITS.get(family)
    if fit is None or not fit.fitted:
        return prior
    return with_fitted(prior, fit.fitted)


#: Families with measurements carry fitted values; the rest are priors, flagged in every
#: estimate's warnings.
FAMILY_EFFICIENCY: dict[str, Efficiency] = with_bf16_from_fp8(
    {family: _calibrated(family, prior) for family, prior in PRIORS.items()}
)

SOFTWARE = Software()


def family_sigma(family: str) -> float:
    """Out-of-sample log-sd of throughput for a family.

    Parameters
    ----------
    family : str
        Accelerator family, e.g. ``nvidia-hopper``.

    Returns
    -------
    float
        The fitted :attr:`FamilyFit.sigma`, or :data:`UNMEASURED_SIGMA` for a family
        without measurements. [1]
    """
    fit = FAMILY_FITS.get(family)
    return fit.sigma if fit is not None and fit.cases else UNMEASURED_SIGMA


def efficiency_for(family: str) -> Efficiency:
    """Efficiency parameters of an accelerator family.

    Parameters
    ----------
    family : str
        Accelerator family (the catalog's ``family``).

    Returns
    -------
    Efficiency
        Calibrated where the family has measurements, its prior otherwise; ``generic`` when
        the family is unknown.
    """
    return FAMILY_EFFICIENCY.get(family, FAMILY_EFFICIENCY["generic"])
