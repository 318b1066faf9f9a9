"""Which parallel layouts are valid: one predicate per rule, on integers or numpy arrays.

Every rule about how a model and a batch split over tensor (tp), pipeline (pp), data (dp),
context (cp) and expert (ep) parallelism lives here once. Each predicate is plain integer
arithmetic and comparisons joined with ``&`` and ``|``, so it takes Python integers (and
returns a bool) or integer arrays of candidate layouts (and returns a boolean array):

* :mod:`estimator.core.validation` raises a ScenarioError naming the key when an explicit
  layout breaks a rule of the first kind below;
* :mod:`estimator.core.search` evaluates the same predicates on whole columns of the layout
  grid, and keeps only layouts that satisfy both kinds;
* :mod:`estimator.core.estimate` warns when an explicit layout breaks a rule of the second
  kind, which the validator lets through.

**Valid** (the validator refuses a layout that breaks one): tp x pp x dp x cp is the device
count; tp divides the attention heads and divides, or is a multiple of, the KV heads; the
pipeline has at least one layer per stage and per model chunk; interleaving needs pp > 1;
cp divides the sequence; ep divides the experts and dp x cp; dp x b does not exceed the
global batch.

**Runs as Megatron-LM runs it** (the search keeps only layouts that satisfy these too;
the estimate of an explicit layout that breaks one warns): dp x b divides the global
batch; the first and last stages absorb the layers an uneven split lacks; interleaving
splits each stage into equal chunks and the micro-batches into groups of pp; context
parallelism splits the sequence into 2 cp load-balanced chunks of at least
:data:`MIN_TOKENS_PER_CP_RANK` tokens; tp stays within a node.

References
----------
.. [1] Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models
   Using Model Parallelism", arXiv:1909.08053, section 3 (attention heads split over tp).
.. [2] Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from
   Multi-Head Checkpoints", EMNLP (KV heads shared by groups of query heads).
.. [3] Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
   Clusters Using Megatron-LM", SC21, section 2.2.2 (interleaved schedule: model chunks per
   device, micro-batches a multiple of pp).
.. [4] Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
   Models", arXiv:2205.05198 (sequence parallelism within the tp group).
.. [5] Megatron-LM, ``megatron/training/arguments.py``: ``--account-for-embedding-in-
   pipeline-split`` and ``--account-for-loss-in-pipeline-split`` (the embedding and the
   loss take a layer's slot); context parallelism's 2 cp load-balanced sequence chunks
   (``megatron/core/transformer/dot_product_attention`` with ``cp_comm_type``).
"""

from __future__ import annotations

from typing import Union

import numpy as np
import numpy.typing as npt

from estimator.core.frameworks import FrameworkProfile

#: An integer, or an array of integers (one per candidate layout).
IntLike = Union[int, np.integer, npt.NDArray[np.int64]]  # noqa: UP007 (runtime alias)
#: A bool (for integer arguments) or a boolean array (for array arguments).
BoolLike = Union[bool, np.bool_, npt.NDArray[np.bool_]]  # noqa: UP007 (runtime alias)

#: Layer slots beyond the layers that a pipeline may fill: the embedding and the loss may
#: each take a chunk's place (Megatron-LM's --account-for-embedding/loss-in-pipeline-split).
EXTRA_PIPELINE_SLOTS = 2
#: Fewest tokens per rank along the sequence for context parallelism.
MIN_TOKENS_PER_CP_RANK = 2048
#: The framework profile flag (:class:`~estimator.core.frameworks.FrameworkProfile`) that
#: allows each parallel axis beyond 1.
PROFILE_AXIS_FLAGS = {
    "tp": "tensor_parallel",
    "pp": "pipeline_parallel",
    "cp": "context_parallel",
    "ep": "expert_parallel",
    "virtual_stages": "interleaved_schedule",
}


def _ceil_div(numerator: IntLike, denominator: IntLike) -> IntLike:
    """ceil(numerator / denominator) in integer arithmetic (exact at any size)."""
    return -(-numerator // denominator)


def data_parallel_size(num_devices: IntLike, tp: IntLike, pp: IntLike, cp: IntLike) -> IntLike:
    """Data-parallel replicas, d = N // (t p c) (exact when :func:`fills_devices`). [1]

    Parameters
    ----------
    num_devices : int or array of int
        Accelerators in the job, N. [1]
    tp, pp, cp : int or array of int
        Tensor-, pipeline- and context-parallel sizes. [1]

    Returns
    -------
    int or array of int
        Data-parallel size, rounded down. [1]
    """
    return num_devices // (tp * pp * cp)


def fills_devices(
    num_devices: IntLike, tp: IntLike, pp: IntLike, dp: IntLike, cp: IntLike
) -> BoolLike:
    """Whether the layout uses every device once: t p d c = N.

    Parameters
    ----------
    num_devices : int or array of int
        Accelerators in the job, N. [1]
    tp, pp, dp, cp : int or array of int
        Tensor-, pipeline-, data- and context-parallel sizes. [1]

    Returns
    -------
    bool or array of bool
    """
    return tp * pp * dp * cp == num_devices


def tp_divides_heads(num_attention_heads: IntLike, tp: IntLike) -> BoolLike:
    """Whether tp splits the attention heads evenly (each rank holds whole heads) [1]_.

    Parameters
    ----------
    num_attention_heads : int or array of int
        Query heads of the model. [1]
    tp : int or array of int
        Tensor-parallel size. [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Shoeybi et al. 2019, "Megatron-LM", arXiv:1909.08053, section 3.
    """
    return num_attention_heads % tp == 0


def tp_fits_kv_heads(num_kv_heads: IntLike, tp: IntLike) -> BoolLike:
    """Whether tp divides the KV heads, or is a multiple of them (each KV head then
    replicated on tp / kv ranks) [1]_.

    Parameters
    ----------
    num_kv_heads : int or array of int
        Key/value heads of the model (grouped-query attention). [1]
    tp : int or array of int
        Tensor-parallel size. [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models
       from Multi-Head Checkpoints", EMNLP.
    """
    return (num_kv_heads % tp == 0) | (tp % num_kv_heads == 0)


def tp_within_node(tp: IntLike, node_size: IntLike) -> BoolLike:
    """Whether the tensor-parallel group stays inside one fast (NVLink-class) domain;
    beyond it its collectives cross the scale-out network.

    Parameters
    ----------
    tp : int or array of int
        Tensor-parallel size. [1]
    node_size : int or array of int
        Devices per node (a whole TPU slice is one domain). [1]

    Returns
    -------
    bool or array of bool
    """
    return tp <= node_size


def pipeline_fits_layers(num_layers: IntLike, pp: IntLike, virtual_stages: IntLike) -> BoolLike:
    """Whether every stage holds a layer and every model chunk a slot: p <= l and
    p v <= l + 2, the embedding and the loss taking the two extra slots [1]_.

    Parameters
    ----------
    num_layers : int or array of int
        Transformer layers, l. [1]
    pp : int or array of int
        Pipeline stages, p. [1]
    virtual_stages : int or array of int
        Model chunks per device, v (1 without interleaving). [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Megatron-LM, ``--account-for-embedding-in-pipeline-split`` and
       ``--account-for-loss-in-pipeline-split``.
    """
    return (pp * virtual_stages <= num_layers + EXTRA_PIPELINE_SLOTS) & (pp <= num_layers)


def pipeline_divides_layers(num_layers: IntLike, pp: IntLike) -> BoolLike:
    """Whether every stage holds the same number of layers (p divides l).

    Parameters
    ----------
    num_layers : int or array of int
        Transformer layers, l. [1]
    pp : int or array of int
        Pipeline stages, p. [1]

    Returns
    -------
    bool or array of bool
    """
    return num_layers % pp == 0


def pipeline_ends_absorb(num_layers: int, pp: IntLike) -> BoolLike:
    """Whether the d = p k - l layers an uneven split lacks (k = ceil(l / p)) come off the
    first and last stages with at least one layer left on each: d <= 2 (k - 1), or p = 1.
    :func:`estimator.core.pipeline.pipeline_split` is then exact.

    Parameters
    ----------
    num_layers : int
        Transformer layers, l. [1]
    pp : int or array of int
        Pipeline stages, p. [1]

    Returns
    -------
    bool or array of bool
    """
    per_stage = _ceil_div(num_layers, pp)
    return (pp * per_stage - num_layers <= 2 * (per_stage - 1)) | (pp == 1)


def interleaving_has_pipeline(pp: IntLike, virtual_stages: IntLike) -> BoolLike:
    """Whether an interleaved schedule (v > 1) has stages to interleave over (p > 1) [1]_.

    Parameters
    ----------
    pp : int or array of int
        Pipeline stages, p. [1]
    virtual_stages : int or array of int
        Model chunks per device, v. [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
       Clusters Using Megatron-LM", SC21, section 2.2.2.
    """
    return (virtual_stages == 1) | (pp > 1)


def interleaved_chunks_even(num_layers: int, pp: IntLike, virtual_stages: IntLike) -> BoolLike:
    """Whether interleaving splits each stage's k = ceil(l / p) layers into v equal chunks,
    with at most the two slots of the embedding and the loss missing at the ends:
    v divides k and p k - l <= 2 (always true for v = 1) [1]_.

    Parameters
    ----------
    num_layers : int
        Transformer layers, l. [1]
    pp : int or array of int
        Pipeline stages, p. [1]
    virtual_stages : int or array of int
        Model chunks per device, v. [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Narayanan et al. 2021, SC21, section 2.2.2; Megatron-LM's
       ``--account-for-embedding/loss-in-pipeline-split``.
    """
    per_stage = _ceil_div(num_layers, pp)
    even = (per_stage % virtual_stages == 0) & (pp * per_stage - num_layers <= EXTRA_PIPELINE_SLOTS)
    return (virtual_stages == 1) | even


def interleaved_micro_batches_divide(
    num_micro_batches: IntLike, pp: IntLike, virtual_stages: IntLike
) -> BoolLike:
    """Whether the interleaved schedule's micro-batches form groups of p, as Megatron-LM
    requires (always true for v = 1) [1]_.

    Parameters
    ----------
    num_micro_batches : int or array of int
        Micro-batches per step per pipeline, m. [1]
    pp : int or array of int
        Pipeline stages, p. [1]
    virtual_stages : int or array of int
        Model chunks per device, v. [1]

    Returns
    -------
    bool or array of bool

    References
    ----------
    .. [1] Narayanan et al. 2021, SC21, section 2.2.2.
    """
    return (virtual_stages == 1) | (num_micro_batches % pp == 0)


def cp_divides_sequence(seq_len: IntLike, cp: IntLike) -> BoolLike:
    """Whether context parallelism splits the sequence evenly (c divides s).

    Parameters
    ----------
    seq_len : int or array of int
        Tokens per sequence, s. [tokens]
    cp : int or array of int
        Context-parallel size, c. [1]

    Returns
    -------
    bool or array of bool
    """
    return seq_len % cp == 0


def cp_balanced(seq_len: IntLike, cp: IntLike) -> BoolLike:
    """Whether ring attention can balance the causal mask: the sequence splits into 2 c
    equal chunks (two per rank) of at least :data:`MIN_TOKENS_PER_CP_RANK` tokens per rank;
    always true for c = 1. Implies :func:`cp_divides_sequence`.

    Parameters
    ----------
    seq_len : int or array of int
        Tokens per sequence, s. [tokens]
    cp : int or array of int
        Context-parallel size, c. [1]

    Returns
    -------
    bool or array of bool
    """
    split = (seq_len % (2 * cp) == 0) & (seq_len // cp >= MIN_TOKENS_PER_CP_RANK)
    return (cp == 1) | split


def ep_divides_experts(num_experts: IntLike, ep: IntLike) -> BoolLike:
    """Whether expert parallelism holds whole experts on each rank (e divides E).

    Parameters
    ----------
    num_experts : int or array of int
        Routed experts of an MoE layer, E (1 for a dense model). [1]
    ep : int or array of int
        Expert-parallel size, e. [1]

    Returns
    -------
    bool or array of bool
    """
    return num_experts % ep == 0


def ep_divides_data(dp: IntLike, cp: IntLike, ep: IntLike) -> BoolLike:
    """Whether the expert-parallel groups tile the data- and context-parallel ranks
    (e divides d c), as Megatron-Core's expert groups are carved from them.

    Parameters
    ----------
    dp, cp : int or array of int
        Data- and context-parallel sizes, d and c. [1]
    ep : int or array of int
        Expert-parallel size, e. [1]

    Returns
    -------
    bool or array of bool
    """
    return (dp * cp) % ep == 0


def batch_holds_step(
    global_batch_size: IntLike, dp: IntLike, micro_batch_size: IntLike
) -> BoolLike:
    """Whether one micro-batch on every replica fits in the global batch: d b <= B.

    Parameters
    ----------
    global_batch_size : int or array of int
        Sequences per optimizer step, B. [sequences]
    dp : int or array of int
        Data-parallel size, d. [1]
    micro_batch_size : int or array of int
        Sequences per micro-batch, b. [sequences]

    Returns
    -------
    bool or array of bool
    """
    return dp * micro_batch_size <= global_batch_size


def batch_divides(global_batch_size: IntLike, dp: IntLike, micro_batch_size: IntLike) -> BoolLike:
    """Whether the global batch splits into whole micro-batches on every replica
    (d b divides B); otherwise a step rounds up to ceil(B / (d b)) d b sequences.

    Parameters
    ----------
    global_batch_size : int or array of int
        Sequences per optimizer step, B. [sequences]
    dp : int or array of int
        Data-parallel size, d. [1]
    micro_batch_size : int or array of int
        Sequences per micro-batch, b. [sequences]

    Returns
    -------
    bool or array of bool
    """
    return global_batch_size % (dp * micro_batch_size) == 0


def micro_batches_per_step(
    global_batch_size: IntLike, dp: IntLike, micro_batch_size: IntLike
) -> IntLike:
    """Micro-batches each pipeline runs per step, m = ceil(B / (d b)). [1]

    Parameters
    ----------
    global_batch_size : int or array of int
        Sequences per optimizer step, B. [sequences]
    dp : int or array of int
        Data-parallel size, d. [1]
    micro_batch_size : int or array of int
        Sequences per micro-batch, b. [sequences]

    Returns
    -------
    int or array of int
        Micro-batches per step. [1]
    """
    return _ceil_div(global_batch_size, dp * micro_batch_size)


def framework_runs_axis(profile: FrameworkProfile, axis: str, size: IntLike) -> BoolLike:
    """Whether the framework ``profile`` runs ``size`` along ``axis``: every framework
    runs size 1; larger sizes need the axis's flag (:data:`PROFILE_AXIS_FLAGS`).

    Parameters
    ----------
    profile : FrameworkProfile
        The scenario's framework.
    axis : {"tp", "pp", "cp", "ep", "virtual_stages"}
        The parallel axis.
    size : int or array of int
        Its size. [1]

    Returns
    -------
    bool or array of bool
    """
    supported: bool = getattr(profile, PROFILE_AXIS_FLAGS[axis])
    return (size == 1) | supported
