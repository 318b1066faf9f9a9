"""TrainPlan's project package (settings, urls, Celery app) and the planning app."""

from planner.celery import app as celery_app

__all__ = ("celery_app",)
