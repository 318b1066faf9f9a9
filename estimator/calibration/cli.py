"""The calibration commands of ``python -m estimator`` (their parser; what they do is
:mod:`estimator.calibration.commands`)::

    python -m estimator calibrate [CALIBRATION_DIR] [--jobs 2] [--output docs/accuracy.md]
    python -m estimator calibrate --whole-runs-only [--whole-run-output PATH]
    python -m estimator accuracy [CALIBRATION_DIR] [--jobs 2] [--output docs/accuracy.md]
    python -m estimator accuracy --finetune-only

CALIBRATION_DIR defaults to ``../shared/calibration`` relative to the repository root and
must hold ``cases.jsonl`` and ``score.py``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from estimator.calibration.loading import ROOT
from estimator.core.wholerun import FIT_PATH as WHOLE_RUN_FIT

#: The subcommands this module adds.
COMMANDS = ("calibrate", "accuracy")
DEFAULT_CALIBRATION_DIR = ROOT.parent / "shared" / "calibration"
DEFAULT_REPORT = ROOT / "docs" / "accuracy.md"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``calibrate`` and ``accuracy`` to the command line's subcommands."""
    calibrate = commands.add_parser(
        "calibrate",
        help="refit every family and stack, cross-validate, write "
        "estimator/data/calibration.json and whole_run.json, then the accuracy report "
        "(what make accuracy runs)",
    )
    _report_arguments(calibrate)
    calibrate.add_argument(
        "--whole-runs-only",
        action="store_true",
        help="refit only the whole-run model (estimator/data/whole_run.json) and print its errors",
    )
    calibrate.add_argument(
        "--whole-run-output",
        type=Path,
        default=WHOLE_RUN_FIT,
        help="where --whole-runs-only writes the whole-run fit "
        "(default estimator/data/whole_run.json)",
    )
    accuracy = commands.add_parser(
        "accuracy", help="score the shipped fit and write docs/accuracy.md (no refit)"
    )
    _report_arguments(accuracy)
    accuracy.add_argument(
        "--finetune-only",
        action="store_true",
        help="print only the fine-tuning checks' table and summary",
    )


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "calibration_dir",
        nargs="?",
        type=Path,
        default=DEFAULT_CALIBRATION_DIR,
        help="directory holding score.py and cases.jsonl (default ../shared/calibration)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_REPORT,
        help="where the report goes (default docs/accuracy.md)",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="parallel estimator processes (default 2)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``calibrate`` or ``accuracy`` command; its exit status."""
    # Imported here: `python -m estimator estimate` starts hundreds of times per report,
    # and should not load the report's modules each time.
    from estimator.calibration import commands

    if args.command == "calibrate":
        if args.whole_runs_only:
            return commands.whole_runs(args.whole_run_output)
        return commands.calibrate(args.calibration_dir, args.output, args.jobs)
    if args.finetune_only:
        return commands.finetune()
    return commands.accuracy(args.calibration_dir, args.output, args.jobs)
