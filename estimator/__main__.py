"""Command line: ``python -m estimator estimate [--uncertainty] FILE|-``, ``search FILE|-
[--top K] [--objective time|cost]``, ``levers FILE|-``, ``catalog`` and ``schema-docs
[--write]`` (docs/scenario-keys.md from the scenario schema); ``calibrate`` and ``accuracy``
refit the calibration and write its accuracy report, docs/accuracy.md.

FILE is a scenario or the planner's "Export JSON" document as it is (the scenario inside
is read). Bad input exits 2 with one line on stderr naming the key and the reason; nothing
goes to stdout then.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from estimator.calibration import cli as calibration_cli
from estimator.core import ScenarioError, estimate, load_catalog, search
from estimator.core.envelope import scenario_of
from estimator.core.estimate import stack_alternatives
from estimator.core.levers import levers
from estimator.core.montecarlo import estimate_with_uncertainty
from estimator.core.schema_docs import DOC_PATH, render
from estimator.jsondepth import JsonTooDeep, json_loads

EXIT_BAD_INPUT = 2
NESTED_TOO_DEEPLY = "not valid JSON: nested too deeply"


def _read(path: str) -> Any:
    """The scenario JSON in ``path`` (``-``: stdin), bare or in the planner's export;
    :class:`ScenarioError` if unreadable."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise ScenarioError("scenario", f"cannot read {path}: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ScenarioError("scenario", f"not UTF-8 text (byte {exc.start})") from None
    return scenario_of(_parse(text))


def _parse(text: str) -> Any:
    try:
        return json_loads(text)
    except JsonTooDeep as exc:
        raise ScenarioError("scenario", f"not valid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            "scenario", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError:
        raise ScenarioError("scenario", NESTED_TOO_DEEPLY) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ScenarioError("scenario", f"not valid JSON: {exc}") from None


def _estimate(path: str, uncertainty: bool, seed: int, samples: int) -> int:
    data = _read(path)
    if uncertainty:
        result = estimate_with_uncertainty(data, seed=seed, samples=samples)
    else:
        result = estimate(data)
    result["software_stack"] = stack_alternatives(data, result)
    sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
    return 0


def _search(path: str, top_k: int, objective: str) -> int:
    result = search(_read(path), top_k=top_k, objective=objective)
    sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
    return 0


def _levers(path: str) -> int:
    result = levers(_read(path))
    sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
    return 0


def _catalog() -> int:
    for spec in load_catalog().values():
        peaks = " ".join(f"{p}={v:g}" for p, v in spec.peak_tflops.items())
        sys.stdout.write(
            f"{spec.id:<16} {spec.memory_gib:>5g} GiB "
            f"{spec.memory_bandwidth_tbs:>6g} TB/s  {peaks}  [{spec.name}]\n"
        )
    return 0


def _schema_docs(write: bool) -> int:
    """The scenario keys page on stdout, or written over docs/scenario-keys.md."""
    if write:
        DOC_PATH.write_text(render(), encoding="utf-8")
    else:
        sys.stdout.write(render())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m estimator", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("estimate", help="estimate one scenario (JSON file or '-')")
    run.add_argument("scenario", help="scenario JSON file, or '-' for stdin")
    run.add_argument("--uncertainty", action="store_true", help="add the Monte Carlo's P10/P50/P90")
    run.add_argument("--seed", type=int, default=1, help="Monte Carlo seed (default 1)")
    run.add_argument("--samples", type=int, default=4000, help="Monte Carlo samples (4000)")
    find = commands.add_parser("search", help="best layouts of a scenario (JSON file or '-')")
    find.add_argument("scenario", help="scenario JSON file, or '-' for stdin")
    find.add_argument("--top", type=int, default=5, help="layouts to return (default 5)")
    find.add_argument("--objective", choices=("time", "cost"), default="time")
    commands.add_parser("catalog", help="list the accelerator catalog, one line each")
    lever = commands.add_parser(
        "levers", help="single changes that save time or money (JSON file or '-')"
    )
    lever.add_argument("scenario", help="scenario JSON file, or '-' for stdin")
    docs = commands.add_parser("schema-docs", help="docs/scenario-keys.md from the schema")
    docs.add_argument("--write", action="store_true", help=f"write it over {DOC_PATH.name}")
    calibration_cli.add_commands(commands)
    args = parser.parse_args(argv)
    try:
        return _command(args)
    except RecursionError:  # a value nested deeper than the estimator walks it
        return _bad_input(ScenarioError("scenario", NESTED_TOO_DEEPLY))
    except ScenarioError as exc:
        return _bad_input(exc)


def _command(args: argparse.Namespace) -> int:
    if args.command in calibration_cli.COMMANDS:
        return calibration_cli.run(args)
    if args.command == "search":
        return _search(args.scenario, args.top, args.objective)
    if args.command == "estimate":
        return _estimate(args.scenario, args.uncertainty, args.seed, args.samples)
    if args.command == "levers":
        return _levers(args.scenario)
    if args.command == "schema-docs":
        return _schema_docs(args.write)
    return _catalog()


def _bad_input(exc: ScenarioError) -> int:
    """One line on stderr naming the key and the reason; nothing on stdout."""
    sys.stderr.write(f"{exc.key}: {exc.reason}\n")
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
