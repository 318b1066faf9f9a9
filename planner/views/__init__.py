"""Pages of the planner. The root urlconf uses ``home`` and ``healthz``; the rest are in
``planner.urls_web``."""

from planner.views.general import healthz, home

__all__ = ["healthz", "home"]
