"""Property tests (hypothesis) over random valid scenarios."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from estimator.core import estimate, load_catalog, validate_scenario
from estimator.core.constants import SECONDS_PER_DAY
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import LayoutResults, Layouts
from estimator.core.memory import GIB
from estimator.core.wholerun import START_UP_S
from estimator.core.workload import build_workload

CATALOG = load_catalog()
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A random valid scenario; layers divisible by every pp drawn (1, 2, 4)."""
    heads = draw(st.sampled_from([8, 16, 32, 64]))
    head_dim = draw(st.sampled_from([64, 128]))
    kv_heads = draw(st.sampled_from([k for k in (1, 2, 4, 8, heads) if heads % k == 0]))
    tp = draw(
        st.sampled_from(
            [t for t in (1, 2, 4, 8) if heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)]
        )
    )
    pp, cp, dp = (draw(st.sampled_from(v)) for v in ([1, 2, 4], [1, 2], [1, 2, 4, 8, 32]))
    micro = draw(st.integers(1, 8))
    accelerator = draw(st.sampled_from(sorted(CATALOG)))
    precision = draw(st.sampled_from(sorted(_precisions(accelerator))))
    # A ZeRO stage the framework runs: MaxText on TPUs (0, 3), otherwise Megatron-LM
    # ("auto": 0, 1, 3) or torchtitan for stage 2.
    is_tpu = CATALOG[accelerator].family == "google-tpu"
    zero_stage = draw(st.sampled_from([0, 3] if is_tpu else [0, 1, 2, 3]))
    framework = "torchtitan" if zero_stage == 2 else "auto"
    model: dict[str, Any] = {
        "name": "random",
        "num_layers": 4 * draw(st.integers(2, 24)),
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "gated_mlp": draw(st.booleans()),
        "ffn_hidden_size": heads * head_dim * draw(st.sampled_from([2, 3, 4])),
        "vocab_size": draw(st.integers(1000, 200_000)),
        "seq_len": draw(st.sampled_from([512, 2048, 8192, 32768])),
        "tied_embeddings": draw(st.booleans()),
    }
    ep = 1
    if draw(st.booleans()):
        experts = draw(st.sampled_from([8, 16, 64]))
        model["moe"] = {
            "num_experts": experts,
            "top_k": draw(st.integers(1, 4)),
            "expert_ffn_hidden_size": head_dim * draw(st.integers(4, 32)),
            "num_shared_experts": draw(st.integers(0, 2)),
            "moe_layer_every": draw(st.sampled_from([1, 2])),
        }
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0]))
    return {
        "format_version": 1, "model": model, "framework": framework,
        "training": {"tokens": draw(st.floats(1e6, 1e14)),
                     "global_batch_size": dp * micro * draw(st.integers(1, 64)),
                     "precision": precision},
        "cluster": {"accelerator": accelerator, "num_gpus": tp * pp * dp * cp},
        "parallelism": {
            "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "micro_batch_size": micro,
            "zero_stage": zero_stage,
            "recompute": draw(st.sampled_from(["none", "selective", "full"])),
            "sequence_parallel": draw(st.booleans()),
            "pipeline_schedule": "interleaved" if pp > 1 and draw(st.booleans()) else "1f1b",
        },
    }  # fmt: skip


def _precisions(accelerator: str) -> set[str]:
    peaks = CATALOG[accelerator].peak_tflops
    return {p for p in ("fp32", "tf32", "fp16", "bf16", "fp8") if p in peaks}


def _vary(data: dict[str, Any], field: str, values: list[int]) -> LayoutResults:
    """Evaluate the scenario's layout with one field taking each of ``values``."""
    scenario = validate_scenario(data)
    layout = Layouts.single(scenario.parallelism)  # type: ignore[arg-type]
    columns = {name: getattr(layout, name) for name in layout.__dataclass_fields__}
    columns[field] = np.asarray(values, dtype=float)
    if field != "virtual_stages":
        columns["virtual_stages"] = np.ones(1)  # 1F1B: interleaving trades memory for bubble
    return evaluate_layouts(build_workload(scenario), Layouts.from_arrays(**columns))


def _non_increasing(values: np.ndarray) -> bool:
    return bool(np.all(np.diff(values) <= 1e-9 * np.abs(values[:-1])))


@PROPERTY_SETTINGS
@given(scenarios())
def test_estimate_results_finite_for_any_valid_input(data: dict[str, Any]) -> None:
    result = estimate(data)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, float | int) and not isinstance(value, bool):
            assert math.isfinite(value)

    walk(result)
    assert result["step_time_s"] > 0
    assert result["tokens_per_s_per_gpu"] > 0
    assert 0 < result["goodput"] <= 1
    assert 0 < result["mfu"] <= result["hfu"]


@PROPERTY_SETTINGS
@given(scenarios())
def test_total_memory_never_grows_with_zero_stage(data: dict[str, Any]) -> None:
    assert _non_increasing(_vary(data, "zero_stage", [0, 1, 2, 3]).total_memory)


@PROPERTY_SETTINGS
@given(scenarios())
def test_total_memory_never_grows_with_tp(data: dict[str, Any]) -> None:
    heads = data["model"]["num_attention_heads"]
    tps = [t for t in (1, 2, 4, 8) if heads % t == 0]
    assert _non_increasing(_vary(data, "tp", tps).total_memory)


@PROPERTY_SETTINGS
@given(scenarios())
def test_total_memory_never_grows_with_pp(data: dict[str, Any]) -> None:
    assert _non_increasing(_vary(data, "pp", [1, 2, 4]).total_memory)


@PROPERTY_SETTINGS
@given(scenarios())
def test_recompute_never_increases_activations_nor_decreases_step_time(
    data: dict[str, Any],
) -> None:
    results = _vary(data, "recompute", [0, 1, 2])
    none, selective, full = results.activations
    assert selective <= none
    assert full <= none
    assert _non_increasing(-results.step_time)
    # Full recomputation holds one layer's whole working set while it recomputes it; without
    # FlashAttention that includes the layer's s x s scores, which selective recomputation
    # never keeps, so with few layers per stage full can need more than selective.
    if build_workload(validate_scenario(data)).framework.flash_attention:
        assert full <= selective


@PROPERTY_SETTINGS
@given(scenarios())
def test_training_days_double_with_tokens(data: dict[str, Any]) -> None:
    # At a stated idle share every whole-run part is a share of the steady state but the
    # fixed start-up (held idle like the rest): days = a steady + START_UP_S / day / (1 - idle).
    idle = 0.2
    data["run"] = {**(data.get("run") or {}), "allocation_idle": idle}
    once = estimate(data)
    data["training"]["tokens"] *= 2
    twice = estimate(data)
    fixed_days = START_UP_S / SECONDS_PER_DAY / (1 - idle)
    gpus = data["cluster"]["num_gpus"]
    assert_allclose(
        twice["training_days"] - fixed_days, 2 * (once["training_days"] - fixed_days), rtol=1e-9
    )
    assert_allclose(
        twice["gpu_hours"] - fixed_days * 24 * gpus,
        2 * (once["gpu_hours"] - fixed_days * 24 * gpus),
        rtol=1e-9,
    )
    steady = (once["whole_run"]["steady_state_days"], twice["whole_run"]["steady_state_days"])
    assert_allclose(steady[1], 2 * steady[0], rtol=1e-12)
    assert_allclose(twice["step_time_s"], once["step_time_s"], rtol=1e-12)
    # Left to the model, the idle share grows with the interruptions a longer run expects.
    del data["run"]["allocation_idle"]
    longer = estimate(data)
    data["training"]["tokens"] /= 2
    shorter = estimate(data)
    shares = [r["whole_run"]["parts_days"]["allocation_idle"] / r["training_days"]
              for r in (shorter, longer)]  # fmt: skip
    assert shares[1] >= shares[0] * (1 - 1e-12)
    assert longer["training_days"] > shorter["training_days"]


@PROPERTY_SETTINGS
@given(scenarios())
def test_activation_offload_never_adds_memory_nor_saves_time(data: dict[str, Any]) -> None:
    results = _vary(data, "activation_offload", [0, 1])
    assert _non_increasing(results.activations)
    # Where the compiler must rematerialise the activations that do not fit (XLA), offload
    # rightly saves that recompute time; the property holds when it need not.
    assume(results.recompute[0] == results.recompute[1])
    assert _non_increasing(-results.step_time)


@PROPERTY_SETTINGS
@given(scenarios(), st.floats(0.0, 0.9), st.floats(0.0, 0.9))
def test_more_tensor_parallel_overlap_is_never_slower(
    data: dict[str, Any], low: float, high: float
) -> None:
    low, high = sorted((low, high))
    scenario = validate_scenario(data)
    layout = Layouts.single(scenario.parallelism)  # type: ignore[arg-type]
    base = build_workload(scenario)

    def step(overlap: float) -> float:
        efficiency = dataclasses.replace(base.efficiency, tp_overlap=overlap)
        w = dataclasses.replace(base, efficiency=efficiency)
        return float(evaluate_layouts(w, layout).step_time[0])

    assert step(high) <= step(low) * (1 + 1e-12)


@PROPERTY_SETTINGS
@given(scenarios())
def test_a_tpu_layout_fits_when_it_fits_with_full_recomputation(data: dict[str, Any]) -> None:
    data["cluster"]["accelerator"] = "TPU-v5p"
    data["training"]["precision"] = "bf16"
    data["framework"] = "auto"  # MaxText: FSDP or nothing
    data["parallelism"]["zero_stage"] = 3 if data["parallelism"]["zero_stage"] else 0
    results = _vary(data, "recompute", [0, 1, 2])
    # XLA rematerialises down to what MaxText leaves itself (capacity less its headroom).
    capacity = build_workload(validate_scenario(data)).usable_memory
    assert capacity == CATALOG["TPU-v5p"].memory_gib * GIB * 0.95
    full_fits = results.total_memory[2] <= capacity
    for code in (0, 1):
        if full_fits:
            assert results.total_memory[code] <= capacity * (1 + 1e-9)
        assert results.recompute[code] <= results.recompute[2] * (1 + 1e-9)
