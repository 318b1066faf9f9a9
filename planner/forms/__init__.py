"""Forms of the planner pages: they parse input; services decide and write.

One module per subject; every public name is re-exported here, so ``from planner.forms
import ScenarioForm`` works wherever the form lives.
"""

from planner.common.forms import (
    MAX_TOKENS,
    DateInput,
    choice_field,
    planner_error_add,
    preset_label,
    quantity_format,
    quantity_parse,
    tokens_parse,
)
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
from planner.forms.comparisons import ComparisonSaveForm
from planner.forms.importing import MAX_UPLOAD_BYTES, ScenarioImportForm, ScenarioJsonForm
from planner.forms.prices import (
    OptionAttrsSelect,
    PriceChoice,
    PriceObject,
    price_choices,
    price_value,
)
from planner.forms.projects import ProjectEditForm, ProjectForm
from planner.scenarios.forms.scenarios import (
    CUSTOM,
    LAYOUT_FIELDS,
    MODEL_FIELDS,
    PRECISIONS,
    RECOMPUTE,
    ZERO_STAGES,
    ScenarioForm,
    preset_matching,
    presets_for_page,
    recipes_for_page,
)

__all__ = [
    "CUSTOM",
    "JUSTIFICATION_HELP",
    "LAYOUT_FIELDS",
    "MAX_CAPACITY_GPUS",
    "MAX_TOKENS",
    "MAX_UPLOAD_BYTES",
    "MODEL_FIELDS",
    "PRECISIONS",
    "RECOMPUTE",
    "ZERO_STAGES",
    "BudgetActionForm",
    "BudgetRequestForm",
    "CapacityForm",
    "ComparisonSaveForm",
    "DateInput",
    "OptionAttrsSelect",
    "PriceChoice",
    "PriceObject",
    "ProjectEditForm",
    "ProjectForm",
    "RequestChoice",
    "RunChoices",
    "ScenarioChoiceField",
    "ScenarioForm",
    "ScenarioImportForm",
    "ScenarioJsonForm",
    "choice_field",
    "initial_from",
    "planner_error_add",
    "preset_label",
    "preset_matching",
    "presets_for_page",
    "price_choices",
    "price_value",
    "quantity_format",
    "quantity_parse",
    "recipes_for_page",
    "run_label",
    "tokens_parse",
]
