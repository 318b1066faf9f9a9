"""``python -m estimator calibrate`` and ``accuracy``: the commands and their flags, and
the report stops before scoring when the estimator does not run on the spread the fit
measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator.__main__ import main
from estimator.core import calibration

from .sample_cases import SHARED_CASES


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="needs ../shared/calibration")
def test_the_report_stops_before_scoring_when_the_constant_differs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(calibration, "UNMEASURED_SIGMA", calibration.UNMEASURED_SIGMA + 0.05)
    output = tmp_path / "accuracy.md"
    assert main(["accuracy", str(SHARED_CASES.parent), "--output", str(output)]) == 1
    assert not output.exists()
    assert "UNMEASURED_SIGMA" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("calibrate", ["--output", "--jobs", "--whole-runs-only", "--whole-run-output"]),
        ("accuracy", ["--output", "--jobs", "--finetune-only"]),
    ],
)
def test_calibrate_and_accuracy_are_commands_with_their_flags(
    command: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    assert "calibration_dir" in shown
    for flag in flags:
        assert flag in shown


def test_accuracy_prints_the_finetune_checks_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accuracy", "--finetune-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads(lines[-1])
    assert summary["asserted_ok"] == summary["asserted"]
    assert len(lines) == summary["rows"] + 1
