"""Model presets and fine-tuning recipes, read from ``estimator/data``.

Each preset's ``model`` is a ``model`` section in the scenario format (version 1), so a
preset drops straight into a scenario; :func:`preset_scenario` builds a whole one. Every
preset names its source, and its ``notes`` say what the scenario format cannot express
exactly (for example DeepSeek-V3's multi-head latent attention) and how it is approximated.

A recipe (:class:`Recipe`) pairs a preset with a fine-tuning ``training`` section, a cluster
and a framework, e.g. Llama 3 8B with LoRA r=16 on 8 H100; :func:`recipe_scenario` builds its
whole scenario. Recipes name their sources too (the QLoRA paper's scripts, torchtune's
configs) and say in ``notes`` which of their figures are assumptions.
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
RECIPES_PATH = PRESETS_PATH.with_name("recipe_presets.json")


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
def _read(path: str, key: str = "presets") -> tuple[dict[str, Any], ...]:
    with open(path, encoding="utf-8") as handle:
        return tuple(json.load(handle)[key])


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

    Parameters
    ----------
    preset_id : str
        A key of :func:`load_presets`, e.g. ``llama3-8b``.

    Returns
    -------
    ModelPreset

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


# --- Fine-tuning recipes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """A fine-tuning plan to start from: a model preset with training, cluster and framework.

    Attributes
    ----------
    id : str
        Stable identifier, e.g. ``llama3-8b-lora-r16-8xh100``.
    name : str
        Display name, e.g. ``Llama 3 8B - LoRA r16 (attention+MLP), 1B tokens, 8x H100``.
    model_preset : str
        Id of the :class:`ModelPreset` whose ``model`` section the recipe trains.
    model : dict
        What the recipe changes in the preset's ``model`` section (e.g. ``seq_len``).
    training : dict
        The ``training`` section, ``method``, ``optimizer`` and ``offload`` included.
    cluster : dict
        The ``cluster`` section: ``accelerator`` (catalog id) and ``num_gpus`` [devices].
    parallelism : str or dict
        The ``parallelism`` section; ``"auto"`` lets the layout search choose.
    framework : str
        The top-level ``framework`` (a profile id, or ``"auto"``).
    source : str
        Where the settings come from, with URLs.
    notes : str
        Which figures are assumptions rather than published settings, in words.
    """

    id: str
    name: str
    model_preset: str
    model: dict[str, Any]
    training: dict[str, Any]
    cluster: dict[str, Any]
    parallelism: str | dict[str, Any]
    framework: str
    source: str
    notes: str


def _recipe_from_entry(entry: Mapping[str, Any], presets: Mapping[str, ModelPreset]) -> Recipe:
    if entry["model_preset"] not in presets:
        raise ValueError(f"recipe {entry['id']!r}: unknown model preset {entry['model_preset']!r}")
    return Recipe(
        id=entry["id"],
        name=entry["name"],
        model_preset=entry["model_preset"],
        model=copy.deepcopy(entry.get("model") or {}),
        training=copy.deepcopy(entry["training"]),
        cluster=copy.deepcopy(entry["cluster"]),
        parallelism=copy.deepcopy(entry.get("parallelism", "auto")),
        framework=entry.get("framework", "auto"),
        source=entry["source"],
        notes=entry["notes"],
    )


def load_recipes(path: str | Path | None = None) -> dict[str, Recipe]:
    """Read the fine-tuning recipes (the file is parsed once and cached).

    Parameters
    ----------
    path : str or Path, optional
        JSON file; default ``estimator/data/recipe_presets.json``.

    Returns
    -------
    dict of str to Recipe
        Keyed by recipe id, in file order. Each call returns fresh objects.

    Raises
    ------
    ValueError
        Two recipes share an id, or a recipe names a model preset that does not exist.
    """
    presets = load_presets()
    recipes: dict[str, Recipe] = {}
    for entry in _read(str(path or RECIPES_PATH), "recipes"):
        recipe = _recipe_from_entry(entry, presets)
        if recipe.id in recipes:
            raise ValueError(f"duplicate recipe id {recipe.id!r}")
        recipes[recipe.id] = recipe
    return recipes


def recipe_scenario(recipe: Recipe | str) -> dict[str, Any]:
    """The whole scenario dict (format version 1) of a recipe.

    Parameters
    ----------
    recipe : Recipe or str
        A recipe, or a key of :func:`load_recipes`.

    Returns
    -------
    dict
        The preset's model with the recipe's changes, and the recipe's other sections; the
        ``framework`` key is left out when it is ``"auto"``. Not yet validated:
        :func:`estimator.core.validate_scenario` checks it.

    Raises
    ------
    ScenarioError
        Unknown recipe id; the key is ``recipe`` and the reason lists the known ids.
    """
    if isinstance(recipe, str):
        recipes = load_recipes()
        if recipe not in recipes:
            known = ", ".join(recipes)
            raise ScenarioError("recipe", f"unknown recipe {recipe!r}, known: {known}")
        recipe = recipes[recipe]
    scenario: dict[str, Any] = {
        "format_version": 1,
        "model": {**get_preset(recipe.model_preset).model, **copy.deepcopy(recipe.model)},
        "training": copy.deepcopy(recipe.training),
        "cluster": copy.deepcopy(recipe.cluster),
        "parallelism": copy.deepcopy(recipe.parallelism),
    }
    if recipe.framework != "auto":
        scenario["framework"] = recipe.framework
    return scenario
