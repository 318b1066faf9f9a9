"""Point the pricing models at ``organisations.Organisation``.

State only: the organisation table (``planner_organisation``) and its foreign keys stay as
they are; only the app that owns the model changed.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("organisations", "0001_initial"),
        ("pricing", "0007_onprem_grid_intensity"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="onpremprofile",
                    name="organisation",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="onprem_profiles",
                        to="organisations.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="priceauditevent",
                    name="organisation",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="price_audit_events",
                        to="organisations.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="pricebook",
                    name="organisation",
                    field=models.ForeignKey(
                        blank=True,
                        help_text="The organisation whose private book this is; empty: public, for everyone",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="price_books",
                        to="organisations.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="vendorquote",
                    name="organisation",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="vendor_quotes",
                        to="organisations.organisation",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
