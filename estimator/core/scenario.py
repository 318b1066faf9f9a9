"""Typed, validated scenario (format version 1, see the scenario-format contract).

Frozen dataclasses only; :mod:`estimator.core.validation` builds them from the JSON dict.
Their defaults are the scenario schema's (:mod:`estimator.core.schema`), which also holds
the allowed values of the choice keys (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimator.core.catalog import AcceleratorSpec
from estimator.core.schema import CAPACITY_CHOICES as CAPACITY_CHOICES
from estimator.core.schema import DEFAULT_LORA_TARGETS as DEFAULT_LORA_TARGETS
from estimator.core.schema import FP8_RECIPES as FP8_RECIPES
from estimator.core.schema import LORA_TARGETS as LORA_TARGETS
from estimator.core.schema import METHOD_TYPES as METHOD_TYPES
from estimator.core.schema import OFFLOAD_MODES as OFFLOAD_MODES
from estimator.core.schema import OPTIMIZERS as OPTIMIZERS
from estimator.core.schema import PIPELINE_SCHEDULES as PIPELINE_SCHEDULES
from estimator.core.schema import RECOMPUTE_MODES as RECOMPUTE_MODES
from estimator.core.schema import TRAINING_PRECISIONS as TRAINING_PRECISIONS
from estimator.core.schema import default


@dataclass(frozen=True)
class MoEConfig:
    """Mixture-of-experts block (optional ``model.moe``)."""

    num_experts: int
    top_k: int
    expert_ffn_hidden_size: int
    num_shared_experts: int = default("model.moe.num_shared_experts")
    moe_layer_every: int = default("model.moe.moe_layer_every")
    #: Leading layers that keep a dense MLP (DeepSeek's first_k_dense_replace). [layers]
    first_dense_layers: int = default("model.moe.first_dense_layers")


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (optional ``model.mla``; DeepSeek-V2/V3, Kimi K2).

    Queries pass through a rank-``q_lora_rank`` latent (0: one full-rank projection), keys
    and values through one rank-``kv_lora_rank`` latent shared by every head; each query and
    key head has ``qk_nope_head_dim`` latent-derived and ``qk_rope_head_dim`` rotary
    dimensions (the rotary key is shared by the heads), each value head ``v_head_dim``.
    The names are those of the Hugging Face configs. [elements]
    """

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = default("model.mla.q_lora_rank")

    @property
    def latent_width(self) -> int:
        """Width the down-projections produce per token: the query latent, the KV latent
        and the shared rotary key (whole on every tensor-parallel rank). [elements]"""
        return self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim


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
    #: Width of one attention head; hidden_size / num_attention_heads unless the model
    #: decouples them (Gemma, Qwen3, many MaxText configs). [elements]
    head_dim: int = 0
    #: Multi-head latent attention; None for standard (MHA/GQA/MQA) attention. With it,
    #: ``head_dim`` is a query/key head's width, qk_nope_head_dim + qk_rope_head_dim.
    mla: MLAConfig | None = None

    def __post_init__(self) -> None:
        if self.mla is not None:
            width = self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
            object.__setattr__(self, "head_dim", width)
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @property
    def attention_width(self) -> int:
        """Width of the concatenated query heads, num_attention_heads x head_dim. [elements]"""
        return self.num_attention_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one value head: head_dim, or MLA's v_head_dim. [elements]"""
        return self.head_dim if self.mla is None else self.mla.v_head_dim

    @property
    def key_width(self) -> int:
        """Width of the keys one token stores, num_kv_heads x head_dim. [elements]"""
        return self.num_kv_heads * self.head_dim

    @property
    def value_width(self) -> int:
        """Width of the values one token stores, num_kv_heads x value head. [elements]"""
        return self.num_kv_heads * self.value_head_dim

    @property
    def output_width(self) -> int:
        """Width of the attention output (the output projection's input),
        num_attention_heads x value head. [elements]"""
        return self.num_attention_heads * self.value_head_dim

    @property
    def score_width(self) -> float:
        """Mean of the query and output widths: the score (Q K^T, width n_heads d_qk) and
        value (A V, width n_heads d_v) matmuls cost 2 s (n_heads d_qk + n_heads d_v) =
        4 s score_width FLOPs per token; attention_width without MLA. [elements]"""
        return (self.attention_width + self.output_width) / 2.0


@dataclass(frozen=True)
class MethodConfig:
    """How the weights are trained (``training.method``).

    ``full`` trains every weight but the ``frozen_layers`` bottom layers and, with
    ``frozen_embeddings``, the embedding tables; ``lora`` and ``qlora`` freeze every base
    weight and train rank-``rank`` adapters on the ``targets`` matrices.
    """

    type: str = default("training.method.type")
    rank: int = default("training.method.rank")
    targets: tuple[str, ...] = default("training.method.targets")
    frozen_layers: int = default("training.method.frozen_layers")
    frozen_embeddings: bool = default("training.method.frozen_embeddings")
    #: Dropout on the adapter branch (LoRA's lora_dropout); above 0 it stores a copy of
    #: each adapter's input. [1]
    dropout: float = default("training.method.dropout")

    @property
    def adapters(self) -> bool:
        """Whether the base weights are frozen under low-rank adapters."""
        return self.type != "full"

    def as_dict(self) -> dict[str, object]:
        """The method in the contract's ``training.method`` shape.

        Returns
        -------
        dict
            ``type`` with ``rank``, ``targets`` and ``dropout`` [1] for adapters, else
            ``frozen_layers`` [layers] and ``frozen_embeddings``.
        """
        if self.adapters:
            return {
                "type": self.type,
                "rank": self.rank,
                "targets": list(self.targets),
                "dropout": self.dropout,
            }
        return {
            "type": "full",
            "frozen_layers": self.frozen_layers,
            "frozen_embeddings": self.frozen_embeddings,
        }


@dataclass(frozen=True)
class TrainingConfig:
    """What is trained for how long (``training``)."""

    tokens: float
    global_batch_size: int
    precision: str
    fp8_recipe: str = default("training.fp8_recipe")
    offload: str = default("training.offload")
    method: MethodConfig = field(default_factory=MethodConfig)
    optimizer: str = default("training.optimizer")
    #: Mixed precision keeps an fp32 master copy and fp32 optimizer moments; False is pure
    #: 16-bit training (weights, gradients and moments all 16-bit).
    master_weights: bool = default("training.master_weights")


@dataclass(frozen=True)
class ClusterConfig:
    """Where it runs (``cluster``), with the accelerator spec resolved from the catalog."""

    accelerator: str
    num_gpus: int
    gpus_per_node: int
    spec: AcceleratorSpec
    #: TPU slices joined over the data-centre network (multislice); 1 for GPUs.
    num_slices: int = default("cluster.num_slices")


@dataclass(frozen=True)
class ParallelismConfig:
    """One explicit parallel layout (``parallelism``)."""

    tp: int
    pp: int
    dp: int
    micro_batch_size: int
    zero_stage: int
    recompute: str
    cp: int = default("parallelism.cp")
    ep: int = default("parallelism.ep")
    sequence_parallel: bool = False
    pipeline_schedule: str = default("parallelism.pipeline_schedule")
    virtual_stages: int = default("parallelism.virtual_stages")
    #: Saved activations are copied to host memory and back (MaxText offload remat policies,
    #: Megatron activation offloading), overlapped with compute.
    activation_offload: bool = default("parallelism.activation_offload")

    def as_dict(self) -> dict[str, object]:
        """The layout in the contract's ``parallelism`` shape.

        Returns
        -------
        dict
            Sizes tp, pp, dp, cp, ep [devices], ``micro_batch_size`` [sequences] and the
            layout's options, keyed as in the scenario format.
        """
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
            "activation_offload": self.activation_offload,
        }


@dataclass(frozen=True)
class Margins:
    """Safety margins (``margins``); the defaults are the project's documented ones."""

    framework_overhead: float = default("margins.framework_overhead")
    network_jitter: float = default("margins.network_jitter")


@dataclass(frozen=True)
class RunSettings:
    """The optional ``run`` object: what the whole run spends beyond its steady state.

    ``None`` takes the estimator's default (:mod:`estimator.core.wholerun`).
    """

    capacity: str = default("run.capacity")
    #: Evaluation as a share of training time. [1]
    evaluation_fraction: float | None = None
    #: Share of the allocation held but not training. [1]
    allocation_idle: float | None = None


@dataclass(frozen=True)
class Scenario:
    """A whole validated scenario. ``parallelism`` is None when the input said ``"auto"``."""

    model: ModelConfig
    training: TrainingConfig
    cluster: ClusterConfig
    parallelism: ParallelismConfig | None
    margins: Margins = field(default_factory=Margins)
    format_version: int = 1
    #: Framework profile id (:mod:`estimator.core.frameworks`); "auto" picks the family's.
    framework: str = default("framework")
    run: RunSettings = field(default_factory=RunSettings)
    #: When ``framework`` was resolved from "auto": the later candidates that also run the
    #: scenario, in order; the layout search moves on to them while no layout fits.
    framework_fallbacks: tuple[str, ...] = ()
    #: The software stack whose calibrated efficiency the estimate uses: the named
    #: framework's, or "pooled" (the median stack) when it was left to "auto"
    #: (:func:`estimator.core.frameworks.stack_assumed`).
    stack: str = "pooled"
