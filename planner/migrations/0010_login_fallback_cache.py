"""The database cache table the login counters fall back to while Redis is down
(``CACHES["login_fallback"]``, lib.cacheguard): created here so that ``migrate`` is the
one setup step, on every database, whether or not this deployment has Redis."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.db import migrations

TABLE = "trainplan_login_fallback"


def create(apps: Any, schema_editor: Any) -> None:
    call_command("createcachetable", TABLE, database=schema_editor.connection.alias, verbosity=0)


def drop(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("planner", "0009_notification_next_attempt")]

    operations = [migrations.RunPython(create, drop)]
