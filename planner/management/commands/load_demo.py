from django.core.management.base import BaseCommand

from planner.demo import demo_users_load
from planner.demo_project import planner_demo_load
from pricing.demo import pricing_demo_load


class Command(BaseCommand):
    help = "Load demo users and demo data (idempotent) and print the demo logins."

    def handle(self, *args: object, **options: object) -> None:
        users = demo_users_load()
        for line in pricing_demo_load() + planner_demo_load():
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS("Demo users (username / password):"))
        for user in users:
            self.stdout.write(f"  {user.description}")
