"""Fitted and assumed efficiency parameters, a handful of physical numbers per family.

Nothing here names a model, a case or a source: every scenario on the same accelerator
family gets the same numbers. Each family starts from physical assumptions (:data:`PRIORS`,
with their reasons); ``python -m estimator calibrate`` fits a few of them per family to
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

from estimator.core.frameworks import POOLED_STACK, STACKS


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of datasheet peaks on one accelerator family.

    Attributes
    ----------
    gemm : float
        Fraction of dense peak a large, well-shaped matmul reaches (the small-shape penalty
        comes from the roofline's memory term where it exceeds the arithmetic,
        ``gemm.gemm_exposed_byte_time``). [1]
    attention : float
        Fraction of 16-bit dense peak FlashAttention reaches on the FLOPs it executes. [1]
    memory_bandwidth : float
        Fraction of peak memory bandwidth streaming kernels reach. [1]
    intra_node_bandwidth : float
        Collective bus bandwidth over the fast-domain link, as a fraction of its peak. [1]
    inter_node_bandwidth : float
        Collective bus bandwidth over the scale-out network, as a fraction of its peak. [1]
    intra_node_latency_s, inter_node_latency_s : float
        alpha of the alpha-beta model, per ring step: NCCL's own latency model for its ring
        with the Simple protocol (the one large messages use), 3.4 us over NVLink and
        9.6 us across the network (NVIDIA/nccl ``src/graph/tuning.cc``, ``hwLat``). [s]
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
    overhead_scale : float
        Multiplies the software's fixed costs, the per-layer overhead and the
        framework-overhead margin: fitted per family to the time its measured runs spend
        outside the modelled kernels (the pooled stack's), then divided by a stack's
        factor (:func:`with_stack`). [1]
    elementwise_fusion : float
        Share of the elementwise passes' memory traffic (norms, activations, residual
        adds, rotary embedding) that the compiler fuses into the neighbouring matmuls, so
        it never goes through device memory: 0 in eager PyTorch, fitted for XLA (TPU),
        which fuses elementwise producers and consumers into its matmul programs. [1]
    fitted : tuple of str
        Names of the attributes fitted to measurements (the rest are assumed).
    """

    gemm: float
    attention: float
    memory_bandwidth: float = 0.80
    intra_node_bandwidth: float = 0.75
    inter_node_bandwidth: float = 0.80
    intra_node_latency_s: float = 3.4e-6
    inter_node_latency_s: float = 9.6e-6
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
    elementwise_fusion: float = 0.0
    overhead_scale: float = 1.0
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


@dataclass(frozen=True)
class Limit:
    """The most the hardware allows a fitted field, and the measurement that says so.

    Attributes
    ----------
    value : float
        Upper limit of the field. [1]
    source : str
        Where the limit comes from.
    """

    value: float
    source: str


_MAMF = (
    "stas00/ml-engineering compute/accelerator/README.md @744d01e, 'Maximum Achievable "
    "Matmul FLOPS comparison table' (torch.matmul, best shape of a brute-force search)"
)
#: What the hardware allows each fitted kernel fraction, per family: the best maximum
#: achievable matmul fraction measured on any of the family's devices, and FlashAttention's
#: published ceiling. A fit at its limit means the model lacks something the runs do.
HARDWARE_LIMITS: dict[str, dict[str, Limit]] = {
    "nvidia-ampere": {
        "gemm": Limit(0.869, f"{_MAMF}: A100 SXM bf16 271.2 of 312 TFLOP/s"),
        "attention": Limit(
            0.73, "Dao 2023, FlashAttention-2 (arXiv 2307.08691), abstract: 50-73 % of peak on A100"
        ),
    },
    "nvidia-hopper": {
        "gemm": Limit(0.838, f"{_MAMF}: GH200 bf16 828.6 of 989 TFLOP/s (H100 SXM 80.3 %)"),
        "fp8_gemm": Limit(0.776, f"{_MAMF}: GH200 fp8 1535 of 1979 TFLOP/s (H100 SXM 70.9 %)"),
        "attention": Limit(
            0.75, "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608): 740 TFLOP/s, 75 % on H100"
        ),
    },
    "nvidia-blackwell": {
        "gemm": Limit(0.786, f"{_MAMF}: B300 SXM bf16 1769 of 2250 TFLOP/s (B200 77.6 %)"),
        "fp8_gemm": Limit(0.763, f"{_MAMF}: B200 SXM fp8 3432.5 of 4500 TFLOP/s"),
    },
    "intel-gaudi": {
        "gemm": Limit(0.969, f"{_MAMF}: Gaudi 2 bf16 418.7 of 432 TFLOP/s"),
        "fp8_gemm": Limit(0.955, f"{_MAMF}: Gaudi 2 fp8 826.5 of 865 TFLOP/s"),
    },
    "amd-cdna3": {
        "gemm": Limit(0.604, f"{_MAMF}: MI325X bf16 784.9 of 1300 TFLOP/s (MI300X 51.4 %)"),
    },
}
#: Limits every family shares: a fraction of a datasheet peak cannot pass 1.
GENERAL_LIMITS: dict[str, Limit] = {
    "gemm": Limit(1.0, "the datasheet peak (no published matmul ceiling for the family)"),
    "memory_bandwidth": Limit(1.0, "the datasheet memory bandwidth"),
    "overhead_scale": Limit(
        3.0,
        "a share of the framework-overhead margin: 3 x the default 10 % is more time outside "
        "the kernels than any calibrated run shows (docs/accuracy.md)",
    ),
    "tp_overlap": Limit(1.0, "every tensor-parallel collective hidden"),
    "elementwise_fusion": Limit(1.0, "every elementwise pass fused"),
    "intra_node_bandwidth": Limit(
        4.0,
        "a TPU torus collective drives up to 4 ICI links of the quoted per-link rate at once "
        "(v4/v5p: 6 links per chip, 2 per axis; Jouppi et al. 2023, TPU v4, section 2)",
    ),
}


def hardware_limit(family: str, field: str) -> Limit:
    """The most the hardware allows ``field`` of ``family``.

    fp8 matmuls and attention without a figure of their own take the family's matmul
    limit (neither outruns the matmul units).

    Parameters
    ----------
    family : str
        Accelerator family.
    field : str
        An :class:`Efficiency` field that the calibration fits.

    Returns
    -------
    Limit
    """
    own = HARDWARE_LIMITS.get(family, {})
    if field in own:
        return own[field]
    if field in ("fp8_gemm", "attention"):
        return own.get("gemm", GENERAL_LIMITS["gemm"])
    return GENERAL_LIMITS[field]


#: NCCL's bus bandwidth over NVLink4 for collectives other than NVLS all-reduce: 370 of the
#: 450 GB/s line rate (protocol overhead ~20 %; NCCL's maintainer in NVIDIA/nccl-tests issue
#: 212, 2024-05-06; 365-370 GB/s for ring all-reduce on 2-8 H100s, NVIDIA/nccl issue 1455).
_NVLINK4_RING = round(370.0 / 450.0, 3)
#: The Hopper fit the priors of unmeasured families scale from (gemm, attention).
_HOPPER_PRIOR = (0.690, 0.189)
#: Scale for families with no published MAMF figure: a conservative 0.7 x Hopper.
_UNKNOWN_SCALE = 0.7


def _mamf_scale(family: str) -> float:
    """A family's maximum achievable matmul fraction over Hopper's (the measured limits of
    :data:`HARDWARE_LIMITS`): how much nearer its datasheet its matmuls run. [1]"""
    return HARDWARE_LIMITS[family]["gemm"].value / HARDWARE_LIMITS["nvidia-hopper"]["gemm"].value


#: Where ``python -m estimator calibrate`` writes the fitted values and the
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
    "nvidia-ampere": _prior(_mamf_scale("nvidia-ampere")),
    "nvidia-hopper": _prior(1.0, host_link_gbs=50.0, intra_node_bandwidth=_NVLINK4_RING),
    "nvidia-volta": _prior(_UNKNOWN_SCALE, attention=0.05),  # no FlashAttention before sm80
    "nvidia-blackwell": _prior(
        _mamf_scale("nvidia-blackwell"),
        host_link_gbs=50.0,
        native_block_fp8=True,
        intra_node_bandwidth=_NVLINK4_RING,
    ),
    "nvidia-ada": _prior(_UNKNOWN_SCALE),
    "amd-cdna2": _prior(_UNKNOWN_SCALE),
    "amd-cdna3": _prior(_mamf_scale("amd-cdna3"), host_link_gbs=50.0),
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
    "intel-gaudi": _prior(_mamf_scale("intel-gaudi"), intra_node_bandwidth=0.70),
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
    and at most its hardware limit (:func:`hardware_limit`). Families with a bf16 fit are
    left alone.

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
            limit = hardware_limit(family, "gemm").value
            gemm = max(efficiency.gemm, min(limit, efficiency.fp8_gemm * ratio))
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

#: The kernel fractions a software stack's factor multiplies (each capped at its limit); the
#: software fixed costs are divided by it (``overhead_scale``).
KERNEL_FIELDS = ("gemm", "fp8_gemm", "attention", "memory_bandwidth")


def _stack_record(record: Mapping[str, Any]) -> tuple[dict[str, float], float]:
    """Stack factors by stack id, ``pooled`` included, and the between-stack log-sd."""
    stacks = record.get("stacks", {})
    factors = {k: float(v["factor"]) for k, v in stacks.get("fitted", {}).items()}
    pooled = stacks.get("pooled", {})
    factors[POOLED_STACK] = float(pooled.get("factor", 1.0))
    return factors, float(pooled.get("sigma", 0.0))


#: Each calibrated stack's factor on the family's kernel fractions, and ``pooled``: the
#: median stack that an estimate without a stated framework assumes (``make accuracy``
#: fits them: ``calibration.json``, ``stacks``; docs/methodology.md, "Software stacks").
STACK_FACTORS, BETWEEN_STACK_SIGMA = _stack_record(FIT_RECORD)


def stack_factor(stack: str) -> float:
    """The calibrated factor of ``stack`` on kernel efficiency; the pooled one for a stack
    without measurements. [1]"""
    return STACK_FACTORS.get(stack, STACK_FACTORS[POOLED_STACK])


def calibrated_stacks() -> list[str]:
    """The stacks with a factor of their own, sorted."""
    return sorted(k for k in STACK_FACTORS if k != POOLED_STACK)


def stack_name(stack: str) -> str:
    """Display name of a stack, or of the pooled one."""
    return STACKS[stack].name if stack in STACKS else "median of the calibrated stacks"


def stack_calibrated(stack: str) -> bool:
    """Whether ``stack`` has a factor of its own (measurements), not the pooled one."""
    return stack in STACK_FACTORS and stack != POOLED_STACK


#: Stacks whose attention on Hopper is of FlashAttention-3's class: Transformer Engine's
#: fused attention (cuDNN, which it selects on sm90) and FlashAttention-3 use the Hopper-only
#: warpgroup matmuls and TMA; the other stacks' FlashAttention-2 kernels do not.
HOPPER_ATTENTION_STACKS = frozenset({"megatron-core"})
#: FlashAttention-3 over FlashAttention-2 on H100 in 16 bits: "1.5-2.0x" forward and
#: "1.5-1.75x" backward (Shah et al. 2024, "FlashAttention-3", arXiv 2407.08608, abstract
#: and section 4.1); the low end, as for both passes. [1]
HOPPER_ATTENTION_SPEEDUP = 1.5


def attention_speedup(family: str, stack: str) -> float:
    """How much faster ``stack``'s attention kernels run on ``family`` than the
    FlashAttention-2 class the family's fit stands for: :data:`HOPPER_ATTENTION_SPEEDUP` for
    the stacks of :data:`HOPPER_ATTENTION_STACKS` on Hopper, else 1. [1]"""
    if family == "nvidia-hopper" and stack in HOPPER_ATTENTION_STACKS:
        return HOPPER_ATTENTION_SPEEDUP
    return 1.0


def with_stack(
    efficiency: Efficiency, family: str, factor: float, attention: float = 1.0
) -> Efficiency:
    """``efficiency`` with its kernel fractions times a stack's ``factor``, each capped at
    what the family's hardware allows (:func:`hardware_limit`), and its software fixed
    costs (per-layer overhead, framework-overhead margin) divided by it: a tuned stack runs
    its kernels nearer the roofline and spends less time outside them (CUDA graphs, fused
    optimizers, overlapped data loading).

    Parameters
    ----------
    efficiency : Efficiency
        The family's efficiencies (the pooled stack's).
    family : str
        Accelerator family, for the limits.
    factor : float
        The stack's factor (:func:`stack_factor`). [1]
    attention : float
        The stack's attention kernels over the family's (:func:`attention_speedup`),
        applied before the cap. [1]

    Returns
    -------
    Efficiency
        A copy; unchanged when ``factor`` and ``attention`` are 1.
    """
    if factor == 1.0 and attention == 1.0:
        return efficiency
    kernel = {"attention": factor * attention}
    changes: dict[str, Any] = {
        name: min(value * kernel.get(name, factor), hardware_limit(family, name).value)
        for name in KERNEL_FIELDS
        if (value := getattr(efficiency, name))
    }
    changes["overhead_scale"] = efficiency.overhead_scale / factor
    return dataclasses.replace(efficiency, **changes)


def family_sigma(family: str, stack: str = POOLED_STACK) -> float:
    """Out-of-sample log-sd of throughput for a family on a software stack.

    Parameters
    ----------
    family : str
        Accelerator family, e.g. ``nvidia-hopper``.
    stack : str, optional
        The stack assumed (:data:`~estimator.core.frameworks.STACKS`); the pooled stack,
        and a stack without measurements, add the between-stack spread.

    Returns
    -------
    float
        sqrt(sigma_f^2 + tau^2) for the pooled stack, sigma_f for a calibrated one:
        sigma_f the fitted :attr:`FamilyFit.sigma` (:data:`UNMEASURED_SIGMA` for a family
        without measurements), tau :data:`BETWEEN_STACK_SIGMA`. [1]
    """
    fit = FAMILY_FITS.get(family)
    sigma = fit.sigma if fit is not None and fit.cases else UNMEASURED_SIGMA
    if stack_calibrated(stack):
        return sigma
    return float((sigma**2 + BETWEEN_STACK_SIGMA**2) ** 0.5)


def efficiency_for(family: str, stack: str = POOLED_STACK) -> Efficiency:
    """Efficiency parameters of an accelerator family on a software stack.

    Parameters
    ----------
    family : str
        Accelerator family (the catalog's ``family``).
    stack : str, optional
        Software stack (:data:`~estimator.core.frameworks.STACKS`), or ``"pooled"``.

    Returns
    -------
    Efficiency
        Calibrated where the family has measurements, its prior otherwise; ``generic`` when
        the family is unknown; kernel fractions times the stack's factor, attention also
        times the stack's kernel speed-up (:func:`with_stack`, :func:`attention_speedup`).
    """
    base = FAMILY_EFFICIENCY.get(family, FAMILY_EFFICIENCY["generic"])
    return with_stack(base, family, stack_factor(stack), attention_speedup(family, stack))
