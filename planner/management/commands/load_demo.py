from django.core.management.base import BaseCommand, CommandParser

from planner.demo import demo_users_load
from planner.demo_project import DEMO_WAIT_S, planner_demo_load
from pricing.demo import pricing_demo_load


class Command(BaseCommand):
    help = "Load demo users and demo data (idempotent) and print the demo logins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--wait-seconds",
            type=float,
            default=DEMO_WAIT_S,
            help="how long to wait for real workers to finish the demo runs before "
            f"submitting the demo budget request (default {DEMO_WAIT_S:g})",
        )

    def handle(self, *args: object, **options: object) -> None:
        users = demo_users_load()
        wait_s = float(options["wait_seconds"])  # type: ignore[arg-type]
        for line in pricing_demo_load() + planner_demo_load(wait_s=wait_s):
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS("Demo users (username / password):"))
        for user in users:
            self.stdout.write(f"  {user.description}")
