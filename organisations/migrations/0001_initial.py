"""Organisations and memberships, taken over from the planner app.

The tables exist already (created by ``planner.0001`` and ``planner.0002`` as
``planner_organisation`` and ``planner_membership``), so this migration only records the
models in the new app's state, and moves their content types (and with them permissions and
admin history) from the planner to this app.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED_MODELS = ("organisation", "membership")


def _content_types_relabel(apps, from_app: str, to_app: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED_MODELS:
        if not content_type.objects.filter(app_label=to_app, model=model).exists():
            content_type.objects.filter(app_label=from_app, model=model).update(app_label=to_app)


def content_types_move(apps, schema_editor) -> None:
    _content_types_relabel(apps, "planner", "organisations")


def content_types_return(apps, schema_editor) -> None:
    _content_types_relabel(apps, "organisations", "planner")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("planner", "0002_budget_requests"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Organisation",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("slug", models.SlugField(max_length=60, unique=True)),
                        (
                            "base_currency",
                            models.CharField(
                                default="USD",
                                help_text="Currency that comparisons convert into",
                                max_length=3,
                            ),
                        ),
                        (
                            "two_approvals_above",
                            models.DecimalField(
                                blank=True,
                                decimal_places=2,
                                help_text="Budget requests above this amount (base currency) need two approvers",
                                max_digits=18,
                                null=True,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "planner_organisation",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "role",
                            models.CharField(
                                choices=[
                                    ("requester", "Requester"),
                                    ("approver", "Approver"),
                                    ("pricing_admin", "Pricing admin"),
                                    ("viewer", "Viewer"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "organisation",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="organisations.organisation",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "planner_membership",
                        "ordering": ["organisation__name", "user__username", "role"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("organisation", "user", "role"),
                                name="membership_unique_role",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_move, content_types_return),
    ]
