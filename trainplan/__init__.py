"""TrainPlan's Django project package: settings, urls, the Celery app, wsgi and health."""

from trainplan.celery import app as celery_app

__all__ = ("celery_app",)
