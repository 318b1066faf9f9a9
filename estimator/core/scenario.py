"""Typed, validated scenario (format version 1, see the scenario-format contract).

Frozen dataclasses only; :mod:`estimator.core.validation` builds them from the JSON dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimator.core.catalog import AcceleratorSpec

RECOMPUTE_MODES = ("none", "selective", "full")
PIPELINE_SCHEDULES = ("1f1b", "interleaved")
TRAINING_PRECISIONS = ("fp32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class MoEConfig:
    """Mixture-of-experts block (optional ``model.moe``)."""

    num_experts: int
    top_k: int
    expert_ffn_hidden_size: int
    num_shared_experts: int = 0
    moe_layer_every: int = 1


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only transformer shape (``model``)."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    gated_mlp: bool
    vocab_size: int
    seq_len: int
    tied_embeddings: bool
    moe: MoEConfig | None = None

    @property
    def head_dim(self) -> int:
        """Width of one attention head. [elements]"""
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class TrainingConfig:
    """What is trained for how long (``training``)."""

    tokens: float
    global_batch_size: int
    precision: str


@dataclass(frozen=True)
class ClusterConfig:
    """Where it runs (``cluster``), with the accelerator spec resolved from the catalog."""

    accelerator: str
    num_gpus: int
    gpus_per_node: int
    spec: AcceleratorSpec


@dataclass(frozen=True)
class ParallelismConfig:
    """One explicit parallel layout (``parallelism``)."""

    tp: int
    pp: int
    dp: int
    micro_batch_size: int
    zero_stage: int
    recompute: str
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    pipeline_schedule: str = "1f1b"
    virtual_stages: int = 1

    def as_dict(self) -> dict[str, object]:
        """The layout in the contract's ``parallelism`` shape."""
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "cp": self.cp,
            "ep": self.ep,
            "micro_batch_size": self.micro_batch_size,
            "zero_stage": self.zero_stage,
            "recompute": self.recompute,
            "sequence_parallel": self.sequence_parallel,
            "pipeline_schedule": self.pipeline_schedule,
            "virtual_stages": self.virtual_stages,
        }


@dataclass(frozen=True)
class Margins:
    """Safety margins (``margins``); the defaults are the project's documented ones."""

    framework_overhead: float = 0.10
    network_jitter: float = 0.05


@dataclass(frozen=True)
class Scenario:
    """A whole validated scenario. ``parallelism`` is None when the input said ``"auto"``."""

    model: ModelConfig
    training: TrainingConfig
    cluster: ClusterConfig
    parallelism: ParallelismConfig | None
    margins: Margins = field(default_factory=Margins)
    format_version: int = 1
