"""Pipeline stages: how many layers each stage holds, and which stages memory is checked on.

Every function takes the pipeline size as a numpy array (or scalar), so the same code
serves ``estimate`` (one layout) and a layout search.
"""

from __future__ import annotations

import numpy as np

from estimator.core._types import FloatArray, Numeric

#: Pipeline stages whose memory is checked: the first (most micro-batches in flight, the
#: embedding), the second (one micro-batch fewer in flight, a full share of layers) and the
#: last (the LM head and its logits).
STAGES = ("first", "second", "last")


def layers_per_stage(num_layers: int, pp: Numeric) -> FloatArray:
    """Layers on the most loaded pipeline stage, k = ceil(l / pp).

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    ndarray
        [layers]
    """
    return np.ceil(num_layers / np.asarray(pp, dtype=np.float64))


def pipeline_split(num_layers: int, pp: Numeric) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Layers on the first, a middle and the last stage of an uneven pipeline split.

    Every stage holds k = ceil(l / p) layers but the two ends: the d = p k - l layers
    missing come off the first stage (ceil(d / 2), it also holds the embedding and the most
    micro-batches in flight) and the last (floor(d / 2), it also holds the LM head and the
    loss), never below one layer each. This is Megatron-LM's
    ``--decoder-first-pipeline-num-layers``/``--decoder-last-pipeline-num-layers`` and its
    ``--account-for-embedding-in-pipeline-split``/``--account-for-loss-in-pipeline-split``
    (d = 2: Llama 3 405B's 126 layers on 16 stages, 7 + 14 x 8 + 7). With p = 1 all three
    are the l layers.

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    tuple of ndarray
        (first, middle, last) stage layers. [layers]
    """
    k = layers_per_stage(num_layers, pp)
    missing = np.asarray(pp, dtype=np.float64) * k - num_layers
    first = np.maximum(k - np.ceil(missing / 2.0), 1.0)
    last = np.maximum(k - np.floor(missing / 2.0), 1.0)
    return first, k, last


def stage_index(stage: str, pp: Numeric) -> FloatArray:
    """Rank of ``stage`` in the pipeline.

    Parameters
    ----------
    stage : {'first', 'second', 'last'}
        One of :data:`STAGES`.
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    ndarray
        0, 1 (the last one when p = 2, 0 when p = 1) or p - 1. [1]
    """
    pp = np.asarray(pp, dtype=np.float64)
    if stage == "first":
        return np.zeros_like(pp)
    return np.minimum(1.0, pp - 1.0) if stage == "second" else pp - 1.0


def stage_layers(num_layers: int, pp: Numeric, stage: str) -> FloatArray:
    """Layers held by ``stage`` (see :func:`pipeline_split`).

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]
    stage : {'first', 'second', 'last'}
        One of :data:`STAGES`; the second stage is the last one when p = 2.

    Returns
    -------
    ndarray
        [layers]
    """
    first, middle, last = pipeline_split(num_layers, pp)
    pp = np.asarray(pp, dtype=np.float64)
    if stage == "first":
        return first
    if stage == "second":
        return np.where(pp == 2, last, np.where(pp == 1, first, middle))
    return last
