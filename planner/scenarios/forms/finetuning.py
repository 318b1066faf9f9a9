"""The scenario form's fine-tuning fields: training method, LoRA rank and targets, frozen
layers, optimizer and CPU offload, to and from the contract's ``training`` keys.

Keys at the contract's defaults are left out of the scenario, as the contract leaves them
out: full training of every weight, LoRA rank 16 on attention and MLP, AdamW, no offload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from estimator.core import schema

TRAINING_METHODS = (
    ("full", "Full (every weight)"),
    ("lora", "LoRA (adapters, 16-bit base)"),
    ("qlora", "QLoRA (adapters, 4-bit base)"),
)
ADAPTER_METHODS = ("lora", "qlora")
#: The contract's LoRA rank when ``training.method.rank`` is left out.
DEFAULT_LORA_RANK: int = schema.default("training.method.rank")
#: The contract's method, optimizer and offload when ``training`` leaves them out.
DEFAULT_METHOD: str = schema.default("training.method.type")
DEFAULT_OPTIMIZER: str = schema.default("training.optimizer")
DEFAULT_OFFLOAD: str = schema.default("training.offload")
#: Form value -> ``training.method.targets``; "both" is the contract's default.
LORA_TARGET_LISTS = {
    "both": list(schema.default("training.method.targets")),
    "attention": ["attention"],
    "mlp": ["mlp"],
}
LORA_TARGETS = (
    ("both", "Attention and MLP (every linear layer)"),
    ("attention", "Attention (Q, K, V, O)"),
    ("mlp", "MLP"),
)
#: The targets choice of a scenario whose JSON lists other targets (e.g. ``q_proj``).
KEEP_TARGETS = "as-json"
#: The ``training`` keys these fields write; the form rebuilds them on every save.
TRAINING_OPTION_KEYS = ("method", "optimizer", "offload")


def base_method(training: Mapping[str, Any]) -> dict[str, Any]:
    """``training.method`` of a scenario being edited (empty when it has none)."""
    method = training.get("method")
    return dict(method) if isinstance(method, Mapping) else {}


def targets_choice(targets: Any) -> str:
    """The LoRA targets field's value for ``training.method.targets`` (absent: both)."""
    if targets is None:
        return "both"
    for choice, listed in LORA_TARGET_LISTS.items():
        if isinstance(targets, list) and sorted(targets) == sorted(listed):
            return choice
    return KEEP_TARGETS


def lora_target_choices(training: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The LoRA targets field's choices, plus the JSON's own list where it is another one."""
    targets = base_method(training).get("targets")
    if targets_choice(targets) != KEEP_TARGETS:
        return list(LORA_TARGETS)
    listed = ", ".join(map(str, targets)) if isinstance(targets, list) else str(targets)
    return [*LORA_TARGETS, (KEEP_TARGETS, f"{listed} (as in the JSON)")]


def training_options_initial(training: Mapping[str, Any]) -> dict[str, Any]:
    """The fields' values for a ``training`` section."""
    method = base_method(training)
    return {
        "training_method": method.get("type", DEFAULT_METHOD),
        "lora_rank": method.get("rank", DEFAULT_LORA_RANK),
        "lora_targets": targets_choice(method.get("targets")),
        "frozen_layers": method.get(
            "frozen_layers", schema.default("training.method.frozen_layers")
        ),
        "frozen_embeddings": bool(method.get("frozen_embeddings")),
        "optimizer": training.get("optimizer", DEFAULT_OPTIMIZER),
        "offload": training.get("offload", DEFAULT_OFFLOAD),
    }


def training_options_spec(
    data: Mapping[str, Any], base_training: Mapping[str, Any]
) -> dict[str, Any]:
    """``method``, ``optimizer`` and ``offload`` of ``training`` from the cleaned fields,
    each left out at its default; ``base_training`` is the scenario being edited's."""
    return {
        **_method_spec(data, base_method(base_training)),
        **_unless_default(data, "optimizer", DEFAULT_OPTIMIZER),
        **_unless_default(data, "offload", DEFAULT_OFFLOAD),
    }


def _unless_default(data: Mapping[str, Any], name: str, default: str) -> dict[str, Any]:
    value = data.get(name) or default
    return {} if value == default else {name: value}


def _method_spec(data: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``training.method``, or nothing for full training of every weight.

    Fields of the other kind of method (rank for full training, frozen layers for LoRA) are
    ignored: the page hides them, and a page without scripts shows them all.
    """
    kind = data.get("training_method") or DEFAULT_METHOD
    if kind not in ADAPTER_METHODS:
        method: dict[str, Any] = {"type": "full"}
        if data.get("frozen_layers"):
            method["frozen_layers"] = data["frozen_layers"]
        if data.get("frozen_embeddings"):
            method["frozen_embeddings"] = True
        return {} if len(method) == 1 else {"method": method}
    method = {"type": kind}
    rank = data.get("lora_rank") or DEFAULT_LORA_RANK
    if rank != DEFAULT_LORA_RANK:
        method["rank"] = rank
    chosen = data.get("lora_targets") or "both"
    targets = base.get("targets") if chosen == KEEP_TARGETS else LORA_TARGET_LISTS[chosen]
    if targets != LORA_TARGET_LISTS["both"]:
        method["targets"] = targets
    if base.get("type") in ADAPTER_METHODS and "dropout" in base:
        method["dropout"] = base["dropout"]  # not on the form: kept as the JSON has it
    return {"method": method}
