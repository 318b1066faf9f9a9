"""The Celery application. Workers start with ``celery -A planner worker``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner.settings")

app = Celery("trainplan")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
