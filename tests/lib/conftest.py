"""The lib tests borrow the planner's project fixture: a model to update and audit."""

from tests.planner.conftest import organisation, project, requester

__all__ = ["organisation", "project", "requester"]
