"""Cross-field checks of a typed scenario: its explicit layout against the model and the
cluster, and what the framework profile runs.

Each layout check is a predicate of :mod:`estimator.core.layout_rules`, the rules the layout
search applies to its whole grid; :mod:`estimator.core.validation` calls these once every key
has passed its own schema check.
"""

from __future__ import annotations

from estimator.core import layout_rules as rules
from estimator.core.errors import ScenarioError
from estimator.core.frameworks import FrameworkProfile
from estimator.core.scenario import ModelConfig, ParallelismConfig, Scenario


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


def check_training_support(scenario: Scenario, profile: FrameworkProfile) -> None:
    """The training options (precision, offload, method, optimizer) ``profile`` must run.

    Raises
    ------
    ScenarioError
        The first option the framework does not run, naming its ``training`` key.
    """
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
