"""Request parsers of the planner endpoints."""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

from estimator.jsondepth import json_loads


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with the depth limit of :mod:`estimator.jsondepth`: a body nested deeper
    is a 400 naming the limit, before Python's recursive parser sees it.

    (The stock parser would parse ``[[[...]]]`` hundreds of levels deep, for later code to
    fail on, and raise ``RecursionError``, a 500, past about a thousand.)
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        constant = json.strict_constant if self.strict else None
        try:
            text = codecs.getreader(encoding)(stream).read()
            return json_loads(text, parse_constant=constant)
        except ValueError as exc:  # not JSON, too deep, or not text in ``encoding``
            raise ParseError(f"JSON parse error - {exc}") from exc
        except RecursionError as exc:  # within the limit, yet deeper than Python's stack
            raise ParseError("JSON parse error - nested too deeply") from exc


PLANNER_PARSERS = [JSONParser, parsers.FormParser, parsers.MultiPartParser]
