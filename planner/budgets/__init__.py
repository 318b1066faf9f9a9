"""The budgets room: budget requests, their rules and warnings, snapshot and sign-off pack."""
