"""Scalars shared by every layout of one scenario: model, batch, hardware rates, margins.

Built once per scenario so that evaluating many layouts (``layout.evaluate_layouts``) only
does array arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from estimator.core import model as arithmetic
from estimator.core.calibration import SOFTWARE, Efficiency, Software, efficiency_for
from estimator.core.catalog import AcceleratorSpec
from estimator.core.constants import (
    BITS_PER_BYTE,
    FP32_BYTES,
    GIB,
    GIGA,
    HALF_PRECISION_BYTES,
    TERA,
)
from estimator.core.frameworks import FrameworkProfile, profile_for
from estimator.core.scenario import Margins, MethodConfig, ModelConfig, RunSettings, Scenario

TPU_FAMILY = "google-tpu"


@dataclass(frozen=True)
class Workload:
    """Per-scenario constants, in SI units (FLOP/s, B/s, s, B).

    Attributes
    ----------
    model : ModelConfig
        Transformer shape.
    spec : AcceleratorSpec
        The accelerator, catalog figures.
    efficiency : Efficiency
        The family's achievable fractions of peak (:mod:`estimator.core.calibration`).
    software : Software
        Framework behaviour shared by all families.
    margins : Margins
        Framework-overhead and network-jitter margins. [1]
    precision, fp8_recipe, offload : str
        ``training.precision``, ``training.fp8_recipe`` and ``training.offload``.
    global_batch_size : int
        Sequences per optimizer step, B. [sequences]
    tokens : float
        Tokens to train on. [tokens]
    num_gpus : int
        Devices in the job. [devices]
    node_size : int
        Devices in one fast (NVLink-class) domain; a TPU slice is one ICI domain. [devices]
    peak_matmul_flops : float
        Dense peak for the training precision's matmuls (true FP32 for 'fp32', TF32 tensor
        cores for 'tf32'). [FLOP/s]
    peak_attention_flops : float
        Dense peak for attention and other 16-bit work (fp8 training keeps attention in
        bf16). [FLOP/s]
    peak_16bit_flops : float
        Dense 16-bit peak, the common yardstick of MFU across precisions. [FLOP/s]
    host_link_bandwidth : float
        Device-to-host copy bandwidth, one direction. [B/s]
    memory_bandwidth : float
        Peak device memory bandwidth W. [B/s]
    intra_node_bandwidth, inter_node_bandwidth : float
        Fast-domain link and scale-out network bandwidth per device, one direction. [B/s]
    activation_bytes : float
        Bytes of one activation value, e (:func:`activation_bytes_for`). [B]
    parameters, active_parameters : float
        All parameters, and those one token passes through. [parameters]
    framework : FrameworkProfile
        What the framework runs (:mod:`estimator.core.frameworks`).
    jitter_scale : float
        Multiplier of ``margins.network_jitter`` at this cluster size
        (:func:`network_jitter_scale`). [1]
    usable_memory : float
        Device memory a layout may use: capacity less the framework's headroom. [B]
    run : RunSettings
        The scenario's ``run`` object (whole-run parts).
    method, optimizer, master_weights
        Training method, optimizer and whether mixed precision keeps an fp32 master copy
        (:mod:`estimator.core.finetune`).
    stack : str
        The software stack whose calibrated kernel efficiency ``efficiency`` carries.
    """

    model: ModelConfig
    spec: AcceleratorSpec
    efficiency: Efficiency
    software: Software
    margins: Margins
    precision: str
    fp8_recipe: str
    offload: str
    global_batch_size: int
    tokens: float
    num_gpus: int
    node_size: int
    peak_matmul_flops: float
    peak_attention_flops: float
    peak_16bit_flops: float
    host_link_bandwidth: float
    memory_bandwidth: float
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    activation_bytes: float
    parameters: float
    active_parameters: float
    framework: FrameworkProfile
    jitter_scale: float
    usable_memory: float
    run: RunSettings
    method: MethodConfig = field(default_factory=MethodConfig)
    optimizer: str = "adamw"
    master_weights: bool = True
    stack: str = "pooled"


#: Devices at which the network-jitter margin reaches its stated value, and the most it
#: grows to (twice, on the largest clusters).
JITTER_REFERENCE_DEVICES = 1024
JITTER_MAX_SCALE = 2.0
#: Devices per node of the reference cluster: 1,024 devices are 128 nodes of 8, so the
#: stated margin applies at log2(128) doublings of the node count.
JITTER_REFERENCE_NODE_SIZE = 8


def network_jitter_scale(num_devices: int, node_size: int) -> float:
    """How much of ``margins.network_jitter`` a cluster of ``num_devices`` pays.

    Jitter is what the scale-out network adds to a synchronous step: congestion, slow links,
    retransmits, the slowest of many collectives. It is 0 inside one node, grows with the
    logarithm of the cluster size (the depth of the collectives' trees and the chance that
    one link is slow), reaches the stated margin at 1,024 devices and at most doubles it:
    with the default 5 %, 5 % at 1,024 devices, 7.9 % at 16,384, 10 % from 131,072.

    Parameters
    ----------
    num_devices : int
        Devices in the job. [devices]
    node_size : int
        Devices in one fast domain (:func:`node_size_of`). [devices]

    Returns
    -------
    float
        min(2, log2(N / node) / log2(128)), 0 within one node (an assumption of this
        project, stated in docs/methodology.md). [1]
    """
    if num_devices <= node_size:
        return 0.0
    reference_nodes = JITTER_REFERENCE_DEVICES / JITTER_REFERENCE_NODE_SIZE
    return float(
        min(
            JITTER_MAX_SCALE,
            max(0.0, math.log2(num_devices / node_size)) / math.log2(reference_nodes),
        )
    )


def matmul_peak_tflops(spec: AcceleratorSpec, precision: str) -> float:
    """Dense peak used for matmuls at a training precision.

    Parameters
    ----------
    spec : AcceleratorSpec
        The accelerator (catalog peaks per precision).
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision; 'fp32' is true FP32, 'tf32' the TF32 tensor cores.

    Returns
    -------
    float
        The catalog's dense peak, 0 where the chip lacks the precision. [TFLOP/s]
    """
    return spec.peak_tflops.get(precision, 0.0)


def peak_16bit_tflops(spec: AcceleratorSpec) -> float:
    """Dense bf16 (else fp16) peak: MFU against it compares precisions.

    Parameters
    ----------
    spec : AcceleratorSpec
        The accelerator.

    Returns
    -------
    float
        0 when the chip has neither. [TFLOP/s]
    """
    return spec.peak_tflops.get("bf16", spec.peak_tflops.get("fp16", 0.0))


def attention_peak_tflops(spec: AcceleratorSpec, precision: str) -> float:
    """Dense peak for attention: 16-bit for fp8 training (no fp8 FlashAttention).

    Parameters
    ----------
    spec : AcceleratorSpec
        The accelerator.
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision.

    Returns
    -------
    float
        :func:`matmul_peak_tflops`, or :func:`peak_16bit_tflops` for fp8. [TFLOP/s]
    """
    if precision != "fp8":
        return matmul_peak_tflops(spec, precision)
    return peak_16bit_tflops(spec)


def node_size_of(scenario: Scenario) -> int:
    """Devices in one fast domain: a node of GPUs, or a whole TPU slice (one ICI domain).

    Parameters
    ----------
    scenario : Scenario
        A validated scenario.

    Returns
    -------
    int
        ``gpus_per_node``, or for TPUs ``num_gpus / num_slices``. [devices]
    """
    cluster = scenario.cluster
    if cluster.spec.family == TPU_FAMILY:
        return cluster.num_gpus // cluster.num_slices
    return cluster.gpus_per_node


def activation_bytes_for(precision: str) -> float:
    """Bytes of one activation value at a training precision.

    Parameters
    ----------
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision; fp8 training keeps 16-bit activations between its matmuls.

    Returns
    -------
    float
        4 for fp32 and tf32, 2 otherwise. [B]
    """
    return FP32_BYTES if precision in ("fp32", "tf32") else HALF_PRECISION_BYTES


def build_workload(
    scenario: Scenario, efficiency: Efficiency | None = None, software: Software | None = None
) -> Workload:
    """Collect the per-scenario constants, converted to SI units.

    Parameters
    ----------
    scenario : Scenario
        A validated scenario (:func:`estimator.core.validate_scenario`).
    efficiency : Efficiency, optional
        Overrides the family's calibrated efficiencies on the scenario's stack
        (:func:`efficiency_for`).
    software : Software, optional
        Overrides the framework behaviour (:data:`calibration.SOFTWARE`).

    Returns
    -------
    Workload
        Peaks in FLOP/s, bandwidths in B/s, memory in B (see :class:`Workload`).
    """
    spec, cluster = scenario.cluster.spec, scenario.cluster
    precision = scenario.training.precision
    efficiency = efficiency or efficiency_for(spec.family, scenario.stack)
    framework = profile_for(scenario.framework, spec.family)
    node_size = node_size_of(scenario)
    return Workload(
        model=scenario.model,
        spec=spec,
        efficiency=efficiency,
        software=software or SOFTWARE,
        margins=scenario.margins,
        precision=precision,
        fp8_recipe=scenario.training.fp8_recipe,
        offload=scenario.training.offload,
        global_batch_size=scenario.training.global_batch_size,
        tokens=scenario.training.tokens,
        num_gpus=cluster.num_gpus,
        node_size=node_size,
        peak_matmul_flops=matmul_peak_tflops(spec, precision) * TERA,
        peak_attention_flops=attention_peak_tflops(spec, precision) * TERA,
        peak_16bit_flops=peak_16bit_tflops(spec) * TERA,
        host_link_bandwidth=efficiency.host_link_gbs * GIGA,
        memory_bandwidth=spec.memory_bandwidth_tbs * TERA,
        intra_node_bandwidth=spec.intra_node_bandwidth_gbs * GIGA,
        inter_node_bandwidth=spec.inter_node_bandwidth_gbps * GIGA / BITS_PER_BYTE,
        activation_bytes=activation_bytes_for(precision),
        parameters=float(arithmetic.total_parameters(scenario.model)),
        active_parameters=float(arithmetic.active_parameters(scenario.model)),
        framework=framework,
        jitter_scale=network_jitter_scale(cluster.num_gpus, node_size),
        usable_memory=spec.memory_gib * (1.0 - framework.memory_headroom) * GIB,
        run=scenario.run,
        method=scenario.training.method,
        optimizer=scenario.training.optimizer,
        master_weights=scenario.training.master_weights,
        stack=scenario.stack,
    )
