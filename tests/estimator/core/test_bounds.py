"""Runaway inputs: every scenario key is bounded, so any input ends in a result or a
ScenarioError naming a key, within a second of CPU (issue: a batch of 10^12 sequences held
a worker for its whole time limit, 10^9-wide models failed as an internal error)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from estimator.core import ScenarioError, estimate
from estimator.core.schema import (
    KEYS,
    MAX_BATCH,
    MAX_HIDDEN,
    MAX_LAYERS,
    MAX_SEQUENCE,
    MAX_VOCABULARY,
)

from .scenarios import GPT3_175B, scenario

CPU_LIMIT_S = 1.0
BOUNDED = {
    "model.num_layers": MAX_LAYERS,
    "model.hidden_size": MAX_HIDDEN,
    "model.vocab_size": MAX_VOCABULARY,
    "model.seq_len": MAX_SEQUENCE,
    "training.global_batch_size": MAX_BATCH,
}
#: Keys whose values the fuzz draws, with the integer values worth trying: tiny, the
#: published sizes, the bounds and beyond them.
FUZZED = (
    "model.num_layers",
    "model.hidden_size",
    "model.num_attention_heads",
    "model.num_kv_heads",
    "model.ffn_hidden_size",
    "model.vocab_size",
    "model.seq_len",
    "training.global_batch_size",
    "training.tokens",
    "cluster.num_gpus",
)


def _with(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    section, key = path.split(".")
    out[section][key] = value
    return out


@pytest.mark.parametrize(("path", "bound"), sorted(BOUNDED.items()))
def test_each_shape_key_states_its_bound_and_refuses_beyond_it(path: str, bound: int) -> None:
    key = next(k for k in KEYS if k.path == path)
    assert key.maximum == bound
    assert key.interval == f"[1, {bound:,}]"
    with pytest.raises(ScenarioError) as refused:
        estimate(_with(GPT3_175B, path, bound + 1))
    assert refused.value.key == path
    assert f"at most {bound:,}" in refused.value.reason


def test_the_largest_published_shapes_pass_the_bounds() -> None:
    """PaLM 540B's MLP and Gemma 3's vocabulary, DeepNet's depth, a 1M-token sequence."""
    for path, value in (
        ("model.ffn_hidden_size", 73_728),
        ("model.vocab_size", 262_144),
        ("model.num_layers", 1000),
        ("model.seq_len", 1 << 20),
        ("training.global_batch_size", 131_072),
    ):
        for key in KEYS:
            if key.path == path:
                assert key.within(value), path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.dictionaries(
        st.sampled_from(FUZZED),
        st.one_of(
            st.integers(-2, 2**70),
            st.sampled_from([1, 2, 3, 7, 96, 128, 1000, 4096, 8192, 2**18, 2**24, 2**26 + 1]),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=3),
            st.none(),
        ),
        max_size=4,
    ),
    layout=st.sampled_from(["auto", "explicit"]),
)
@example(changes={"training.global_batch_size": MAX_BATCH}, layout="auto")
@example(
    changes={
        "training.global_batch_size": MAX_BATCH,
        "model.num_layers": MAX_LAYERS - 2,
        "cluster.num_gpus": 1 << 19,
    },
    layout="auto",
)
@example(changes={"model.seq_len": MAX_SEQUENCE}, layout="auto")
def test_any_input_ends_in_a_result_or_a_named_refusal_within_a_second(
    changes: dict[str, Any], layout: str
) -> None:
    data = scenario(GPT3_175B) if layout == "explicit" else scenario(GPT3_175B, parallelism="auto")
    for path, value in changes.items():
        data = _with(data, path, value)
    began = time.process_time()
    refusal: ScenarioError | None = None
    try:
        result = estimate(data)
    except ScenarioError as error:
        refusal = error
    spent = time.process_time() - began
    if refusal is None:
        assert result["training_days"] > 0
    else:
        assert refusal.key
        assert refusal.reason
    assert spent < CPU_LIMIT_S, f"{spent:.2f} s of CPU for {changes}"
