"""Hand Organisation and Membership over to the ``organisations`` app.

State only: the tables (``planner_organisation``, ``planner_membership``), their rows,
constraints and foreign keys stay as they are; ``organisations.0001`` now owns them.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("organisations", "0001_initial"),
        ("planner", "0006_run_levers_sensitivity"),
        ("pricing", "0008_organisations_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="membership",
                    name="membership_unique_role",
                ),
                migrations.AlterField(
                    model_name="project",
                    name="organisation",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="projects",
                        to="organisations.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="capacityplan",
                    name="organisation",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="capacity_plans",
                        to="organisations.organisation",
                    ),
                ),
                migrations.RemoveField(
                    model_name="membership",
                    name="organisation",
                ),
                migrations.RemoveField(
                    model_name="membership",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="Organisation",
                ),
                migrations.DeleteModel(
                    name="Membership",
                ),
            ],
            database_operations=[],
        ),
    ]
