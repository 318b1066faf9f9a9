"""The scenario form's fields and choices, read from the core's scenario schema: bounds,
defaults and help text defined once (:mod:`estimator.core.schema`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from estimator.core import schema
from estimator.core.errors import ScenarioError
from estimator.core.frameworks import PROFILES

CUSTOM = "custom"


def labelled(path: str, labels: Mapping[str, str]) -> list[tuple[str, str]]:
    """The choices of the scenario key ``path`` (the schema's), in the order of ``labels``
    and labelled by it; a value it does not label yet is shown as itself."""
    values = [str(value) for value in schema.key(path).choices]
    ordered = [value for value in labels if value in values]
    ordered += [value for value in values if value not in labels]
    return [(value, labels.get(value, value)) for value in ordered]


def _within(key: schema.Key) -> Any:
    """A validator refusing what the scenario key ``key`` refuses, with its reason."""

    def validate(value: Any) -> None:
        try:
            key.parse(value)
        except ScenarioError as error:
            raise forms.ValidationError(error.reason) from None

    return validate


def key_field(path: str, *, required: bool = False, **kwargs: Any) -> forms.Field:
    """A form field for the numeric scenario key ``path``: its bounds and help from the schema
    (``help_text`` in ``kwargs`` says what blank means on this form instead).

    Inclusive bounds are the field's ``min_value``/``max_value`` (the browser's too); an
    exclusive one refuses with the estimator's reason.
    """
    key = schema.key(path)
    bounds: dict[str, Any] = {}
    if key.minimum is not None and not key.exclusive_minimum:
        bounds["min_value"] = key.minimum
    if key.maximum is not None and not key.exclusive_maximum:
        bounds["max_value"] = key.maximum
    exclusive = key.exclusive_minimum or key.exclusive_maximum
    kwargs.setdefault("help_text", key.help_text)
    kwargs.setdefault("validators", [_within(key)] if exclusive else [])
    kind = forms.IntegerField if key.kind == "integer" else forms.FloatField
    return kind(required=required, **bounds, **kwargs)


PRECISIONS = labelled(
    "training.precision",
    {
        "bf16": "BF16",
        "fp16": "FP16",
        "fp8": "FP8",
        "tf32": "TF32 (FP32 storage, tensor-core matmuls)",
        "fp32": "FP32 (true FP32, no tensor cores)",
    },
)
RECOMPUTE = labelled(
    "parallelism.recompute", {"none": "None", "selective": "Selective", "full": "Full"}
)
ZERO_STAGES = labelled(
    "parallelism.zero_stage",
    {
        "0": "0 (none)",
        "1": "1 (optimizer states)",
        "2": "2 (+ gradients)",
        "3": "3 (+ weights, FSDP)",
    },
)
#: What the form fills in for an explicit layout's required ``zero_stage`` and ``recompute``
#: when left blank (and shows first).
ZERO_STAGE_INITIAL = 1
RECOMPUTE_INITIAL = "selective"
MODEL_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "ffn_hidden_size",
    "vocab_size",
)
LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "micro_batch_size")


FRAMEWORKS = labelled(
    "framework",
    {
        "auto": "Auto (the usual framework; speed of the median calibrated stack)",
        **{profile.id: profile.name for profile in PROFILES.values()},
    },
)


MEASURED_KINDS = [
    ("", "Not measured"),
    ("step_time_s", "Step time (s)"),
    ("tokens_per_s", "Tokens/s, whole cluster"),
    ("mfu", "MFU (0-1)"),
    ("factor", "Ratio to the model's step time"),
]
