"""The base of every input serializer of both apps: text the database cannot store is a 400.

One rule for every field (:mod:`lib.text`), not a check per field:

- a NUL character anywhere in a field's raw value (text, a slug to look up, a key or string
  inside JSON) is refused with the field named, before any field parses it, so no lookup
  ever sends it to PostgreSQL;
- a text field without ``max_length`` takes its column's ``max_length`` from
  ``storage_model``, so over-long text is a 400, not a ``DataError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.validators import MaxLengthValidator
from django.db import models
from rest_framework import serializers

from lib.text import model_text_lengths, nul_problem, too_long_message


def _raw_values(data: Mapping[str, Any], name: str) -> list[Any]:
    """Every value posted for ``name`` (a form body may repeat a key)."""
    getlist = getattr(data, "getlist", None)
    if getlist is not None:
        return list(getlist(name))
    return [data[name]] if name in data else []


def _bound_length(field: serializers.Field, max_length: int) -> None:
    field.max_length = max_length  # type: ignore[attr-defined]
    field.validators.append(MaxLengthValidator(max_length, message=too_long_message(max_length)))


class StorableInput(serializers.Serializer):
    """An input serializer whose values PostgreSQL can store (see the module's docstring).

    ``storage_model`` names the model the input is saved as, if there is one: its bounded
    text columns give their length to the fields of the same source that lack one.
    """

    storage_model: ClassVar[type[models.Model] | None] = None

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        lengths = model_text_lengths(self.storage_model) if self.storage_model else {}
        for name, field in fields.items():
            column = lengths.get(field.source or name)
            if isinstance(field, serializers.CharField) and field.max_length is None and column:
                _bound_length(field, column)
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = self.nul_errors(data)
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)

    def nul_errors(self, data: Mapping[str, Any]) -> dict[str, list[str]]:
        """``{field: [message]}`` for each writable field whose raw value holds a NUL."""
        errors = {}
        for name, field in self.fields.items():
            if field.read_only:
                continue
            for value in _raw_values(data, name):
                problem = nul_problem(value)
                if problem is not None:
                    errors[name] = [problem]
                    break
        return errors
