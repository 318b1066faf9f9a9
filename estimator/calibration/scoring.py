"""In-sample predictions through the shared ``score.py``, which runs the estimator's
command line (``<this python> -m estimator estimate``) on a case file, exactly as CI
would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from estimator.calibration.loading import PROJECT_CASES, ROOT


def run_score(
    calibration_dir: Path, jobs: int, layout: str, cases_file: Path | None = None
) -> tuple[dict[str, float], dict]:
    """Run score.py through the CLI on one case file.

    Parameters
    ----------
    calibration_dir : Path
        Directory holding ``score.py`` (and, by default, ``cases.jsonl``).
    jobs : int
        Parallel estimator processes score.py runs.
    layout : {"explicit", "auto"}
        Which cases score.py runs: stated layouts or ``"auto"`` ones.
    cases_file : Path, optional
        The JSON Lines file to score; ``calibration_dir / "cases.jsonl"`` by default.

    Returns
    -------
    predicted : dict of str to float
        Predicted tokens/s/GPU by case id. [tokens/s]
    summary : dict
        score.py's summary JSON.
    """
    cases_file = cases_file or calibration_dir / "cases.jsonl"
    command = [
        sys.executable, str(calibration_dir / "score.py"), str(cases_file),
        "--cmd", f"{sys.executable} -m estimator estimate", "--cwd", str(ROOT), "--json",
        "--jobs", str(jobs), "--layout", layout,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    predicted: dict[str, float] = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) >= 4 and parts[3].endswith("%"):
            predicted[parts[0]] = float(parts[2])
    return predicted, json.loads(lines[-1])


def in_sample(calibration_dir: Path, jobs: int) -> tuple[dict[str, float], list[dict]]:
    """Predictions of every case file through score.py (stated and auto apart).

    Parameters
    ----------
    calibration_dir : Path
        Directory holding ``score.py`` and ``cases.jsonl``.
    jobs : int
        Parallel estimator processes.

    Returns
    -------
    predicted : dict of str to float
        Predicted tokens/s/GPU by case id. [tokens/s]
    summaries : list of dict
        score.py's summary of each file and layout kind.
    """
    predicted: dict[str, float] = {}
    summaries = []
    files = [calibration_dir / "cases.jsonl", *sorted(PROJECT_CASES.glob("*.jsonl"))]
    for path in files:
        for layout in ("explicit", "auto"):
            found, summary = run_score(calibration_dir, jobs, layout, path)
            predicted.update(found)
            summaries.append({"file": path.name, "layout": layout, **summary})
    return predicted, summaries
