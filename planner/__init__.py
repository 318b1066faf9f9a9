"""The planning app: projects, scenarios and runs, budgets and capacity plans."""
