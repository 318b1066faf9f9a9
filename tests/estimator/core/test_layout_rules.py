"""layout_rules: each predicate on integers and arrays, and the validator, the search and the
estimate's warnings agreeing on them."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.core import ScenarioError, validate_scenario
from estimator.core import layout_rules as rules
from estimator.core.explicit import estimate_scenario
from estimator.core.frameworks import PROFILES
from estimator.core.scenario import ParallelismConfig, Scenario
from estimator.core.search_grid import (
    AXES,
    _structural_reasons,
    grid_axes,
    grid_size,
    layout_config,
    structural_slice,
)
from estimator.core.validation import check_framework, check_layout

from .scenarios import LLAMA3_405B, SMALL, scenario

MOE_MODEL = {"moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 2048}}
#: Small grids the search covers whole: dense, grouped-query, MoE, an odd layer count.
SEARCHED = {
    "small": scenario(SMALL, parallelism="auto"),
    "gqa": scenario(SMALL, model={"num_kv_heads": 4}, parallelism="auto"),
    "moe": scenario(SMALL, model=MOE_MODEL, parallelism="auto"),
    "odd_layers": scenario(
        SMALL,
        model={"num_layers": 22, "seq_len": 8192},
        cluster={"num_gpus": 24},
        training={"global_batch_size": 96},
        parallelism="auto",
    ),
}


@pytest.mark.parametrize(
    ("predicate", "arguments", "expected"),
    [
        (rules.fills_devices, (16, 2, 2, 4, 1), True),
        (rules.fills_devices, (16, 2, 2, 2, 1), False),
        (rules.tp_divides_heads, (96, 8), True),
        (rules.tp_divides_heads, (96, 5), False),
        (rules.tp_fits_kv_heads, (8, 4), True),  # tp divides the KV heads
        (rules.tp_fits_kv_heads, (8, 16), True),  # KV heads replicated on 2 ranks each
        (rules.tp_fits_kv_heads, (8, 3), False),
        (rules.tp_fits_kv_heads, (8, 12), False),
        (rules.tp_within_node, (8, 8), True),
        (rules.tp_within_node, (16, 8), False),
        (rules.pipeline_fits_layers, (16, 16, 1), True),
        (rules.pipeline_fits_layers, (16, 17, 1), False),  # a stage without a layer
        (rules.pipeline_fits_layers, (126, 16, 8), True),  # 128 chunks: 126 + 2 slots
        (rules.pipeline_fits_layers, (126, 16, 9), False),
        (rules.pipeline_divides_layers, (126, 14), True),
        (rules.pipeline_divides_layers, (126, 16), False),
        (rules.pipeline_ends_absorb, (126, 16), True),  # k = 8: 7 + 14 x 8 + 7
        (rules.pipeline_ends_absorb, (10, 8), False),  # k = 2, d = 6 > 2 (k - 1)
        (rules.pipeline_ends_absorb, (7, 1), True),
        (rules.interleaving_has_pipeline, (1, 1), True),
        (rules.interleaving_has_pipeline, (1, 2), False),
        (rules.interleaving_has_pipeline, (2, 2), True),
        (rules.interleaved_chunks_even, (126, 16, 8), True),  # k = 8, d = 2
        (rules.interleaved_chunks_even, (126, 16, 7), False),  # 7 does not divide 8
        (rules.interleaved_chunks_even, (126, 12, 11), False),  # k = 11, d = 6
        (rules.interleaved_chunks_even, (10, 8, 1), True),  # 1F1B: no chunks to split
        (rules.interleaved_micro_batches_divide, (12, 4, 2), True),
        (rules.interleaved_micro_batches_divide, (10, 4, 2), False),
        (rules.interleaved_micro_batches_divide, (10, 4, 1), True),
        (rules.cp_divides_sequence, (8192, 4), True),
        (rules.cp_divides_sequence, (8192, 3), False),
        (rules.cp_balanced, (8192, 2), True),
        (rules.cp_balanced, (8192, 8), False),  # 1,024 tokens per rank
        (rules.cp_balanced, (8194, 2), False),  # 4 chunks of 2,048.5 tokens
        (rules.cp_divides_sequence, (8194, 2), True),  # though 2 halves are whole
        (rules.cp_balanced, (100, 1), True),
        (rules.ep_divides_experts, (8, 4), True),
        (rules.ep_divides_experts, (8, 3), False),
        (rules.ep_divides_data, (4, 2, 8), True),
        (rules.ep_divides_data, (4, 1, 8), False),
        (rules.batch_holds_step, (256, 16, 16), True),
        (rules.batch_holds_step, (256, 16, 32), False),
        (rules.batch_divides, (256, 16, 4), True),
        (rules.batch_divides, (256, 12, 2), False),
    ],
)
def test_layout_rule_on_integers(
    predicate: Callable[..., Any], arguments: tuple[int, ...], expected: bool
) -> None:
    assert bool(predicate(*arguments)) is expected


#: (predicate, how many arguments, which of them may be an array): the model-size argument
#: of the pipeline rules stays an integer.
PREDICATES: list[tuple[Callable[..., Any], int, tuple[int, ...]]] = [
    (rules.fills_devices, 5, (0, 1, 2, 3, 4)),
    (rules.tp_divides_heads, 2, (0, 1)),
    (rules.tp_fits_kv_heads, 2, (0, 1)),
    (rules.tp_within_node, 2, (0, 1)),
    (rules.pipeline_fits_layers, 3, (0, 1, 2)),
    (rules.pipeline_divides_layers, 2, (0, 1)),
    (rules.pipeline_ends_absorb, 2, (1,)),
    (rules.interleaving_has_pipeline, 2, (0, 1)),
    (rules.interleaved_chunks_even, 3, (1, 2)),
    (rules.interleaved_micro_batches_divide, 3, (0, 1, 2)),
    (rules.cp_divides_sequence, 2, (0, 1)),
    (rules.cp_balanced, 2, (0, 1)),
    (rules.ep_divides_experts, 2, (0, 1)),
    (rules.ep_divides_data, 3, (0, 1, 2)),
    (rules.batch_holds_step, 3, (0, 1, 2)),
    (rules.batch_divides, 3, (0, 1, 2)),
    (rules.data_parallel_size, 4, (0, 1, 2, 3)),
    (rules.micro_batches_per_step, 3, (0, 1, 2)),
]


@pytest.mark.parametrize(
    ("predicate", "count", "arrays"), PREDICATES, ids=[p.__name__ for p, _, _ in PREDICATES]
)
def test_layout_rule_on_arrays_is_the_rule_on_each_integer(
    predicate: Callable[..., Any], count: int, arrays: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(len(predicate.__name__))
    columns = [rng.integers(1, 40, size=500) for _ in range(count)]
    fixed = [int(rng.integers(1, 200)) for _ in range(count)]
    given_: list[Any] = [columns[i] if i in arrays else fixed[i] for i in range(count)]
    vectorised = predicate(*given_)
    one_by_one = [
        predicate(*(int(a[row]) if i in arrays else a for i, a in enumerate(given_)))
        for row in range(500)
    ]
    assert isinstance(vectorised, np.ndarray)
    assert all(type(value) in (bool, int) for value in one_by_one)  # plain Python scalars
    assert vectorised.tolist() == one_by_one


def test_framework_runs_axis_follows_the_profile_flags() -> None:
    peft, megatron = PROFILES["hf-peft"], PROFILES["megatron-lm"]
    for axis in rules.PROFILE_AXIS_FLAGS:
        assert rules.framework_runs_axis(peft, axis, 1)
        assert not rules.framework_runs_axis(peft, axis, 2)
        assert rules.framework_runs_axis(megatron, axis, 4)
    sizes = np.array([1, 2, 4])
    assert np.asarray(rules.framework_runs_axis(peft, "tp", sizes)).tolist() == [True, False, False]


def with_layout(parsed: Scenario, layout: ParallelismConfig) -> Scenario:
    return dataclasses.replace(parsed, parallelism=layout)


def validator_refuses(parsed: Scenario, layout: ParallelismConfig) -> ScenarioError | None:
    """The error the validator raises for this explicit layout (None when it accepts it)."""
    try:
        check_layout(parsed, layout)
        profile = PROFILES[parsed.framework]
        check_framework(parsed, layout, profile)
    except ScenarioError as error:
        return error
    return None


@pytest.mark.parametrize("name", sorted(SEARCHED))
def test_every_layout_the_search_keeps_validates(name: str) -> None:
    parsed = validate_scenario(SEARCHED[name])
    kept = structural_slice(parsed, 0, grid_size(parsed))
    assert len(kept.flat_index) > 0
    for row in range(len(kept.flat_index)):
        layout = layout_config(kept.columns, row)
        assert validator_refuses(parsed, layout) is None, layout
        # and the full validation of the scenario as a user would write it
        as_dict = {**SEARCHED[name], "framework": parsed.framework}
        if row % 97 == 0:
            validate_scenario({**as_dict, "parallelism": layout.as_dict()})


@pytest.mark.parametrize("name", sorted(SEARCHED))
def test_search_keeps_no_layout_estimate_warns_about(name: str) -> None:
    """The estimate's warnings for Megatron-LM's stricter rules never fire on a layout the
    search keeps (uneven splits and cross-node tp are kept, and warned about, on purpose)."""
    parsed = validate_scenario(SEARCHED[name])
    kept = structural_slice(parsed, 0, grid_size(parsed))
    rows = np.random.default_rng(3).choice(len(kept.flat_index), size=25, replace=False)
    for row in rows:
        layout = layout_config(kept.columns, int(row))
        warnings = estimate_scenario(with_layout(parsed, layout))["warnings"]
        assert not any(w.startswith(("global batch", "interleaved")) for w in warnings)


def search_keeps(parsed: Scenario, layout: ParallelismConfig) -> bool:
    """Whether the search's grid holds ``layout`` and its structural rules keep it."""
    axes = grid_axes(parsed)
    values = dataclasses.asdict(layout)
    values["recompute"] = {"none": 0, "selective": 1, "full": 2}[layout.recompute]
    if any(values[name] not in axes[name] for name in AXES):
        return False
    columns = {name: np.array([values[name]], dtype=np.int64) for name in AXES}
    kept = _structural_reasons(parsed, columns)[0] < 0
    return bool(kept) and layout.dp == parsed.cluster.num_gpus // (
        layout.tp * layout.pp * layout.cp
    )


def layouts_of(parsed: Scenario) -> list[ParallelismConfig]:
    """Every layout on a small grid around the scenario, valid or not."""
    sizes = (1, 2, 3, 4, 8)
    found = []
    for tp, pp, cp, ep, micro, v in itertools.product(
        sizes, (1, 2, 3, 4, 8, 16), (1, 2, 4), (1, 2, 4, 8), (1, 2, 8, 64), (1, 2, 3, 4)
    ):
        dp = max(parsed.cluster.num_gpus // (tp * pp * cp), 1)
        found.append(
            ParallelismConfig(
                tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch_size=micro, zero_stage=1,
                recompute="none", sequence_parallel=tp > 1,
                pipeline_schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
            )
        )  # fmt: skip
    return found


@pytest.mark.parametrize("name", sorted(SEARCHED))
def test_a_layout_the_validator_refuses_is_never_kept_on_a_grid(name: str) -> None:
    parsed = validate_scenario(SEARCHED[name])
    refused = kept = 0
    for layout in layouts_of(parsed):
        if validator_refuses(parsed, layout) is not None:
            refused += 1
            assert not search_keeps(parsed, layout), layout
        elif search_keeps(parsed, layout):
            kept += 1
    assert refused > 0
    assert kept > 0


SIZES = st.one_of(st.sampled_from([1, 1, 2, 4, 8, 16]), st.integers(1, 12))


@st.composite
def random_layouts(draw: st.DrawFn) -> ParallelismConfig:
    """A layout with sizes that often divide a model (powers of two and small numbers)."""
    tp, pp, dp, cp = (draw(SIZES) for _ in range(4))
    ep, virtual = (draw(st.one_of(st.just(1), SIZES)) for _ in range(2))
    return ParallelismConfig(
        tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch_size=draw(SIZES), zero_stage=1,
        recompute="none", sequence_parallel=tp > 1,
        pipeline_schedule="interleaved" if virtual > 1 else "1f1b", virtual_stages=virtual,
    )  # fmt: skip


@st.composite
def scenarios_with_layouts(draw: st.DrawFn) -> tuple[Scenario, ParallelismConfig]:
    """A random model and batch with a random layout, on a cluster the layout often fills."""
    layout = draw(random_layouts())
    heads = draw(st.sampled_from([4, 6, 8, 12, 16, 32]))
    model: dict[str, Any] = {
        "num_layers": draw(st.integers(1, 40)),
        "hidden_size": heads * 64,
        "num_attention_heads": heads,
        "num_kv_heads": draw(
            st.sampled_from([k for k in (1, 2, 3, 4, 8, heads) if heads % k == 0])
        ),
        "seq_len": draw(st.sampled_from([1024, 2048, 4096, 6144, 8192, 16384])),
    }
    if draw(st.booleans()):
        experts = draw(st.sampled_from([2, 4, 6, 8, 16]))
        model["moe"] = {"num_experts": experts, "top_k": 1, "expert_ffn_hidden_size": 512}
    filled = layout.tp * layout.pp * layout.dp * layout.cp
    data = scenario(
        SMALL,
        model=model,
        cluster={"num_gpus": draw(st.one_of(st.just(filled), st.integers(1, 64)))},
        training={"global_batch_size": draw(st.integers(1, 256))},
        parallelism="auto",
    )
    return validate_scenario(data), layout


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenarios_with_layouts())
def test_the_search_never_keeps_a_layout_the_validator_refuses(
    case: tuple[Scenario, ParallelismConfig],
) -> None:
    parsed, layout = case
    if validator_refuses(parsed, layout) is not None:
        assert not search_keeps(parsed, layout)
    if search_keeps(parsed, layout):
        assert validator_refuses(parsed, layout) is None


def test_llama3_published_layout_validates_but_the_search_wants_equal_chunks() -> None:
    """Llama 3 405B's stated layout (pp 16, v 7 over 126 layers: k = 8 layers a stage, which
    7 chunks do not split evenly) is valid, and estimated with a warning; the search keeps
    only Megatron-LM's equal chunks (v 8 here)."""
    parsed = validate_scenario(LLAMA3_405B)
    assert parsed.parallelism is not None
    assert validator_refuses(parsed, parsed.parallelism) is None
    assert not search_keeps(parsed, parsed.parallelism)
    warnings = estimate_scenario(parsed)["warnings"]
    assert any(w.startswith("interleaved schedule: the 8 layers") for w in warnings)
    assert rules.interleaved_chunks_even(126, 16, 8)
    assert not rules.interleaved_chunks_even(126, 16, 7)
