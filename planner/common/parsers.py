"""Request parsers of the planner endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested deeper than Python's parser follows is a 400 too.

    (The stock parser turns only ``ValueError`` into a 400, so ``[[[[...]]]]`` a hundred
    thousand levels deep would be a 500.)
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply") from exc


PLANNER_PARSERS = [JSONParser, parsers.FormParser, parsers.MultiPartParser]
