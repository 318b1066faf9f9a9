"""Collective and point-to-point communication times, alpha-beta model.

A collective over n ranks costs a latency alpha per ring step plus its bytes over the link
bandwidth beta, with the ring factors of Thakur, Rabenseifner & Gropp 2005 ("Optimization
of Collective Communication Operations in MPICH", IJHPCA 19(1)), as used by NCCL:

* all-reduce: 2 (n - 1) alpha + 2 (n - 1)/n M / beta
* all-gather, reduce-scatter: (n - 1) alpha + (n - 1)/n M / beta (M = the unsharded size)
* all-to-all: (n - 1) alpha + (n - 1)/n M / beta (M = what one rank sends in total)
* point-to-point: alpha + M / beta

A volume moved as c separate collectives (one per layer, say) pays the latency c times:
pass ``latency`` = c alpha.

The bandwidths are bus bandwidths in the sense of NVIDIA's nccl-tests
(doc/PERFORMANCE.md): the algorithm bandwidth M / t times 2 (n - 1)/n for all-reduce and
(n - 1)/n for all-gather and reduce-scatter, so one figure per link serves every collective.

All functions accept broadcastable numpy arrays. Sizes in bytes, bandwidths in B/s, times
in seconds; n = 1 costs nothing.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import ALL_REDUCE_PHASES


def _steps(ranks: Numeric) -> FloatArray:
    """Ring steps of one phase, n - 1 (0 for a group of one). [1]"""
    return np.maximum(np.asarray(ranks, dtype=np.float64) - 1.0, 0.0)


def all_reduce_time(
    size: Numeric, ranks: Numeric, bandwidth: Numeric, latency: Numeric
) -> FloatArray:
    """Ring all-reduce: a reduce-scatter then an all-gather.

    Parameters
    ----------
    size : array_like
        M, the bytes each rank contributes (and receives reduced). [B]
    ranks : array_like
        n, ranks in the group. [devices]
    bandwidth : array_like
        beta, bus bandwidth of the ring. [B/s]
    latency : array_like
        alpha, latency per ring step (times the number of collectives when one volume
        moves as several). [s]

    Returns
    -------
    ndarray
        2 (n-1) alpha + 2 (n-1)/n M / beta. [s]

    References
    ----------
    Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations
    in MPICH", IJHPCA 19(1); NVIDIA nccl-tests, doc/PERFORMANCE.md.
    """
    steps = _steps(ranks)
    share = steps / np.maximum(np.asarray(ranks, dtype=np.float64), 1.0)
    moved = ALL_REDUCE_PHASES * share * np.asarray(size, dtype=np.float64)
    return ALL_REDUCE_PHASES * steps * latency + moved / bandwidth


def all_gather_time(
    size: Numeric, ranks: Numeric, bandwidth: Numeric, latency: Numeric
) -> FloatArray:
    """Ring all-gather (or reduce-scatter, or all-to-all): one phase of an all-reduce.

    Parameters
    ----------
    size : array_like
        M, the unsharded bytes (for an all-to-all: what one rank sends in total). [B]
    ranks : array_like
        n, ranks in the group. [devices]
    bandwidth : array_like
        beta, bus bandwidth of the ring. [B/s]
    latency : array_like
        alpha, latency per ring step. [s]

    Returns
    -------
    ndarray
        (n-1) alpha + (n-1)/n M / beta. [s]

    References
    ----------
    Thakur, Rabenseifner & Gropp 2005; NVIDIA nccl-tests, doc/PERFORMANCE.md.
    """
    return all_reduce_time(size, ranks, bandwidth, latency) / ALL_REDUCE_PHASES


reduce_scatter_time = all_gather_time
all_to_all_time = all_gather_time


def p2p_time(size: Numeric, bandwidth: Numeric, latency: Numeric) -> FloatArray:
    """One point-to-point transfer.

    Parameters
    ----------
    size : array_like
        M, bytes sent. [B]
    bandwidth : array_like
        beta, link bandwidth. [B/s]
    latency : array_like
        alpha, latency of the transfer. [s]

    Returns
    -------
    ndarray
        alpha + M / beta. [s]
    """
    return np.asarray(latency, dtype=np.float64) + np.asarray(size, dtype=np.float64) / bandwidth


def spans_nodes(group_size: Numeric, stride: Numeric, node_size: int) -> npt.NDArray[np.bool_]:
    """Whether a process group leaves the fast domain.

    Ranks are laid out Megatron-style (tp fastest, then cp, then dp, then pp), so a group of
    ``group_size`` ranks spaced ``stride`` apart covers ``group_size * stride`` consecutive
    ranks; it stays inside one node when that span fits in ``node_size``.

    Parameters
    ----------
    group_size : array_like
        Ranks in the group. [devices]
    stride : array_like
        Distance between consecutive members' ranks. [devices]
    node_size : int
        Devices in one fast domain. [devices]

    Returns
    -------
    ndarray of bool
        True where the group has more than one member and its span exceeds a node.
    """
    size = np.asarray(group_size, dtype=np.float64)
    return (size > 1) & (size * np.asarray(stride, dtype=np.float64) > node_size)


def members_per_node(group_size: Numeric, stride: Numeric, node_size: int) -> FloatArray:
    """Ranks of a group that share one node.

    Parameters
    ----------
    group_size : array_like
        Ranks in the group. [devices]
    stride : array_like
        Distance between consecutive members' ranks. [devices]
    node_size : int
        Devices in one fast domain. [devices]

    Returns
    -------
    ndarray
        floor(node_size / stride), between 1 and the group size. [devices]
    """
    per_node = np.floor(node_size / np.asarray(stride, dtype=np.float64))
    return np.clip(per_node, 1.0, np.maximum(np.asarray(group_size, dtype=np.float64), 1.0))


def link(
    spans: npt.NDArray[np.bool_],
    members: Numeric,
    group_size: Numeric,
    intra_bandwidth: float,
    inter_bandwidth: float,
    intra_latency: float,
    inter_latency: float,
    nics: Numeric | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Effective (bandwidth, latency per ring step) of a ring over a group.

    Inside a node the ring runs at the fast-link bandwidth. Across nodes NCCL runs one ring
    per NIC (rail-optimised fabrics, one NIC per device), so the k group members of a node
    together bring k NICs: the bus bandwidth is min(fast link, k x per-device network
    bandwidth) - the node's aggregate NIC bandwidth for a stride-1 group, one NIC for a
    group with one member per node. A ring over n ranks, k per node, crosses n/k node
    boundaries and n - n/k fast links, so its n - 1 steps cost on average
    ((n - n/k) alpha_intra + (n/k) alpha_inter) / (n - 1) each: the per-step latency that,
    multiplied by n - 1, gives that sum.

    Parameters
    ----------
    spans : ndarray of bool
        Whether the group leaves the node (:func:`spans_nodes`).
    members : array_like
        k, members per node (:func:`members_per_node`). [devices]
    group_size : array_like
        n, ranks in the group. [devices]
    intra_bandwidth, inter_bandwidth : float
        Achieved bus bandwidth of the fast link, and of one device's NIC. [B/s]
    intra_latency, inter_latency : float
        alpha of a fast-link hop and of a node crossing. [s]
    nics : array_like, optional
        NICs a node brings to the group's crossings when fewer than its k members (a
        stack whose collectives use one NIC per device); the ring's hops, and so its
        latency, stay those of the k members. [1]

    Returns
    -------
    tuple of ndarray
        (bandwidth [B/s], latency per ring step [s]).
    """
    members = np.asarray(members, dtype=np.float64)
    size = np.maximum(np.asarray(group_size, dtype=np.float64), 1.0)
    rails = members if nics is None else np.minimum(members, nics)
    scale_out = np.minimum(intra_bandwidth, rails * inter_bandwidth)
    bandwidth = np.where(spans, scale_out, intra_bandwidth)
    crossings = size / members
    mixed = ((size - crossings) * intra_latency + crossings * inter_latency) / np.maximum(
        size - 1.0, 1.0
    )
    return bandwidth, np.where(spans, mixed, intra_latency)


def exposed_time(communication: Numeric, compute: Numeric, overlap: Numeric) -> FloatArray:
    """Communication left on the critical path when it runs beside ``compute``.

    A share ``overlap`` of whichever is shorter is hidden; the rest models contention for
    SMs and memory bandwidth between compute and NCCL kernels.

    Parameters
    ----------
    communication : array_like
        c, time of the communication alone. [s]
    compute : array_like
        Time of the compute it can run beside. [s]
    overlap : array_like
        Share of the shorter of the two that is hidden. [1]

    Returns
    -------
    ndarray
        c - overlap min(c, compute). [s]
    """
    communication = np.asarray(communication, dtype=np.float64)
    return communication - overlap * np.minimum(communication, compute)
