"""The Celery application. Workers start with ``celery -A trainplan worker``, the dispatcher's
schedule with ``celery -A trainplan beat``."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainplan.settings")

app = Celery("trainplan")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
