import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pricing", "0003_organisation_data"),
    ]

    operations = [
        migrations.AlterField(
            model_name="vendorquote",
            name="organisation",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="vendor_quotes",
                to="planner.organisation",
            ),
        ),
        migrations.AlterField(
            model_name="onpremprofile",
            name="organisation",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="onprem_profiles",
                to="planner.organisation",
            ),
        ),
        migrations.AddConstraint(
            model_name="onpremprofile",
            constraint=models.UniqueConstraint(
                fields=("organisation", "name"), name="onprem_profile_unique_name"
            ),
        ),
    ]
