"""Turn a scenario dict (format version 1) into a :class:`Scenario`, or raise ScenarioError.

Every message names the offending key with its dotted path and says why, for example
``model.num_layers: must be a positive integer, got -3``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from estimator.core import layout_rules as rules
from estimator.core.catalog import AcceleratorSpec, custom_spec, load_catalog, spec_with_overrides
from estimator.core.errors import ScenarioError
from estimator.core.frameworks import (
    LEGACY_FP16_FRAMEWORKS,
    FrameworkProfile,
    auto_profiles,
    profile_for,
    stack_assumed,
)
from estimator.core.measurement import measurement_parse
from estimator.core.power import spec_at_power_limit
from estimator.core.scenario import (
    CAPACITY_CHOICES,
    DEFAULT_LORA_TARGETS,
    FP8_RECIPES,
    LORA_TARGETS,
    METHOD_TYPES,
    OFFLOAD_MODES,
    OPTIMIZERS,
    PIPELINE_SCHEDULES,
    RECOMPUTE_MODES,
    TRAINING_PRECISIONS,
    ClusterConfig,
    Margins,
    MethodConfig,
    MLAConfig,
    ModelConfig,
    MoEConfig,
    ParallelismConfig,
    RunSettings,
    Scenario,
    TrainingConfig,
)
from estimator.core.workload import TPU_FAMILY

_MISSING: Any = object()
#: Upper bound for any integer field, far above any real model or cluster.
MAX_INTEGER = 2**40
#: Largest cluster accepted: beyond it the failure model's job MTBF drops below seconds.
MAX_DEVICES = 1_000_000


class _Section:
    """Typed getters over one JSON object; each error names ``prefix.key``."""

    def __init__(self, data: Any, prefix: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(prefix, f"must be an object, got {_show(data)}")
        for key in data:
            if key not in allowed:
                raise ScenarioError(f"{prefix}.{key}", f"unknown key, expected one of {allowed}")
        self.data, self.prefix = data, prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is _MISSING:
            raise ScenarioError(self.key(name), "is required")
        return default

    def integer(
        self, name: str, default: Any = _MISSING, minimum: int = 1, maximum: int = MAX_INTEGER
    ) -> int:
        value = self.raw(name, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value != int(value) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ScenarioError(self.key(name), f"must be {kind}, got {_show(value)}")
        if value > maximum:
            raise ScenarioError(self.key(name), f"must be at most {maximum:,}, got {_show(value)}")
        return int(value)

    def number(self, name: str, default: Any = _MISSING, *, low: float, high: float) -> float:
        value = self.raw(name, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low <= value <= high:
            raise ScenarioError(
                self.key(name), f"must be a number in [{low:g}, {high:g}], got {_show(value)}"
            )
        return float(value)

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise ScenarioError(self.key(name), f"must be true or false, got {_show(value)}")
        return value

    def choice(self, name: str, options: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.raw(name, default)
        if value not in options:
            raise ScenarioError(self.key(name), f"must be one of {options}, got {_show(value)}")
        return str(value)

    def text(self, name: str, default: Any = _MISSING) -> str:
        value = self.raw(name, default)
        if not isinstance(value, str):
            raise ScenarioError(self.key(name), f"must be a string, got {_show(value)}")
        return value


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("\n", " ")
    text = {"True": "true", "False": "false", "None": "null"}.get(text, text)
    return text if len(text) <= 60 else text[:57] + "..."


MODEL_KEYS = (
    "name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
    "ffn_hidden_size", "gated_mlp", "vocab_size", "seq_len", "tied_embeddings", "moe",
    "head_dim", "mla",
)  # fmt: skip
MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
TRAINING_KEYS = (
    "tokens", "global_batch_size", "precision", "fp8_recipe", "method", "optimizer", "offload",
    "master_weights",
)  # fmt: skip
CLUSTER_KEYS = (
    "accelerator", "num_gpus", "gpus_per_node", "accelerator_spec", "num_slices",
    "power_limit_w",
)  # fmt: skip
MOE_KEYS = (
    "num_experts", "top_k", "expert_ffn_hidden_size", "num_shared_experts", "moe_layer_every",
    "first_dense_layers",
)  # fmt: skip
PARALLELISM_KEYS = (
    "tp", "pp", "dp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute",
    "sequence_parallel", "pipeline_schedule", "virtual_stages", "activation_offload",
)  # fmt: skip


def _moe(data: Any, num_layers: int) -> MoEConfig | None:
    if data is None:
        return None
    section = _Section(data, "model.moe", MOE_KEYS)
    moe = MoEConfig(
        num_experts=section.integer("num_experts"),
        top_k=section.integer("top_k"),
        expert_ffn_hidden_size=section.integer("expert_ffn_hidden_size"),
        num_shared_experts=section.integer("num_shared_experts", 0, minimum=0),
        moe_layer_every=section.integer("moe_layer_every", 1),
        first_dense_layers=section.integer("first_dense_layers", 0, minimum=0),
    )
    if moe.top_k > moe.num_experts:
        raise ScenarioError(
            "model.moe.top_k", f"must not exceed num_experts = {moe.num_experts}, got {moe.top_k}"
        )
    if moe.moe_layer_every > num_layers:
        raise ScenarioError(
            "model.moe.moe_layer_every",
            f"must not exceed num_layers = {num_layers}, got {moe.moe_layer_every}",
        )
    if moe.first_dense_layers + moe.moe_layer_every > num_layers:
        raise ScenarioError(
            "model.moe.first_dense_layers",
            f"leaves no MoE layer: num_layers = {num_layers}, moe_layer_every = "
            f"{moe.moe_layer_every}, got {moe.first_dense_layers}",
        )
    return moe


def _mla(data: Any) -> MLAConfig | None:
    if data is None:
        return None
    section = _Section(data, "model.mla", MLA_KEYS)
    return MLAConfig(
        kv_lora_rank=section.integer("kv_lora_rank"),
        qk_nope_head_dim=section.integer("qk_nope_head_dim"),
        qk_rope_head_dim=section.integer("qk_rope_head_dim", 0, minimum=0),
        v_head_dim=section.integer("v_head_dim"),
        q_lora_rank=section.integer("q_lora_rank", 0, minimum=0),
    )


def _model(data: Any) -> ModelConfig:
    section = _Section(data, "model", MODEL_KEYS)
    hidden, heads = section.integer("hidden_size"), section.integer("num_attention_heads")
    layers = section.integer("num_layers")
    model = ModelConfig(
        name=section.text("name", ""),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=section.integer("num_kv_heads", heads),
        ffn_hidden_size=section.integer("ffn_hidden_size", 4 * hidden),
        gated_mlp=section.boolean("gated_mlp", False),
        vocab_size=section.integer("vocab_size"),
        seq_len=section.integer("seq_len"),
        tied_embeddings=section.boolean("tied_embeddings", False),
        moe=_moe(section.raw("moe", None), layers),
        head_dim=section.integer("head_dim") if section.raw("head_dim", None) is not None else 0,
        mla=_mla(section.raw("mla", None)),
    )
    explicit_head_dim = section.raw("head_dim", None) is not None
    if model.mla is not None:
        _check_mla(model, explicit_head_dim)
    _check_heads(model, explicit_head_dim=explicit_head_dim or model.mla is not None)
    return model


def _check_mla(model: ModelConfig, explicit_head_dim: bool) -> None:
    if explicit_head_dim:
        raise ScenarioError(
            "model.head_dim",
            "is set by model.mla (qk_nope_head_dim + qk_rope_head_dim); leave it out",
        )
    if model.num_kv_heads != model.num_attention_heads:
        raise ScenarioError(
            "model.num_kv_heads",
            "must equal num_attention_heads with model.mla (each head gets its own keys and "
            f"values from the shared latent), got {model.num_kv_heads}",
        )


def _check_heads(model: ModelConfig, explicit_head_dim: bool) -> None:
    if not explicit_head_dim and model.hidden_size % model.num_attention_heads:
        raise ScenarioError(
            "model.hidden_size",
            f"must be divisible by num_attention_heads = "
            f"{model.num_attention_heads} (or give model.head_dim), got {model.hidden_size}",
        )
    if model.num_kv_heads > model.num_attention_heads or (
        model.num_attention_heads % model.num_kv_heads
    ):
        raise ScenarioError(
            "model.num_kv_heads",
            f"must divide num_attention_heads = "
            f"{model.num_attention_heads}, got {model.num_kv_heads}",
        )


def _training(data: Any, spec: AcceleratorSpec, model: ModelConfig) -> TrainingConfig:
    section = _Section(data, "training", TRAINING_KEYS)
    training = TrainingConfig(
        tokens=section.number("tokens", low=1.0, high=1e18),
        global_batch_size=section.integer("global_batch_size"),
        precision=section.choice("precision", TRAINING_PRECISIONS),
        fp8_recipe=section.choice("fp8_recipe", FP8_RECIPES, "tensorwise"),
        offload=section.choice("offload", OFFLOAD_MODES, "none"),
        method=_method(section.raw("method", {"type": "full"}), model),
        optimizer=section.choice("optimizer", OPTIMIZERS, "adamw"),
        master_weights=section.boolean("master_weights", True),
    )
    if not training.master_weights and training.precision in ("fp32", "tf32"):
        raise ScenarioError(
            "training.master_weights",
            f"false means pure 16-bit training; precision {training.precision!r} keeps "
            "32-bit weights",
        )
    if training.method.type == "qlora" and training.precision not in ("bf16", "fp16"):
        raise ScenarioError(
            "training.precision",
            "QLoRA computes in 16 bits over its 4-bit weights: use 'bf16' or 'fp16', "
            f"got {training.precision!r}",
        )
    if training.precision not in spec.peak_tflops:
        have = ", ".join(sorted(spec.peak_tflops)) or "none"
        raise ScenarioError(
            "training.precision",
            f"{spec.id} has no {training.precision} peak in the catalog (has: {have})",
        )
    return training


METHOD_KEYS = ("type", "rank", "targets", "dropout", "frozen_layers", "frozen_embeddings")
#: Largest LoRA rank accepted (adapters beyond it stop being low-rank for any model).
MAX_LORA_RANK = 4096


def _method(data: Any, model: ModelConfig) -> MethodConfig:
    """``training.method``: full training (optionally with frozen parts), LoRA or QLoRA."""
    section = _Section(data, "training.method", METHOD_KEYS)
    kind = section.choice("type", METHOD_TYPES, "full")
    if kind == "full":
        for key in ("rank", "targets", "dropout"):
            if key in section.data:
                raise ScenarioError(section.key(key), "applies to 'lora' and 'qlora' only")
        return MethodConfig(
            type="full",
            frozen_layers=section.integer("frozen_layers", 0, minimum=0, maximum=model.num_layers),
            frozen_embeddings=section.boolean("frozen_embeddings", False),
        )
    for key in ("frozen_layers", "frozen_embeddings"):
        if key in section.data:
            raise ScenarioError(
                section.key(key),
                f"applies to full training; {kind} already freezes every base weight",
            )
    targets = section.raw("targets", list(DEFAULT_LORA_TARGETS))
    if (
        not isinstance(targets, list)
        or not targets
        or any(t not in LORA_TARGETS for t in targets)
        or len(set(targets)) != len(targets)
    ):
        raise ScenarioError(
            section.key("targets"),
            f"must be a non-empty list of distinct values from {LORA_TARGETS}, got "
            f"{_show(targets)}",
        )
    rank = section.integer("rank", 16, maximum=MAX_LORA_RANK)
    if rank > model.hidden_size:
        raise ScenarioError(
            section.key("rank"),
            f"must not exceed model.hidden_size = {model.hidden_size}, got {rank}",
        )
    if "gate_proj" in targets and not model.gated_mlp:
        raise ScenarioError(
            section.key("targets"), "'gate_proj' needs a gated MLP (model.gated_mlp)"
        )
    return MethodConfig(
        type=kind,
        rank=rank,
        targets=tuple(t for t in LORA_TARGETS if t in targets),
        dropout=section.number("dropout", 0.0, low=0.0, high=0.9),
    )


def _accelerator(section: _Section) -> AcceleratorSpec:
    accelerator = section.text("accelerator")
    overrides = section.raw("accelerator_spec", {})
    if not isinstance(overrides, Mapping):
        raise ScenarioError(
            "cluster.accelerator_spec", f"must be an object, got {_show(overrides)}"
        )
    catalog = load_catalog()
    if accelerator in catalog:
        return spec_with_overrides(catalog[accelerator], overrides)
    if overrides:
        return custom_spec(accelerator, overrides)
    raise ScenarioError(
        "cluster.accelerator",
        f"unknown accelerator {accelerator!r}; see `python -m estimator catalog`",
    )


def _cluster(data: Any) -> ClusterConfig:
    section = _Section(data, "cluster", CLUSTER_KEYS)
    spec = _accelerator(section)
    if section.raw("power_limit_w", None) is not None:  # absent or null: the TDP, no limit
        spec = spec_at_power_limit(spec, section.raw("power_limit_w"))
    cluster = ClusterConfig(
        accelerator=spec.id,
        num_gpus=section.integer("num_gpus", maximum=MAX_DEVICES),
        gpus_per_node=section.integer("gpus_per_node", spec.devices_per_node),
        spec=spec,
        num_slices=section.integer("num_slices", 1),
    )
    if cluster.num_slices > 1 and spec.family != TPU_FAMILY:
        raise ScenarioError(
            "cluster.num_slices", "only TPU slices are joined over DCN; GPUs use gpus_per_node"
        )
    if cluster.num_gpus % cluster.num_slices:
        raise ScenarioError(
            "cluster.num_slices",
            f"must divide cluster.num_gpus = {cluster.num_gpus}, got {cluster.num_slices}",
        )
    return cluster


def _parallelism(data: Any) -> ParallelismConfig | None:
    if data == "auto":
        return None
    if not isinstance(data, Mapping):
        raise ScenarioError("parallelism", f'must be an object or "auto", got {_show(data)}')
    section = _Section(data, "parallelism", PARALLELISM_KEYS)
    tp = section.integer("tp")
    schedule = section.choice("pipeline_schedule", PIPELINE_SCHEDULES, "1f1b")
    layout = ParallelismConfig(
        tp=tp,
        pp=section.integer("pp"),
        dp=section.integer("dp"),
        cp=section.integer("cp", 1),
        ep=section.integer("ep", 1),
        micro_batch_size=section.integer("micro_batch_size"),
        zero_stage=section.integer("zero_stage", minimum=0),
        recompute=section.choice("recompute", RECOMPUTE_MODES),
        sequence_parallel=section.boolean("sequence_parallel", tp > 1),
        pipeline_schedule=schedule,
        virtual_stages=section.integer("virtual_stages", 1),
        activation_offload=section.boolean("activation_offload", False),
    )
    if layout.zero_stage > 3:
        raise ScenarioError(
            "parallelism.zero_stage", f"must be 0, 1, 2 or 3, got {layout.zero_stage}"
        )
    if layout.virtual_stages > 1 and schedule != "interleaved":
        raise ScenarioError(
            "parallelism.virtual_stages", "more than 1 needs pipeline_schedule 'interleaved'"
        )
    return layout


def _margins(data: Any) -> Margins:
    section = _Section(data, "margins", ("framework_overhead", "network_jitter"))
    return Margins(
        framework_overhead=section.number("framework_overhead", 0.10, low=0.0, high=10.0),
        network_jitter=section.number("network_jitter", 0.05, low=0.0, high=10.0),
    )


def _run(data: Any) -> RunSettings:
    section = _Section(data, "run", ("capacity", "evaluation_fraction", "allocation_idle"))
    return RunSettings(
        capacity=section.choice("capacity", CAPACITY_CHOICES, "dedicated"),
        evaluation_fraction=(
            section.number("evaluation_fraction", low=0.0, high=1.0)
            if section.raw("evaluation_fraction", None) is not None
            else None
        ),
        allocation_idle=(
            section.number("allocation_idle", low=0.0, high=0.9)
            if section.raw("allocation_idle", None) is not None
            else None
        ),
    )


def _framework(data: Any, family: str) -> str:
    if data is None:
        return "auto"
    if not isinstance(data, str):
        raise ScenarioError("framework", f"must be a string, got {_show(data)}")
    profile = profile_for(data, family)
    if family == TPU_FAMILY and profile.id != "maxtext":
        raise ScenarioError("framework", f"{data!r} does not run on TPUs; use 'maxtext' or 'auto'")
    return data


def price_per_gpu_hour(data: Any) -> float | None:
    """The optional ``cost.price_per_gpu_hour`` of a scenario dict (None when absent).

    Used by the layout search's ``"cost"`` objective; the amount is in the caller's currency.

    Parameters
    ----------
    data : dict
        A scenario in the contract's format (version 1).

    Returns
    -------
    float or None
        The price of one GPU-hour, in [0, 1e6]. [currency/h]

    Raises
    ------
    ScenarioError
        When ``cost`` or its price is malformed.
    """
    if not isinstance(data, Mapping) or data.get("cost") is None:
        return None
    section = _Section(data["cost"], "cost", ("price_per_gpu_hour",))
    if section.raw("price_per_gpu_hour", None) is None:
        return None
    return section.number("price_per_gpu_hour", low=0.0, high=1e6)


def validate_scenario(data: Any) -> Scenario:
    """Check every field of a scenario dict and return the typed :class:`Scenario`.

    The layout checks are the predicates of :mod:`estimator.core.layout_rules`
    (:func:`check_layout`), which the layout search applies to its whole grid.

    Parameters
    ----------
    data : dict
        A scenario in the contract's format (version 1).

    Returns
    -------
    Scenario
        The typed scenario, its ``framework`` resolved to a profile that runs it and its
        ``parallelism`` None for ``"auto"``.

    Raises
    ------
    ScenarioError
        The first problem found, naming the key (``.key``) and the reason (``.reason``).
    """
    if not isinstance(data, Mapping):
        raise ScenarioError("scenario", f"must be a JSON object, got {_show(data)}")
    version = data.get("format_version", _MISSING)
    if version is _MISSING:
        raise ScenarioError("format_version", "is required (1)")
    if version != 1 or isinstance(version, bool):
        raise ScenarioError("format_version", f"must be 1, got {_show(version)}")
    for section in ("model", "training", "cluster", "parallelism"):
        if section not in data:
            raise ScenarioError(section, "is required")
    cluster = _cluster(data["cluster"])
    price_per_gpu_hour(data)
    model = _model(data["model"])
    scenario = Scenario(
        model=model,
        training=_training(data["training"], cluster.spec, model),
        cluster=cluster,
        parallelism=_parallelism(data["parallelism"]),
        margins=_margins(data.get("margins") or {}),
        framework=_framework(data.get("framework"), cluster.spec.family),
        run=_run(data.get("run") or {}),
    )
    if scenario.parallelism is not None:
        check_layout(scenario, scenario.parallelism)
    measurement_parse(data.get("measurement"))  # its own key's rules; estimate() applies it
    resolved = _with_framework(scenario)
    layout = data["parallelism"]
    if isinstance(layout, Mapping) and "sequence_parallel" not in layout:
        resolved = _default_sequence_parallel(resolved)
    return resolved


def _default_sequence_parallel(scenario: Scenario) -> Scenario:
    """An omitted ``sequence_parallel`` is on with tp > 1 only where the framework has it.

    The contract's default (true when tp > 1) is today's Megatron-LM; the 2021 stack split
    no activations over the tensor-parallel group, so a layout stated for it without the
    flag keeps its LayerNorm and dropout activations whole. A stated flag is taken as given.
    """
    layout = scenario.parallelism
    profile = profile_for(scenario.framework, scenario.cluster.spec.family)
    if layout is None or profile.sequence_parallel or not layout.sequence_parallel:
        return scenario
    return dataclasses.replace(
        scenario, parallelism=dataclasses.replace(layout, sequence_parallel=False)
    )


def _with_framework(scenario: Scenario) -> Scenario:
    """The scenario with ``framework`` resolved to a profile that runs it.

    A named framework must run the layout and the training options (ScenarioError
    otherwise). ``"auto"`` is the first of :func:`~estimator.core.frameworks.auto_profiles`
    that runs them (the family's default, or the 2021 stack for fp16 on a GPU with bf16,
    then the other GPU profiles): a contract-valid scenario (ZeRO-2, full offload...) is
    never refused for a framework nobody named. With the layout left to the search, a
    period stack keeps the later candidates as ``framework_fallbacks``.
    """
    family = scenario.cluster.spec.family
    if scenario.framework != "auto":
        _check_runs(scenario, profile_for(scenario.framework, family))
        stack = stack_assumed(scenario.framework, True, family)
        return dataclasses.replace(scenario, stack=stack)
    spec = scenario.cluster.spec
    candidates = auto_profiles(family, scenario.training.precision, "bf16" in spec.peak_tflops)
    running = []
    for profile in candidates:
        try:
            _check_runs(scenario, profile)
        except ScenarioError:
            continue
        running.append(profile.id)
    if not running:
        _check_runs(scenario, profile_for("auto", family))  # raises, naming what it refuses
    # Only a period stack gives way when nothing fits: a team in 2022 that could not fit
    # the 2021 stack sharded its states; today's default reports that nothing fits.
    period = running[0] in LEGACY_FP16_FRAMEWORKS and scenario.parallelism is None
    fallbacks = tuple(running[1:]) if period else ()
    return dataclasses.replace(
        scenario,
        framework=running[0],
        framework_fallbacks=fallbacks,
        stack=stack_assumed(running[0], False, family),
    )


def _check_runs(scenario: Scenario, profile: FrameworkProfile) -> None:
    _check_training_support(scenario, profile)
    if scenario.parallelism is not None:
        check_framework(scenario, scenario.parallelism, profile)


def check_framework(
    scenario: Scenario, layout: ParallelismConfig, profile: FrameworkProfile
) -> None:
    """An explicit layout must be one the framework ``profile`` runs.

    Parameters
    ----------
    scenario : Scenario
        The validated scenario (kept for the signature the callers share).
    layout : ParallelismConfig
        The layout to check.
    profile : FrameworkProfile
        The framework the scenario runs on.

    Raises
    ------
    ScenarioError
        The first axis, schedule, ZeRO stage or recomputation mode the framework does not
        run.
    """
    name = f"framework {profile.id!r}"
    for axis in ("tp", "pp", "cp", "ep"):
        if not rules.framework_runs_axis(profile, axis, getattr(layout, axis)):
            _fail(f"parallelism.{axis}", f"{name} has no {axis} parallelism; use 1")
    if not rules.framework_runs_axis(profile, "virtual_stages", layout.virtual_stages):
        _fail("parallelism.pipeline_schedule", f"{name} runs only the 1f1b schedule")
    if layout.zero_stage not in profile.zero_stages:
        _fail(
            "parallelism.zero_stage",
            f"{name} offers stages {list(profile.zero_stages)}, got {layout.zero_stage}",
        )
    if layout.recompute not in profile.recompute:
        _fail(
            "parallelism.recompute",
            f"{name} offers {list(profile.recompute)}, got {layout.recompute!r}",
        )


def _check_training_support(scenario: Scenario, profile: FrameworkProfile) -> None:
    name = f"framework {profile.id!r}"
    if scenario.training.precision == "fp8" and not profile.fp8:
        _fail("training.precision", f"{name} does not train in fp8")
    if scenario.training.offload not in profile.offload:
        _fail(
            "training.offload",
            f"{name} offers {list(profile.offload)}, got {scenario.training.offload!r}",
        )
    method = scenario.training.method
    if method.type not in profile.methods:
        _fail("training.method", f"{name} trains {list(profile.methods)}, got {method.type!r}")
    if method.frozen_layers and not profile.freezing:
        _fail("training.method.frozen_layers", f"{name} does not freeze layers")
    if scenario.training.optimizer not in profile.optimizers:
        _fail(
            "training.optimizer",
            f"{name} offers {list(profile.optimizers)}, got {scenario.training.optimizer!r}",
        )


def _fail(key: str, reason: str) -> None:
    raise ScenarioError(key, reason)


def check_layout(scenario: Scenario, layout: ParallelismConfig) -> None:
    """Cross-field checks of one explicit layout against the model and the cluster.

    Each check is a predicate of :mod:`estimator.core.layout_rules`, the rules the layout
    search applies to its whole grid.

    Parameters
    ----------
    scenario : Scenario
        The validated model, training and cluster sections.
    layout : ParallelismConfig
        The layout to check.

    Raises
    ------
    ScenarioError
        The first rule the layout breaks, naming the ``parallelism`` key.
    """
    num_gpus = scenario.cluster.num_gpus
    if not rules.fills_devices(num_gpus, layout.tp, layout.pp, layout.dp, layout.cp):
        product = layout.tp * layout.pp * layout.dp * layout.cp
        _fail(
            "parallelism",
            f"tp * pp * dp * cp = {product} must equal cluster.num_gpus = {num_gpus}",
        )
    _check_model_split(scenario.model, layout)
    _check_batch(scenario, layout)


def _check_model_split(model: ModelConfig, layout: ParallelismConfig) -> None:
    heads, kv, tp = model.num_attention_heads, model.num_kv_heads, layout.tp
    if not rules.tp_divides_heads(heads, tp):
        _fail("parallelism.tp", f"must divide model.num_attention_heads = {heads}, got {tp}")
    if not rules.tp_fits_kv_heads(kv, tp):
        _fail(
            "parallelism.tp",
            f"must divide model.num_kv_heads = {kv} or be a multiple of it, got {tp}",
        )
    if not rules.pipeline_fits_layers(model.num_layers, layout.pp, layout.virtual_stages):
        stages, extra = layout.pp * layout.virtual_stages, rules.EXTRA_PIPELINE_SLOTS
        _fail(
            "parallelism.pp",
            f"pp * virtual_stages = {stages} exceeds model.num_layers + {extra} = "
            f"{model.num_layers + extra} (embedding and loss slots), or pp exceeds the layers",
        )
    if not rules.interleaving_has_pipeline(layout.pp, layout.virtual_stages):
        _fail("parallelism.pipeline_schedule", "'interleaved' with virtual_stages > 1 needs pp > 1")
    if not rules.cp_divides_sequence(model.seq_len, layout.cp):
        _fail("parallelism.cp", f"must divide model.seq_len = {model.seq_len}, got {layout.cp}")
    _check_experts(model, layout)


def _check_experts(model: ModelConfig, layout: ParallelismConfig) -> None:
    if layout.ep == 1:
        return
    if model.moe is None:
        _fail("parallelism.ep", f"ep > 1 needs model.moe, got {layout.ep}")
    elif not rules.ep_divides_experts(model.moe.num_experts, layout.ep):
        _fail(
            "parallelism.ep",
            f"must divide model.moe.num_experts = {model.moe.num_experts}, got {layout.ep}",
        )
    if not rules.ep_divides_data(layout.dp, layout.cp, layout.ep):
        _fail("parallelism.ep", f"must divide dp * cp = {layout.dp * layout.cp}, got {layout.ep}")


def _check_batch(scenario: Scenario, layout: ParallelismConfig) -> None:
    batch = scenario.training.global_batch_size
    if not rules.batch_holds_step(batch, layout.dp, layout.micro_batch_size):
        per_step = layout.dp * layout.micro_batch_size
        _fail(
            "parallelism.micro_batch_size",
            f"dp * micro_batch_size = {per_step} exceeds training.global_batch_size = {batch}",
        )
