"""Writes of the scenarios room: projects, scenarios, runs and comparisons."""
