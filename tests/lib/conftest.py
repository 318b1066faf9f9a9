"""The lib tests borrow the planner's fixtures: its models are what the plumbing updates,
audits and runs as jobs."""

from tests.planner.conftest import *  # noqa: F403
