"""deadline: the chance of finishing by a deadline and the verdict, against hand-computed sets."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core.deadline import (
    DAYS_QUANTILE_LEVELS,
    MEETS,
    MISSES_P50,
    MISSES_P90,
    NO_DEADLINE,
    DeadlineCheck,
    days_quantiles,
    deadline_check,
    finish_probability,
    finish_share,
)
from estimator.core.montecarlo import monte_carlo

from .scenarios import SMALL

#: Five samples: numpy's linear percentile puts level L at position 4 L / 100, so the
#: quantile is q(L) = 10 + 0.4 L days and a deadline d is met with probability (d - 10) / 40.
FIVE = [50.0, 10.0, 40.0, 20.0, 30.0]


def test_days_quantiles_of_five_samples_are_linear() -> None:
    quantiles = days_quantiles(FIVE)
    assert len(quantiles) == len(DAYS_QUANTILE_LEVELS) == 101
    assert_allclose(quantiles, [10 + 0.4 * level for level in DAYS_QUANTILE_LEVELS])


@pytest.mark.parametrize(
    ("days_available", "expected"),
    [(9.99, 0.0), (10.0, 0.0), (26.0, 0.4), (30.0, 0.5), (46.0, 0.9), (50.0, 1.0), (80.0, 1.0)],
)
def test_finish_probability_of_five_samples(days_available: float, expected: float) -> None:
    # d = (10 + 0.4 L) gives L: 26 days is level 40. Five samples are a coarse grid (counting
    # them, 30 days is 3 / 5); thousands of samples are not (the test below).
    got = finish_probability(days_quantiles(FIVE), days_available)
    assert_allclose(got, expected, atol=1e-12)


def test_finish_share_counts_samples_within_the_days() -> None:
    assert finish_share(FIVE, 30.0) == 3 / 5
    assert finish_share(FIVE, 9.0) == 0.0
    assert finish_share(FIVE, 50.0) == 1.0


def test_finish_probability_takes_the_top_of_a_flat_stretch() -> None:
    # [5, 5, 5, 5, 10]: positions 0-3 (levels 0-75) are 5 days, then 5 + 5 (pos - 3).
    quantiles = days_quantiles([5.0, 5.0, 5.0, 5.0, 10.0])
    assert finish_probability(quantiles, 5.0) == pytest.approx(0.75)
    assert finish_probability(quantiles, 7.5) == pytest.approx(0.875)
    assert finish_probability(quantiles, 4.99) == 0.0


def test_finish_probability_matches_the_samples_within_a_point() -> None:
    days = np.random.default_rng(7).lognormal(np.log(126.0), 0.28, 4000)
    quantiles = days_quantiles(days)
    for deadline in (60.0, 100.0, 126.0, 150.0, 180.0, 300.0):
        assert abs(finish_probability(quantiles, deadline) - finish_share(days, deadline)) < 0.01


@pytest.mark.parametrize(
    ("p50", "p90", "available", "verdict", "text"),
    [
        (126.0, 180.0, 150.0, MISSES_P90, "meets at P50, misses at P90"),
        (160.0, 220.0, 150.0, MISSES_P50, "misses at P50"),
        (100.0, 150.0, 150.0, MEETS, "meets at P50 and P90"),
        (100.0, 150.0, None, NO_DEADLINE, "no deadline set"),
    ],
)
def test_deadline_check_verdicts(
    p50: float, p90: float, available: float | None, verdict: str, text: str
) -> None:
    check = deadline_check({"p10": 0.0, "p50": p50, "p90": p90}, available)
    assert (check.verdict, check.text, check.probability) == (verdict, text, None)


def test_deadline_check_probability_from_the_quantiles() -> None:
    quantiles = days_quantiles(FIVE)  # p50 30, p90 46
    check = deadline_check({"p50": 30.0, "p90": 46.0}, 42.0, quantiles)
    assert check.verdict == MISSES_P90
    assert check.probability == pytest.approx(0.8)  # (42 - 10) / 40
    assert check.probability_text == "80%"
    assert check.as_dict()["text"] == "meets at P50, misses at P90"
    assert deadline_check({"p50": 30.0, "p90": 46.0}, None, quantiles).probability is None


@pytest.mark.parametrize(
    ("probability", "text"), [(0.0, "0%"), (0.004, "<1%"), (0.995, ">99%"), (1.0, "100%")]
)
def test_probability_text_never_rounds_a_chance_to_certainty(probability: float, text: str) -> None:
    assert DeadlineCheck(10.0, 5.0, 8.0, probability).probability_text == text


def test_monte_carlo_keeps_quantiles_consistent_with_its_percentiles() -> None:
    result = monte_carlo(SMALL, seed=3, samples=2000)
    quantiles, days = result["training_days_quantiles"], result["training_days"]
    assert len(quantiles) == 101
    assert list(quantiles) == sorted(quantiles)
    assert_allclose([quantiles[10], quantiles[50], quantiles[90]],
                    [days["p10"], days["p50"], days["p90"]], rtol=1e-12)  # fmt: skip
    assert finish_probability(quantiles, days["p90"]) == pytest.approx(0.9, abs=1e-9)
    check = deadline_check(days, days["p50"], quantiles)
    assert check.verdict == MISSES_P90
    assert check.probability == pytest.approx(0.5, abs=1e-9)
