"""What every page's navigation shows of the budgets room: the counts of the user's inbox."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from planner.budgets.selectors import budget_inbox_counts


def inbox_counts(request: HttpRequest) -> dict[str, object]:
    """``inbox_counts`` for ``templates/base.html``, read only when a page shows it."""
    if not request.user.is_authenticated:
        return {}
    user = request.user
    return {"inbox_counts": SimpleLazyObject(lambda: budget_inbox_counts(user))}
