"""JSON with a depth limit (estimator.jsondepth): the one parser the API, the pages, the imports
and the CLI share."""

from __future__ import annotations

import json
import time

import pytest

from estimator.jsondepth import MAX_JSON_DEPTH, JsonTooDeep, json_depth_check, json_loads


def _nested(levels: int) -> str:
    return '{"a":' * (levels - 1) + "[1]" + "}" * (levels - 1)


def test_a_document_at_the_limit_parses_as_json_parses_it() -> None:
    text = _nested(MAX_JSON_DEPTH)
    assert json_loads(text) == json.loads(text)


def test_one_level_more_is_refused_naming_the_limit() -> None:
    with pytest.raises(JsonTooDeep, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        json_loads(_nested(MAX_JSON_DEPTH + 1))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "' + "[" * 500 + '"}',  # brackets inside a string are text
        '{"a": "\\"' + "{" * 500 + '"}',  # an escaped quote does not end the string
        '["\\\\", ' + "[" * 3 + "]" * 3 + "]",  # an escaped backslash does
    ],
    ids=["in-string", "escaped-quote", "escaped-backslash"],
)
def test_brackets_inside_strings_do_not_count(text: str) -> None:
    assert json_loads(text) == json.loads(text)


def test_a_hostile_document_is_refused_without_reading_it_all() -> None:
    text = "[" * 5_000_000
    began = time.process_time()
    with pytest.raises(JsonTooDeep):
        json_depth_check(text)
    assert time.process_time() - began < 1.0


def test_text_that_is_not_json_is_left_to_the_parser() -> None:
    with pytest.raises(json.JSONDecodeError):
        json_loads('{"a": ')
    with pytest.raises(ValueError, match="NaN"):
        json_loads("[NaN]", parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
