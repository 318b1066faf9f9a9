"""Values at and just beyond each bound of the scenario schema, and scenarios that hold them.

Shared by the core's schema tests and the planner's (form and API): every reader of the
schema must accept and refuse the same values as the validator, key by key.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

from estimator.core import ScenarioError, schema, validate_scenario

from .scenarios import SMALL

#: How the schema's own bounds are refused: a refusal on the key with another reason is a
#: cross-field rule (``model.hidden_size`` divisible by the heads, ``parallelism.tp``...).
BOUND_REASONS = (
    "must be a positive integer",
    "must be an integer >= ",
    "must be at most ",
    "must be a number in ",
    "must be 0, 1, 2 or 3",
)

#: Objects a key's section needs before the key means anything.
_SECTIONS: dict[str, dict[str, Any]] = {
    "model.moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 512},
    "model.mla": {"kv_lora_rank": 64, "qk_nope_head_dim": 64, "v_head_dim": 64},
}


def _below(key: schema.Key, bound: float) -> float:
    return bound - 1 if key.kind == "integer" else math.nextafter(bound, -math.inf)


def _above(key: schema.Key, bound: float) -> float:
    return bound + 1 if key.kind == "integer" else math.nextafter(bound, math.inf)


def probes(key: schema.Key) -> Iterator[float]:
    """Each bound of ``key`` and the values just inside and just outside it.

    A maximum that another key tightens (``maximum_text``) is left out: the validator
    refuses below it for a reason only the whole scenario gives.
    """
    if key.minimum is not None:
        yield from (_below(key, key.minimum), key.minimum, _above(key, key.minimum))
    if key.maximum is not None and not key.maximum_text:
        yield from (_below(key, key.maximum), key.maximum, _above(key, key.maximum))


def probe_cases() -> Iterator[tuple[str, float]]:
    """``(path, value)`` for every bounded key of the schema and each of its probes."""
    for key in schema.bounded_keys():
        for value in probes(key):
            yield key.path, int(value) if key.kind == "integer" else float(value)


def expected_refusal(path: str, value: float) -> str | None:
    """The reason the schema refuses ``value`` at ``path`` with, or None if it accepts it."""
    try:
        schema.key(path).parse(value)
    except ScenarioError as error:
        return error.reason
    return None


def spec_with(path: str, value: Any) -> dict[str, Any]:
    """A valid small scenario with ``value`` at the dotted ``path`` (and the objects the key
    needs: a MoE or MLA block, LoRA for adapter keys, full training for frozen layers)."""
    spec = copy.deepcopy(SMALL)
    if path.startswith("training.method."):
        adapter = path.rpartition(".")[2] in ("rank", "targets", "dropout")
        spec["training"]["method"] = {"type": "lora" if adapter else "full"}
    for section, content in _SECTIONS.items():
        if path.startswith(section + "."):
            parent, _, name = section.rpartition(".")
            spec[parent][name] = copy.deepcopy(content)
    *parents, name = path.split(".")
    target = spec
    for part in parents:
        target = target.setdefault(part, {})
    target[name] = value
    return spec


def refusal_on(error: ScenarioError | None, path: str) -> str | None:
    """The reason of ``error`` when it is about ``path``'s own bounds, else None."""
    if error is None or error.key != path or not error.reason.startswith(BOUND_REASONS):
        return None
    return error.reason


def validator_refusal(path: str, value: float) -> str | None:
    """Why :func:`validate_scenario` refuses ``value`` at ``path`` by the key's own bounds."""
    try:
        validate_scenario(spec_with(path, value))
    except ScenarioError as error:
        return refusal_on(error, path)
    return None
