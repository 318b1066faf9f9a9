"""Forms of the planner pages: they parse input; services decide and write.

One module per subject; every public name is re-exported here, so ``from planner.forms
import BudgetRequestForm`` works wherever the form lives.
"""

from planner.forms.budgets import (
    JUSTIFICATION_HELP,
    BudgetActionForm,
    BudgetRequestForm,
    RequestChoice,
    RunChoices,
    initial_from,
    run_label,
)
from planner.forms.capacity import MAX_CAPACITY_GPUS, CapacityForm, ScenarioChoiceField

__all__ = [
    "JUSTIFICATION_HELP",
    "MAX_CAPACITY_GPUS",
    "BudgetActionForm",
    "BudgetRequestForm",
    "CapacityForm",
    "RequestChoice",
    "RunChoices",
    "ScenarioChoiceField",
    "initial_from",
    "run_label",
]
