"""Text the database can store: no NUL character, and no more characters than its column.

PostgreSQL refuses both (psycopg's ``DataError``: "PostgreSQL text fields cannot contain NUL
(0x00) bytes", "value too long for type character varying(200)") where SQLite stores them,
so input that reaches a query unchecked is a 500 on one database and not on the other. Every
input path (the API's serializers through :mod:`lib.inputs`, CSV imports) asks
these functions first; Django's forms refuse NUL and apply model lengths by themselves.
"""

from __future__ import annotations

from typing import Any

from django.db import models

NUL = "\x00"
#: DRF's and Django's own wording, so every refusal of a NUL reads alike.
NUL_MESSAGE = "Null characters are not allowed."


def too_long_message(max_length: int) -> str:
    """The refusal of text over ``max_length`` characters, worded as DRF words it."""
    return f"Ensure this field has no more than {max_length} characters."


#: A path inside a JSON value as a linked list, (key, parent), so that the walk builds a
#: dotted path only for the one string that holds a NUL.
_Link = tuple[Any, Any] | None


def _dotted(link: _Link) -> str:
    keys = []
    while link is not None:
        key, link = link
        keys.append(str(key).replace(NUL, "\\x00"))
    return ".".join(reversed(keys))


def nul_path(value: Any) -> str | None:
    """Where a NUL character sits in a JSON-like value: ``""`` for the value itself, else
    a dotted path (``model.name``, ``layers.3``); ``None`` when there is none.

    Keys are checked as well as values. A loop, not recursion: the value may be nested as
    deep as the JSON parser allowed.
    """
    pending: list[tuple[Any, _Link]] = [(value, None)]
    while pending:
        item, link = pending.pop()
        if isinstance(item, str):
            if NUL in item:
                return _dotted(link)
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and NUL in key:
                    return _dotted((key, link))
                pending.append((child, (key, link)))
        elif isinstance(item, (list, tuple)):
            pending.extend((child, (index, link)) for index, child in enumerate(item))
    return None


def nul_problem(value: Any) -> str | None:
    """:data:`NUL_MESSAGE`, with the path inside a JSON value, or ``None`` when clean."""
    path = nul_path(value)
    if path is None:
        return None
    return f"{NUL_MESSAGE[:-1]} (at {path})." if path else NUL_MESSAGE


def text_problem(value: str, *, max_length: int | None) -> str | None:
    """Why the database cannot store ``value`` in a column of ``max_length``, or ``None``."""
    if NUL in value:
        return NUL_MESSAGE
    if max_length is not None and len(value) > max_length:
        return too_long_message(max_length)
    return None


def model_text_lengths(model: type[models.Model]) -> dict[str, int]:
    """The ``max_length`` of each of ``model``'s bounded text columns, by field name."""
    return {
        field.name: field.max_length
        for field in model._meta.get_fields()
        if isinstance(field, models.CharField) and field.max_length is not None
    }
