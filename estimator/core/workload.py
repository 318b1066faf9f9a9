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
from estimator.core.frameworks import FrameworkProfile, profile_for
from estimator.core.memory import GIB
from estimator.core.scenario import Margins, MethodConfig, ModelConfig, RunSettings, Scenario

TPU_FAMILY = "google-tpu"


@dataclass(frozen=True)
class Workload:
    """Per-scenario constants, in SI units (FLOP/s, B/s, s, B).

    Attributes
    ----------
    peak_matmul_flops : float
        Dense peak for the training precision's matmuls (true FP32 for 'fp32', TF32 tensor
        cores for 'tf32'). [FLOP/s]
    peak_attention_flops : float
        Dense peak for attention and other 16-bit work (fp8 training keeps attention in
        bf16). [FLOP/s]
    node_size : int
        Devices in one fast (NVLink-class) domain; a TPU slice is one ICI domain.
    peak_16bit_flops : float
        Dense 16-bit peak, the common yardstick of MFU across precisions. [FLOP/s]
    host_link_bandwidth : float
        Device-to-host copy bandwidth, one direction. [B/s]
    framework : FrameworkProfile
        What the framework runs (:mod:`estimator.core.frameworks`).
    jitter_scale : float
        Multiplier of ``margins.network_jitter`` at this cluster size
        (:func:`network_jitter_scale`). [1]
    usable_memory : float
        Device memory a layout may use: capacity less the framework's headroom. [B]
    method, optimizer, master_weights
        Training method, optimizer and whether mixed precision keeps an fp32 master copy
        (:mod:`estimator.core.finetune`).
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


#: Devices at which the network-jitter margin reaches its stated value, and the most it
#: grows to (twice, on the largest clusters).
JITTER_REFERENCE_DEVICES = 1024
JITTER_MAX_SCALE = 2.0


def network_jitter_scale(num_devices: int, node_size: int) -> float:
    """How much of ``margins.network_jitter`` a cluster of ``num_devices`` pays.

    Jitter is what the scale-out network adds to a synchronous step: congestion, slow links,
    retransmits, the slowest of many collectives. It is 0 inside one node, grows with the
    logarithm of the cluster size (the depth of the collectives' trees and the chance that
    one link is slow), reaches the stated margin at 1,024 devices and at most doubles it:
    with the default 5 %, 5 % at 1,024 devices, 7.9 % at 16,384, 10 % from 131,072. [1]
    """
    if num_devices <= node_size:
        return 0.0
    return float(
        min(
            JITTER_MAX_SCALE,
            max(0.0, math.log2(num_devices / node_size)) / math.log2(JITTER_REFERENCE_DEVICES / 8),
        )
    )


def matmul_peak_tflops(spec: AcceleratorSpec, precision: str) -> float:
    """Dense peak used for matmuls at a training precision. [TFLOP/s]"""
    return spec.peak_tflops.get(precision, 0.0)


def peak_16bit_tflops(spec: AcceleratorSpec) -> float:
    """Dense bf16 (else fp16) peak: MFU against it compares precisions. [TFLOP/s]"""
    return spec.peak_tflops.get("bf16", spec.peak_tflops.get("fp16", 0.0))


def attention_peak_tflops(spec: AcceleratorSpec, precision: str) -> float:
    """Dense peak for attention: 16-bit for fp8 training (no fp8 FlashAttention). [TFLOP/s]"""
    if precision != "fp8":
        return matmul_peak_tflops(spec, precision)
    return peak_16bit_tflops(spec)


def node_size_of(scenario: Scenario) -> int:
    """Devices in one fast domain: a node of GPUs, or a whole TPU slice (one ICI domain)."""
    cluster = scenario.cluster
    if cluster.spec.family == TPU_FAMILY:
        return cluster.num_gpus // cluster.num_slices
    return cluster.gpus_per_node


def build_workload(
    scenario: Scenario, efficiency: Efficiency | None = None, software: Software | None = None
) -> Workload:
    """Collect the per-scenario constants (``efficiency``/``software`` override calibration)."""
    spec, cluster = scenario.cluster.spec, scenario.cluster
    precision = scenario.training.precision
    efficiency = efficiency or efficiency_for(spec.family)
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
        peak_matmul_flops=matmul_peak_tflops(spec, precision) * 1e12,
        peak_attention_flops=attention_peak_tflops(spec, precision) * 1e12,
        peak_16bit_flops=peak_16bit_tflops(spec) * 1e12,
        host_link_bandwidth=efficiency.host_link_gbs * 1e9,
        memory_bandwidth=spec.memory_bandwidth_tbs * 1e12,
        intra_node_bandwidth=spec.intra_node_bandwidth_gbs * 1e9,
        inter_node_bandwidth=spec.inter_node_bandwidth_gbps * 1e9 / 8.0,
        activation_bytes=4.0 if precision in ("fp32", "tf32") else 2.0,
        parameters=float(arithmetic.total_parameters(scenario.model)),
        active_parameters=float(arithmetic.active_parameters(scenario.model)),
        framework=framework,
        jitter_scale=network_jitter_scale(cluster.num_gpus, node_size),
        usable_memory=spec.memory_gib * (1.0 - framework.memory_headroom) * GIB,
        run=scenario.run,
        method=scenario.training.method,
        optimizer=scenario.training.optimizer,
        master_weights=scenario.training.master_weights,
    )
