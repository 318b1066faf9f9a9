"""Forms of the planner pages not yet in a room."""

from planner.forms.capacity import MAX_CAPACITY_GPUS, CapacityForm, ScenarioChoiceField

__all__ = ["MAX_CAPACITY_GPUS", "CapacityForm", "ScenarioChoiceField"]
