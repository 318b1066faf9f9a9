from django.core.management.base import BaseCommand

from pricing.services import accelerator_catalog_sync


class Command(BaseCommand):
    help = (
        "Create or update the accelerators from the estimator's catalog "
        "(estimator/data/accelerators.csv); custom SKUs are left as they are."
    )

    def handle(self, *args: object, **options: object) -> None:
        for line in accelerator_catalog_sync().lines():
            self.stdout.write(line)
