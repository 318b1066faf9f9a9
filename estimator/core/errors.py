"""The one exception the estimator core raises for bad input."""

from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario field is missing, mistyped or out of range.

    Parameters
    ----------
    key : str
        Dotted path of the offending field, e.g. ``model.num_layers``.
    reason : str
        Why it is rejected, e.g. ``must be a positive integer, got -3``.
    """

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason
