"""What every room of the planner shares: errors, roles, labels, access checks, the audit
trail, and the plumbing of forms, pages and the API."""
