"""The calibration cases: reading them, which of them count, and what each one ran on.

* The cases are the shared ones (``../shared/calibration/cases.jsonl``) and the project's
  (``estimator/calibration/cases/*.jsonl``), in the same JSON Lines format.
* A case's *source* is the publication it comes from: its ``source_group`` (one README
  at one commit, one MLPerf round, one paper; the project's cases carry one), else the
  first word of its id (``foundry``, ``narayanan21``, ``nanotron``...), so the rows of
  one publication stand or fall together.
* A case's *stack* is the software it ran on (:data:`estimator.core.frameworks.STACKS`):
  its ``stack``, else its source's (:data:`SHARED_SOURCE_STACKS`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estimator.core import ScenarioError, validate_scenario
from estimator.core.frameworks import STACKS
from estimator.core.scenario import Scenario

#: The repository root (the report runs the command line from there).
ROOT = Path(__file__).resolve().parents[2]
#: The project's case files (``*.jsonl``), beside the shared ones.
PROJECT_CASES = Path(__file__).resolve().parent / "cases"

#: Flags that keep a case out of the fit and the scores: the scenario cannot express it
#: (int8 training), or another publication of the same team contradicts its figure (the case
#: says how in ``excluded_because``).
EXCLUDED_FLAGS = ("int8_training", "contradicted_by_publication")


def load_cases(shared_file: Path, project_dir: Path = PROJECT_CASES) -> list[dict[str, Any]]:
    """Every case of the shared file and of the project's ``*.jsonl`` files, in order."""
    files = [shared_file, *sorted(project_dir.glob("*.jsonl"))]
    cases = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                case["_file"] = path.name
                cases.append(case)
    return cases


def unscored_reason(case: dict[str, Any]) -> str | None:
    """Why a case does not count (None when it does): no measured throughput, an
    excluding flag, or a scenario the estimator refuses (e.g. an accelerator it lacks)."""
    if not case.get("measured", {}).get("tokens_per_s_per_gpu"):
        return "no measured tokens/s"
    flags = set(case.get("flags") or ()) & set(EXCLUDED_FLAGS)
    if flags:
        return f"flag {sorted(flags)[0]}"
    try:
        validate_scenario(case["scenario"])
    except ScenarioError as error:
        return f"{error.key}: {error.reason}"
    return None


def scored(case: dict[str, Any]) -> bool:
    """Whether a case counts (see :func:`unscored_reason`)."""
    return unscored_reason(case) is None


def source_of(case: dict[str, Any]) -> str:
    """The publication a case comes from: its ``source_group`` (one README at one commit,
    one MLPerf round, one paper), else the first word of its id."""
    return str(case.get("source_group") or str(case["id"]).split("-", 1)[0])


#: The software stack of each source of the shared file (its cases carry no ``stack``):
#: llm-foundry is Composer on PyTorch FSDP; the Megatron-LM README is Megatron-Core;
#: nanotron is nanotron; Narayanan et al. 2021 ran the 2021 Megatron-LM.
SHARED_SOURCE_STACKS = {
    "foundry": "pytorch-native",
    "megatron": "megatron-core",
    "nanotron": "nanotron",
    "narayanan21": "megatron-2021",
}


def stack_of(case: dict[str, Any]) -> str:
    """The software stack a case ran on: its ``stack``, else its source's
    (:data:`SHARED_SOURCE_STACKS`)."""
    stack = case.get("stack") or SHARED_SOURCE_STACKS.get(source_of(case))
    if stack not in STACKS:
        raise ValueError(f"case {case['id']}: no known software stack ({stack!r})")
    return str(stack)


@dataclasses.dataclass
class Prepared:
    """A stated-layout case with its validated scenario, ready to evaluate quickly."""

    case: dict[str, Any]
    scenario: Scenario
    measured: float

    @property
    def family(self) -> str:
        return self.scenario.cluster.spec.family

    @property
    def source(self) -> str:
        return source_of(self.case)

    @property
    def stack(self) -> str:
        return self.scenario.stack


def on_stack(case: dict[str, Any]) -> Scenario:
    """The case's validated scenario, run at the stack it was measured on."""
    return dataclasses.replace(validate_scenario(case["scenario"]), stack=stack_of(case))


def prepare(cases: Sequence[dict[str, Any]]) -> list[Prepared]:
    """The stated-layout cases that count, validated once."""
    return [
        Prepared(c, on_stack(c), float(c["measured"]["tokens_per_s_per_gpu"]))
        for c in cases
        if scored(c) and c["scenario"].get("parallelism") != "auto"
    ]


#: Key suffix of a case's prediction with its layout left to the search.
AUTO_SUFFIX = "@auto"


def as_auto(case: dict[str, Any]) -> dict[str, Any]:
    """The case with ``"parallelism": "auto"`` (its stated layout not imposed)."""
    return {**case, "scenario": {**case["scenario"], "parallelism": "auto"}}


def family_of(case: dict[str, Any]) -> str:
    """The accelerator family of a case's scenario.

    Parameters
    ----------
    case : dict
        A case in the calibration format.

    Returns
    -------
    str
    """
    return validate_scenario(case["scenario"]).cluster.spec.family
