"""The input matrix both apps' API tests run: every field of every write endpoint, sent with
a NUL character and with text one character longer than its column.

On PostgreSQL either would be a ``DataError`` (a 500) if it reached a query; SQLite stores
both, so only a run with ``DATABASE_URL`` proves the point, though the answers are the same
on both. The fields come from each endpoint's input serializer, so a field added later is in
the matrix without anyone listing it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from django.db.models import Model
from rest_framework import serializers
from rest_framework.relations import ManyRelatedField
from rest_framework.test import APIClient

from lib.text import model_text_lengths

World = dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """One write: ``body`` is a valid request (``{}`` for a partial update), ``tables`` the
    models that must be left exactly as they were by a refused request."""

    name: str
    method: str
    url: Callable[[World], str]
    body: Callable[[World], dict[str, Any]]
    serializer: type[serializers.Serializer]
    tables: tuple[type[Model], ...]

    def send(self, api: APIClient, world: World, changes: dict[str, Any]) -> Any:
        body = self.body(world) | changes
        return getattr(api, self.method)(self.url(world), body)


def writable_fields(serializer: type[serializers.Serializer]) -> dict[str, serializers.Field]:
    return {name: f for name, f in serializer().fields.items() if not f.read_only}


def text_fields_with_limit(serializer: type[serializers.Serializer]) -> dict[str, int]:
    """The bounded text fields, with the bound the serializer applies (its own or its
    column's, see ``lib.inputs``)."""
    return {
        name: field.max_length
        for name, field in writable_fields(serializer).items()
        if isinstance(field, serializers.CharField) and field.max_length is not None
    }


def nul_cases(endpoints: Sequence[Endpoint]) -> Iterator[Any]:
    for endpoint in endpoints:
        for name in writable_fields(endpoint.serializer):
            yield pytest.param(endpoint, name, id=f"{endpoint.name}-{name}")


def long_cases(endpoints: Sequence[Endpoint]) -> Iterator[Any]:
    for endpoint in endpoints:
        for name, limit in text_fields_with_limit(endpoint.serializer).items():
            yield pytest.param(endpoint, name, limit, id=f"{endpoint.name}-{name}")


def nul_value(field: serializers.Field, valid: Any) -> Any:
    """``valid`` (or a stand-in) with a NUL: deep inside JSON, in an id of a list."""
    if isinstance(field, serializers.JSONField):
        inner = dict(valid) if isinstance(valid, dict) else {}
        return inner | {"notes": {"author": ["ok", "Ada\x00"]}}
    if isinstance(field, (ManyRelatedField, serializers.ListField)):
        return ["1\x00"]
    return f"{'' if valid is None else valid}\x00"


def long_value(field: serializers.Field, limit: int) -> str:
    if isinstance(field, serializers.URLField):
        prefix = "https://example.com/"
        return prefix + "p" * (limit + 1 - len(prefix))
    return "s" * (limit + 1)


def tables_snapshot(tables: Sequence[type[Model]]) -> list[list[dict[str, Any]]]:
    return [list(model._default_manager.order_by("pk").values()) for model in tables]


def refused_naming(response: Any, field: str, needle: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()
    assert field in body, body
    assert needle in " ".join(body[field]), body


def nul_refused(api: APIClient, world: World, endpoint: Endpoint, name: str) -> None:
    """A NUL in ``name`` is a 400 naming it, and nothing is written."""
    field = writable_fields(endpoint.serializer)[name]
    before = tables_snapshot(endpoint.tables)
    value = nul_value(field, endpoint.body(world).get(name))
    response = endpoint.send(api, world, {name: value})
    refused_naming(response, name, "Null characters are not allowed")
    assert tables_snapshot(endpoint.tables) == before


def long_refused(api: APIClient, world: World, endpoint: Endpoint, name: str, limit: int) -> None:
    """Text one character over ``limit`` is a 400 naming the field, and nothing is written."""
    field = writable_fields(endpoint.serializer)[name]
    before = tables_snapshot(endpoint.tables)
    response = endpoint.send(api, world, {name: long_value(field, limit)})
    refused_naming(response, name, f"no more than {limit} characters")
    assert tables_snapshot(endpoint.tables) == before


def column_bounds_kept(serializer: type[serializers.Serializer], model: type[Model]) -> list[str]:
    """Text fields of ``serializer`` that would let through more than ``model``'s column."""
    columns = model_text_lengths(model)
    problems = []
    for name, field in writable_fields(serializer).items():
        column = columns.get(field.source or name)
        if not isinstance(field, serializers.CharField) or column is None:
            continue
        if field.max_length is None or field.max_length > column:
            problems.append(f"{name}: {field.max_length} > {column}")
    return problems
