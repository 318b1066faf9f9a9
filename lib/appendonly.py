"""Rows that are written once and never changed: the audit trails of both apps.

:class:`AppendOnlyQuerySet` refuses ``update()`` and ``delete()`` on a queryset and
:class:`AppendOnlyModel` refuses ``save()`` of an existing row and ``delete()``, each with
:class:`AppendOnlyRefused`. A row still goes when what it protects is deleted by a cascade
the schema allows; the trails avoid that with ``PROTECT`` or by naming their subject without
a foreign key.
"""

from __future__ import annotations

from typing import Any

from django.db import models


class AppendOnlyRefused(Exception):
    """An append-only row was about to be changed or deleted."""


REFUSAL = "the audit trail is append-only"


class AppendOnlyQuerySet(models.QuerySet[Any]):
    def update(self, **kwargs: object) -> int:
        raise self.model.append_only_error(REFUSAL)

    def delete(self) -> tuple[int, dict[str, int]]:
        raise self.model.append_only_error(REFUSAL)


class AppendOnlyModel(models.Model):
    """An abstract row that is inserted once: saving it again or deleting it is refused.

    ``append_only_error`` is what the refusal raises (:class:`AppendOnlyRefused` unless a
    model names its own, as the planner's audit trail does).
    """

    append_only_error: type[Exception] = AppendOnlyRefused

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise self.append_only_error(REFUSAL)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise self.append_only_error(REFUSAL)
