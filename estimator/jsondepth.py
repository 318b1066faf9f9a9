"""JSON text parsed with a depth limit: one helper for the API's parser, the page JSON
editors, the scenario import and the estimator's CLI.

Python's ``json`` parser recurses once per level, so ``[[[[...]]]]`` a few thousand levels
deep raises ``RecursionError`` (a 500, or an "internal error" on a worker), and a value a
few hundred levels deep parses but breaks whatever walks it later. No document TrainPlan
reads nests deeper than a handful of levels (a scenario: ``model.moe.num_experts``; an
export: ``scenario.model.moe``), so anything past :data:`MAX_JSON_DEPTH` is refused before
parsing, with the depth named. Standard library only, on the ground floor beside the core,
so that the estimator's CLI and the web (the API's parser, the pages' JSON editors and
imports) share it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

#: Levels of arrays and objects a document may nest. [levels]
MAX_JSON_DEPTH = 32

# A JSON string, escapes included: its brackets are text, not structure.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JsonTooDeep(ValueError):
    """A document nested deeper than allowed (a ``ValueError``, as ``json``'s own errors)."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"nested deeper than {max_depth} levels")
        self.max_depth = max_depth


def json_depth_check(text: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonTooDeep` when the arrays and objects of ``text`` nest deeper than
    ``max_depth``; text that is not JSON is left to the parser to report.

    Brackets inside strings are skipped; the scan stops at the first level too many, so a
    hostile ``[[[[...`` costs ``max_depth`` steps, and an ordinary document one pass.
    """
    depth = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > max_depth:
                raise JsonTooDeep(max_depth)
        else:
            depth -= 1


def json_loads(
    text: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    parse_constant: Callable[[str], Any] | None = None,
) -> Any:
    """``json.loads`` of ``text`` after :func:`json_depth_check`.

    Raises
    ------
    JsonTooDeep
        Nested deeper than ``max_depth``.
    json.JSONDecodeError
        Not JSON (both are ``ValueError``).
    """
    json_depth_check(text, max_depth)
    return json.loads(text, parse_constant=parse_constant)
