"""Alpha-beta collective costs (Thakur, Rabenseifner & Gropp 2005)."""

from __future__ import annotations

import numpy as np
from numpy.testing import assert_allclose

from estimator.core import comms


def test_all_reduce_time_ring_factor() -> None:
    # 2 (n - 1) alpha + 2 (n - 1)/n M / beta: 1 GB over 8 ranks at 100 GB/s, alpha = 5 us.
    time = comms.all_reduce_time(1e9, 8, 100e9, 5e-6)
    assert_allclose(time, 2 * 7 * 5e-6 + 2 * 7 / 8 * 1e9 / 100e9, rtol=1e-12)


def test_all_gather_time_is_half_an_all_reduce() -> None:
    sizes = np.array([1e6, 1e9])
    assert_allclose(
        comms.all_gather_time(sizes, 16, 50e9, 1e-5), 15 * 1e-5 + 15 / 16 * sizes / 50e9, rtol=1e-12
    )
    assert_allclose(
        comms.reduce_scatter_time(sizes, 16, 50e9, 1e-5),
        0.5 * comms.all_reduce_time(sizes, 16, 50e9, 1e-5),
        rtol=1e-12,
    )


def test_all_reduce_time_single_rank_is_free() -> None:
    assert comms.all_reduce_time(1e9, 1, 1e9, 1e-3) == 0.0


def test_p2p_time_latency_plus_size() -> None:
    assert_allclose(comms.p2p_time(25e6, 25e9, 1e-5), 1e-5 + 1e-3, rtol=1e-12)


def test_spans_nodes_by_group_extent() -> None:
    spans = comms.spans_nodes(np.array([8, 16, 2, 4]), np.array([1, 1, 8, 2]), 8)
    assert spans.tolist() == [False, True, True, False]


def test_link_scale_out_bandwidth_grows_with_members_per_node() -> None:
    # one rank per node: one NIC; eight per node: the node's eight NICs, capped by NVLink.
    bandwidth, _ = comms.link(
        np.array([True, True, False]),
        np.array([1, 8, 8]),
        np.array([4, 16, 8]),
        300e9,
        25e9,
        2e-6,
        1e-5,
    )
    assert_allclose(bandwidth, [25e9, 200e9, 300e9])


def test_link_latency_sums_hops_along_the_ring() -> None:
    # 64 ranks, 8 per node: 8 node crossings at 10 us and 56 NVLink hops at 2 us.
    _, latency = comms.link(
        np.array([True, False]), np.array([8, 8]), np.array([64, 8]), 300e9, 25e9, 2e-6, 1e-5
    )
    assert_allclose(latency * np.array([63, 7]), [8 * 1e-5 + 56 * 2e-6, 7 * 2e-6], rtol=1e-12)


def test_link_nics_cap_the_crossing_bandwidth_but_not_the_ring_hops() -> None:
    # 64 ranks, 8 per node, on a stack using one NIC per device: one NIC's bandwidth, the
    # same 8 node crossings and 56 NVLink hops as with eight; a group inside a node keeps
    # the fast link.
    args = (np.array([True, False]), np.array([8, 8]), np.array([64, 8]), 300e9, 25e9, 2e-6, 1e-5)
    bandwidth, latency = comms.link(*args, nics=1.0)
    assert_allclose(bandwidth, [25e9, 300e9])
    assert_allclose(latency, comms.link(*args)[1], rtol=1e-12)


def test_exposed_time_hides_overlap_share_of_shorter() -> None:
    assert_allclose(
        comms.exposed_time(np.array([1.0, 3.0]), np.array([2.0, 2.0]), 0.75), np.array([0.25, 1.5])
    )
