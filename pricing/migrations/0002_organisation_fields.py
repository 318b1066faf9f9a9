import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pricing", "0001_initial"),
        ("planner", "0004_run_outbox_and_notifications"),
    ]

    operations = [
        migrations.AddField(
            model_name="pricebook",
            name="organisation",
            field=models.ForeignKey(
                blank=True,
                help_text="The organisation whose private book this is; empty: public, for everyone",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="price_books",
                to="planner.organisation",
            ),
        ),
        migrations.AddField(
            model_name="vendorquote",
            name="organisation",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="vendor_quotes",
                to="planner.organisation",
            ),
        ),
        migrations.AddField(
            model_name="onpremprofile",
            name="organisation",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="onprem_profiles",
                to="planner.organisation",
            ),
        ),
        migrations.AlterField(
            model_name="onpremprofile",
            name="name",
            field=models.CharField(max_length=200),
        ),
    ]
