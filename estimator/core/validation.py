"""Turn a scenario dict (format version 1) into a :class:`Scenario`, or raise ScenarioError.

Every message names the offending key with its dotted path and says why, for example
``model.num_layers: must be a positive integer, got -3``. Each key's kind, default, bounds
and allowed values are its :mod:`estimator.core.schema` entry's; the cross-field checks of a
layout and a framework are :mod:`estimator.core.scenario_checks`'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from estimator.core import schema
from estimator.core.catalog import AcceleratorSpec, catalog_spec, custom_spec, spec_with_overrides
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
    LORA_TARGETS,
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
from estimator.core.scenario_checks import check_framework as check_framework
from estimator.core.scenario_checks import check_layout as check_layout
from estimator.core.scenario_checks import check_training_support
from estimator.core.schema import show
from estimator.core.workload import TPU_FAMILY

_MISSING: Any = object()


class _Section:
    """Typed getters over one JSON object; each value is checked by the schema's key
    ``prefix.name``, whose default an absent (or null) value takes."""

    def __init__(self, data: Any, prefix: str) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(prefix, f"must be an object, got {show(data)}")
        allowed = schema.names(prefix)
        for key in data:
            if key not in allowed:
                raise ScenarioError(f"{prefix}.{key}", f"unknown key, expected one of {allowed}")
        self.data, self.prefix = data, prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def schema_key(self, name: str) -> schema.Key:
        return schema.key(self.key(name))

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        """The value given, else ``default``, else the schema's default (if it has one)."""
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is not _MISSING:
            return default
        if self.schema_key(name).required:
            raise ScenarioError(self.key(name), "is required")
        return schema.default(self.key(name))

    def integer(self, name: str, default: Any = _MISSING, maximum: int | None = None) -> int:
        return self.schema_key(name).integer(self.raw(name, default), maximum)

    def number(self, name: str) -> float:
        return self.schema_key(name).number(self.raw(name))

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        return self.schema_key(name).boolean(self.raw(name, default))

    def choice(self, name: str) -> str:
        return self.schema_key(name).choice(self.raw(name))

    def text(self, name: str) -> str:
        return self.schema_key(name).text(self.raw(name))

    def given(self, name: str) -> bool:
        """Whether the key is present and not null."""
        return self.data.get(name) is not None


def _moe(data: Any, num_layers: int) -> MoEConfig | None:
    if data is None:
        return None
    section = _Section(data, "model.moe")
    moe = MoEConfig(
        num_experts=section.integer("num_experts"),
        top_k=section.integer("top_k"),
        expert_ffn_hidden_size=section.integer("expert_ffn_hidden_size"),
        num_shared_experts=section.integer("num_shared_experts"),
        moe_layer_every=section.integer("moe_layer_every"),
        first_dense_layers=section.integer("first_dense_layers"),
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
    section = _Section(data, "model.mla")
    return MLAConfig(
        kv_lora_rank=section.integer("kv_lora_rank"),
        qk_nope_head_dim=section.integer("qk_nope_head_dim"),
        qk_rope_head_dim=section.integer("qk_rope_head_dim"),
        v_head_dim=section.integer("v_head_dim"),
        q_lora_rank=section.integer("q_lora_rank"),
    )


def _model(data: Any) -> ModelConfig:
    section = _Section(data, "model")
    hidden, heads = section.integer("hidden_size"), section.integer("num_attention_heads")
    layers = section.integer("num_layers")
    model = ModelConfig(
        name=section.text("name"),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=section.integer("num_kv_heads", heads),
        ffn_hidden_size=section.integer("ffn_hidden_size", 4 * hidden),
        gated_mlp=section.boolean("gated_mlp"),
        vocab_size=section.integer("vocab_size"),
        seq_len=section.integer("seq_len"),
        tied_embeddings=section.boolean("tied_embeddings"),
        moe=_moe(section.raw("moe", None), layers),
        head_dim=section.integer("head_dim") if section.given("head_dim") else 0,
        mla=_mla(section.raw("mla", None)),
    )
    explicit_head_dim = section.given("head_dim")
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
    section = _Section(data, "training")
    training = TrainingConfig(
        tokens=section.number("tokens"),
        global_batch_size=section.integer("global_batch_size"),
        precision=section.choice("precision"),
        fp8_recipe=section.choice("fp8_recipe"),
        offload=section.choice("offload"),
        method=_method(section.raw("method"), model),
        optimizer=section.choice("optimizer"),
        master_weights=section.boolean("master_weights"),
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


def _method(data: Any, model: ModelConfig) -> MethodConfig:
    """``training.method``: full training (optionally with frozen parts), LoRA or QLoRA."""
    section = _Section(data, "training.method")
    kind = section.choice("type")
    if kind == "full":
        for key in ("rank", "targets", "dropout"):
            if key in section.data:
                raise ScenarioError(section.key(key), "applies to 'lora' and 'qlora' only")
        return MethodConfig(
            type="full",
            frozen_layers=section.integer("frozen_layers", maximum=model.num_layers),
            frozen_embeddings=section.boolean("frozen_embeddings"),
        )
    for key in ("frozen_layers", "frozen_embeddings"):
        if key in section.data:
            raise ScenarioError(
                section.key(key),
                f"applies to full training; {kind} already freezes every base weight",
            )
    targets = section.raw("targets", list(section.schema_key("targets").default))
    if (
        not isinstance(targets, list)
        or not targets
        or any(t not in LORA_TARGETS for t in targets)
        or len(set(targets)) != len(targets)
    ):
        raise ScenarioError(
            section.key("targets"),
            f"must be a non-empty list of distinct values from {LORA_TARGETS}, got {show(targets)}",
        )
    rank = section.integer("rank")
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
        dropout=section.number("dropout"),
    )


def _accelerator(section: _Section) -> AcceleratorSpec:
    accelerator = section.text("accelerator")
    overrides = section.raw("accelerator_spec", {})
    if not isinstance(overrides, Mapping):
        raise ScenarioError("cluster.accelerator_spec", f"must be an object, got {show(overrides)}")
    listed = catalog_spec(accelerator)
    if listed is not None:
        return spec_with_overrides(listed, overrides)
    if overrides:
        return custom_spec(accelerator, overrides)
    raise ScenarioError(
        "cluster.accelerator",
        f"unknown accelerator {accelerator!r}; see `python -m estimator catalog`",
    )


def _cluster(data: Any) -> ClusterConfig:
    section = _Section(data, "cluster")
    spec = _accelerator(section)
    if section.given("power_limit_w"):  # absent or null: the TDP, no limit
        spec = spec_at_power_limit(spec, section.raw("power_limit_w"))
    cluster = ClusterConfig(
        accelerator=spec.id,
        num_gpus=section.integer("num_gpus"),
        gpus_per_node=section.integer("gpus_per_node", spec.devices_per_node),
        spec=spec,
        num_slices=section.integer("num_slices"),
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
        raise ScenarioError("parallelism", f'must be an object or "auto", got {show(data)}')
    section = _Section(data, "parallelism")
    tp = section.integer("tp")
    schedule = section.choice("pipeline_schedule")
    layout = ParallelismConfig(
        tp=tp,
        pp=section.integer("pp"),
        dp=section.integer("dp"),
        cp=section.integer("cp"),
        ep=section.integer("ep"),
        micro_batch_size=section.integer("micro_batch_size"),
        zero_stage=section.integer("zero_stage"),
        recompute=section.choice("recompute"),
        sequence_parallel=section.boolean("sequence_parallel", tp > 1),
        pipeline_schedule=schedule,
        virtual_stages=section.integer("virtual_stages"),
        activation_offload=section.boolean("activation_offload"),
    )
    if layout.virtual_stages > 1 and schedule != "interleaved":
        raise ScenarioError(
            "parallelism.virtual_stages", "more than 1 needs pipeline_schedule 'interleaved'"
        )
    return layout


def _margins(data: Any) -> Margins:
    section = _Section(data, "margins")
    return Margins(
        framework_overhead=section.number("framework_overhead"),
        network_jitter=section.number("network_jitter"),
    )


def _run(data: Any) -> RunSettings:
    section = _Section(data, "run")
    # Absent: None, the whole-run model's own figure (:mod:`estimator.core.wholerun`).
    return RunSettings(
        capacity=section.choice("capacity"),
        evaluation_fraction=(
            section.number("evaluation_fraction") if section.given("evaluation_fraction") else None
        ),
        allocation_idle=(
            section.number("allocation_idle") if section.given("allocation_idle") else None
        ),
    )


def _framework(data: Any, family: str) -> str:
    if data is None:
        return "auto"
    if not isinstance(data, str):
        raise ScenarioError("framework", f"must be a string, got {show(data)}")
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
    section = _Section(data["cost"], "cost")
    if not section.given("price_per_gpu_hour"):
        return None
    return section.number("price_per_gpu_hour")


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
        raise ScenarioError("scenario", f"must be a JSON object, got {show(data)}")
    version = data.get("format_version", _MISSING)
    if version is _MISSING:
        raise ScenarioError("format_version", "is required (1)")
    if version != 1 or isinstance(version, bool):
        raise ScenarioError("format_version", f"must be 1, got {show(version)}")
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
        if scenario.parallelism is not None:
            break  # fallbacks are kept for the search alone: the first that runs decides
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
    check_training_support(scenario, profile)
    if scenario.parallelism is not None:
        check_framework(scenario, scenario.parallelism, profile)
