"""estimator.calibration.stacks: each software stack's factor and the pooled stack
(no database)."""

from __future__ import annotations

import math

import pytest
from numpy.testing import assert_allclose

from estimator.calibration.families import predict
from estimator.calibration.loading import Prepared, prepare
from estimator.calibration.stacks import STACK_LOG_RANGE, fit_stacks, pooled_stack
from estimator.core import calibration

from .sample_cases import AT_BOUND, project_cases


@pytest.mark.parametrize("stack", sorted(s for s in calibration.STACK_FACTORS if s != "pooled"))
def test_a_stacks_factor_is_off_the_searched_range(stack: str) -> None:
    offset = abs(math.log(calibration.STACK_FACTORS[stack]))
    assert offset < STACK_LOG_RANGE * (1 - AT_BOUND)


def test_no_stack_takes_a_kernel_fraction_past_the_hardware() -> None:
    for family in calibration.FAMILY_FITS:
        for stack in calibration.STACK_FACTORS:
            efficiency = calibration.efficiency_for(family, stack)
            for name in calibration.KERNEL_FIELDS:
                limit = calibration.hardware_limit(family, name).value
                assert getattr(efficiency, name) <= limit + 1e-12, (family, stack, name)


def _two_stack_cases(factors: dict[str, float]) -> list[Prepared]:
    """Hopper cases of two stacks (OLMo-core: PyTorch-native; the Megatron-MoE model zoo:
    Megatron-Core), 'measured' at gemm 0.6, attention 0.3 and each stack's factor."""
    picked = [c for c in project_cases() if c["id"].startswith(("olmo", "megatron-moe"))]
    prepared = [p for p in prepare(picked) if p.scenario.training.precision == "bf16"]
    assert {p.stack for p in prepared} == set(factors)
    truth = calibration.with_fitted(
        calibration.PRIORS["nvidia-hopper"], {"gemm": 0.6, "attention": 0.3}
    )
    for case in prepared:
        case.measured = predict(case, truth, factors[case.stack])
    return prepared


def test_a_stack_factor_is_recovered_and_shrunk_by_its_evidence() -> None:
    """With the family at the efficiency that generated the cases, each stack's own offset
    comes back; partial pooling keeps m / (m + 1) of it, m its sources (one each here)."""
    factors = {"pytorch-native": 0.9, "megatron-core": 1.2}
    prepared = _two_stack_cases(factors)
    found = fit_stacks(prepared, {"nvidia-hopper": {"gemm": 0.6, "attention": 0.3}})
    for stack, factor in factors.items():
        shrink = found[stack]["sources"] / (found[stack]["sources"] + 1)
        assert_allclose(math.log(found[stack]["factor"]), shrink * math.log(factor), atol=0.02)


def test_the_pooled_stack_is_the_median_of_the_current_stacks() -> None:
    stacks = {
        "megatron-core": {"factor": 1.2},
        "pytorch-native": {"factor": 0.9},
        "nanotron": {"factor": 1.0},
        "megatron-2021": {"factor": 3.0},  # a period stack: never what "auto" stands for
    }
    pooled = pooled_stack(stacks)
    assert pooled["factor"] == 1.0
    logs = [math.log(1.2), math.log(0.9), 0.0]
    assert_allclose(pooled["sigma"], math.sqrt(sum(x * x for x in logs) / 3), atol=1e-4)
