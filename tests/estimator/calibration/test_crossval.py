"""estimator.calibration.crossval: leaving a source out refits what it measured, from the
prior (no database)."""

from __future__ import annotations

from estimator.calibration.crossval import fit_without
from estimator.calibration.families import fit_all, fit_family
from estimator.calibration.stacks import Fit

from .sample_cases import two_family_cases


def test_leaving_a_source_out_refits_only_the_families_it_measured_from_the_prior() -> None:
    prepared = two_family_cases()
    whole = Fit(fit_all(prepared), {})
    ampere_sources = sorted({p.source for p in prepared if p.family == "nvidia-ampere"})
    left_out = ampere_sources[0]
    without = fit_without(lambda p: p.source == left_out, prepared, whole)
    # Hopper never saw the source: its fit is the whole one, untouched.
    assert without.families["nvidia-hopper"] == whole.families["nvidia-hopper"]
    # Ampere is refitted from its prior on the other source's cases alone.
    rest = [p for p in prepared if p.family == "nvidia-ampere" and p.source != left_out]
    assert without.families["nvidia-ampere"] == fit_family(
        "nvidia-ampere", rest, factors=without.factors
    )
    # A family whose only source is left out has no fit: it is predicted from its prior.
    only_hopper = {p.source for p in prepared if p.family == "nvidia-hopper"}
    assert len(only_hopper) == 1
    source = only_hopper.pop()
    alone = fit_without(lambda p: p.source == source, prepared, whole)
    assert "nvidia-hopper" not in alone.families
