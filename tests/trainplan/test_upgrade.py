"""A database made before the house was rebuilt upgrades with all its data readable.

``data/trainplan-at-44db6e6.sqlite3.gz`` is the embedded database of main at 44db6e6 (the
last commit with organisations inside the planner app), migrated there and filled there with
``manage.py load_demo`` and one approved budget request. Migrating it with today's code must
keep every row and make it readable through today's models; on the test database (PostgreSQL
in CI) the move of organisations is also taken back and made again with rows in place.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from organisations.models import Membership, Organisation
from planner.scenarios.models import Project
from pricing.models import PriceBook

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).parent / "data" / "trainplan-at-44db6e6.sqlite3.gz"

READ_EVERYTHING = """
import json
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from organisations.models import Organisation
from planner.models import BudgetRequest

rows = {}
for model in apps.get_models():
    records = list(model.objects.all())
    for record in records:
        str(record)  # every field loads; foreign keys resolve below
        for field in model._meta.concrete_fields:
            if field.is_relation and getattr(record, field.attname) is not None:
                getattr(record, field.name)
    rows[model._meta.db_table] = len(records)
request = BudgetRequest.objects.get()
organisation = Organisation.objects.get()
print(json.dumps({
    "rows": rows,
    "request": [request.state, request.project.organisation.name],
    "members": sorted({m.user.username for m in organisation.memberships.all()}),
    "quotes": [q.organisation.name for q in organisation.vendor_quotes.all()],
    "onprem": [p.organisation.name for p in organisation.onprem_profiles.all()],
    "content_types": sorted(
        ContentType.objects.filter(model__in=["organisation", "membership"])
        .values_list("app_label", flat=True)
    ),
}))
"""


def _manage(var_dir: Path, *args: str) -> str:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    environment |= {"TRAINPLAN_VAR_DIR": str(var_dir), "DJANGO_DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _table_rows(database: Path) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        tables = [
            name
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        ]
        return {name: db.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] for name in tables}  # noqa: S608


def test_a_database_of_the_old_layout_upgrades_with_every_row_readable(tmp_path: Path) -> None:
    database = tmp_path / "trainplan.sqlite3"
    with gzip.open(SNAPSHOT) as packed, database.open("wb") as unpacked:
        shutil.copyfileobj(packed, unpacked)
    before = _table_rows(database)

    _manage(tmp_path, "migrate", "--noinput")
    assert "[ ]" not in _manage(tmp_path, "showmigrations", "--plan")
    found = json.loads(_manage(tmp_path, "shell", "-c", READ_EVERYTHING).splitlines()[-1])

    after = _table_rows(database)
    migrations_applied = after.pop("django_migrations") - before.pop("django_migrations")
    # organisations.0001, pricing.0008, planner.0007, planner.0008 (the stored sign-off packs),
    # planner.0009 (a notification's next attempt) and 0010 (the login counters' fallback table)
    assert migrations_applied == 6
    assert after.pop("trainplan_login_fallback") == 0
    # No row lost or added, but the content type and four permissions of planner.0008's model.
    added = {"django_content_type": 1, "auth_permission": 4}
    assert {table: after[table] - rows for table, rows in before.items()} == {
        table: added.get(table, 0) for table in before
    }
    assert all(found["rows"][table] == after[table] for table in found["rows"])
    assert found["rows"]["planner_organisation"] == before["planner_organisation"] == 1
    assert found["rows"]["planner_membership"] == before["planner_membership"] == 6
    assert found["request"] == ["approved", "Acme AI Research"]
    assert found["members"] == ["finn", "ivan", "maya"]
    assert found["quotes"] == found["onprem"] == ["Acme AI Research"]  # the demo's examples
    assert found["content_types"] == ["organisations", "organisations"]


LAST_BEFORE_MOVE = [
    ("planner", "0006_run_levers_sensitivity"),
    ("pricing", "0007_onprem_grid_intensity"),
]
BEFORE_MOVE: list[tuple[str, str | None]] = [*LAST_BEFORE_MOVE, ("organisations", None)]


@pytest.mark.django_db(transaction=True)
def test_moving_organisations_out_of_the_planner_keeps_rows_and_permissions() -> None:
    executor = MigrationExecutor(connection)
    permission_count = Permission.objects.filter(content_type__app_label="organisations").count()
    executor.migrate(BEFORE_MOVE)
    try:
        old = executor.loader.project_state(LAST_BEFORE_MOVE).apps
        user = old.get_model("auth", "User").objects.create(username="legacy")
        globex = old.get_model("planner", "Organisation").objects.create(
            name="Globex", slug="globex"
        )
        old.get_model("planner", "Membership").objects.create(
            organisation=globex, user=user, role="approver"
        )
        old.get_model("planner", "Project").objects.create(
            organisation=globex, name="P", owner=user, currency="USD"
        )
        old.get_model("pricing", "PriceBook").objects.create(
            name="Private",
            organisation=globex,
            currency="USD",
            source="s",
            status="draft",
            fetched_at=timezone.now(),
        )
        old_types = old.get_model("contenttypes", "ContentType").objects
        assert old_types.filter(app_label="planner", model="organisation").exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())

    organisation = Organisation.objects.get(name="Globex")
    assert Membership.objects.get(organisation=organisation).user.username == "legacy"
    assert Project.objects.get(organisation=organisation).owner == User.objects.get(
        username="legacy"
    )
    assert PriceBook.objects.get(organisation=organisation).name == "Private"
    moved = ContentType.objects.get_for_model(Organisation)
    assert moved.app_label == "organisations"
    assert not ContentType.objects.filter(app_label="planner", model="organisation").exists()
    assert (
        Permission.objects.filter(content_type__app_label="organisations").count()
        == permission_count
    )
