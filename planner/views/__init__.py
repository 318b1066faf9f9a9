"""Pages of the planner not yet in a room; ``planner.urls_web`` routes them."""

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
]
