"""Model presets: published shapes of common open models, read from ``estimator/data``.

Each preset's ``model`` is a ``model`` section in the scenario format (version 1), so a
preset drops straight into a scenario; :func:`preset_scenario` builds a whole one. Every
preset names its source, and its ``notes`` say what the scenario format cannot express
exactly (for example DeepSeek-V3's multi-head latent attention) and how it is approximated.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator.core.errors import ScenarioError

PRESETS_PATH = Path(__file__).resolve().parent.parent / "data" / "model_presets.json"


@dataclass(frozen=True)
class ModelPreset:
    """One published model, ready to plan a training run for.

    Attributes
    ----------
    id : str
        Stable identifier, e.g. ``llama3-8b``.
    name : str
        Display name, e.g. ``Llama 3 8B``.
    published_parameters : int
        Total parameter count as its authors publish it. [parameters]
    model : dict
        The ``model`` section of a scenario (format version 1).
    training : dict
        Suggested ``training`` section: ``tokens`` as published, ``global_batch_size``
        [sequences] and ``precision``; ``notes`` say where a figure is not published.
    source : str
        Paper, model card and config.json the figures come from, with URLs.
    notes : str
        Approximations and assumptions, in words.
    published_active_parameters : int or None
        Parameters per token as published, for mixture-of-experts models. [parameters]
    """

    id: str
    name: str
    published_parameters: int
    model: dict[str, Any]
    training: dict[str, Any]
    source: str
    notes: str
    published_active_parameters: int | None = None


@functools.cache
def _read(path: str) -> tuple[dict[str, Any], ...]:
    with open(path, encoding="utf-8") as handle:
        return tuple(json.load(handle)["presets"])


def _preset_from_entry(entry: Mapping[str, Any]) -> ModelPreset:
    # Deep copies keep the cached file contents safe from callers that edit a preset's dicts.
    active = entry.get("published_active_parameters")
    return ModelPreset(
        id=entry["id"],
        name=entry["name"],
        published_parameters=int(entry["published_parameters"]),
        model=copy.deepcopy(entry["model"]),
        training=copy.deepcopy(entry["training"]),
        source=entry["source"],
        notes=entry["notes"],
        published_active_parameters=None if active is None else int(active),
    )


def load_presets(path: str | Path | None = None) -> dict[str, ModelPreset]:
    """Read the model presets (the file is parsed once and cached).

    Parameters
    ----------
    path : str or Path, optional
        JSON file; default ``estimator/data/model_presets.json``.

    Returns
    -------
    dict of str to ModelPreset
        Keyed by preset id, in file order. Each call returns fresh objects.

    Raises
    ------
    ValueError
        Two presets share an id.
    """
    presets: dict[str, ModelPreset] = {}
    for entry in _read(str(path or PRESETS_PATH)):
        preset = _preset_from_entry(entry)
        if preset.id in presets:
            raise ValueError(f"duplicate model preset id {preset.id!r}")
        presets[preset.id] = preset
    return presets


def get_preset(preset_id: str) -> ModelPreset:
    """The preset with id ``preset_id``.

    Raises
    ------
    ScenarioError
        Unknown id; the key is ``model.preset`` and the reason lists the known ids.
    """
    presets = load_presets()
    if preset_id not in presets:
        known = ", ".join(presets)
        raise ScenarioError("model.preset", f"unknown preset {preset_id!r}, known: {known}")
    return presets[preset_id]


def preset_scenario(
    preset_id: str,
    *,
    accelerator: str,
    num_gpus: int,
    parallelism: str | Mapping[str, Any] = "auto",
    tokens: float | None = None,
) -> dict[str, Any]:
    """A whole scenario dict (format version 1) for training a preset.

    Parameters
    ----------
    preset_id : str
        A key of :func:`load_presets`.
    accelerator : str
        Catalog id, e.g. ``H100-SXM``.
    num_gpus : int
        Cluster size. [devices]
    parallelism : "auto" or mapping
        The ``parallelism`` section; ``"auto"`` lets the layout search choose.
    tokens : float, optional
        Tokens to train on; default the preset's published figure. [tokens]

    Returns
    -------
    dict
        Not yet validated: :func:`estimator.core.estimate` and
        :func:`estimator.core.validate_scenario` check it.
    """
    preset = get_preset(preset_id)
    training = dict(preset.training)
    if tokens is not None:
        training["tokens"] = tokens
    layout = parallelism if isinstance(parallelism, str) else copy.deepcopy(dict(parallelism))
    return {
        "format_version": 1,
        "model": preset.model,
        "training": training,
        "cluster": {"accelerator": accelerator, "num_gpus": num_gpus},
        "parallelism": layout,
    }
