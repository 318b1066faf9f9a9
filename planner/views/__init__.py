"""Pages of the planner. The root urlconf uses ``home`` (the health probes are in
``trainplan.health``); the rest are in ``planner.urls_web``."""

from planner.views.budgets import (
    budget_approve,
    budget_close,
    budget_create,
    budget_csv,
    budget_detail,
    budget_edit,
    budget_list,
    budget_pdf,
    budget_reject,
    budget_request_changes,
    budget_snapshot,
    budget_submit,
    budget_xlsx,
)
from planner.views.general import home

__all__ = [
    "budget_approve",
    "budget_close",
    "budget_create",
    "budget_csv",
    "budget_detail",
    "budget_edit",
    "budget_list",
    "budget_pdf",
    "budget_reject",
    "budget_request_changes",
    "budget_snapshot",
    "budget_submit",
    "budget_xlsx",
    "home",
]
