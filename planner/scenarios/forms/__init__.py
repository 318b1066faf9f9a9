"""Forms of the scenarios room: they parse input; services decide and write.

One module per subject; every public name is re-exported here, so ``from
planner.scenarios.forms import ScenarioForm`` works wherever the form lives.
"""

from planner.scenarios.forms.comparisons import ComparisonSaveForm
from planner.scenarios.forms.fields import (
    CUSTOM,
    LAYOUT_FIELDS,
    MODEL_FIELDS,
    PRECISIONS,
    RECOMPUTE,
    ZERO_STAGES,
)
from planner.scenarios.forms.importing import (
    MAX_UPLOAD_BYTES,
    ScenarioImportForm,
    ScenarioJsonForm,
)
from planner.scenarios.forms.prices import (
    OptionAttrsSelect,
    PriceChoice,
    PriceObject,
    price_choices,
    price_value,
)
from planner.scenarios.forms.projects import ProjectEditForm, ProjectForm
from planner.scenarios.forms.scenarios import (
    ScenarioForm,
    preset_matching,
    presets_for_page,
    recipes_for_page,
)

__all__ = [
    "CUSTOM",
    "LAYOUT_FIELDS",
    "MAX_UPLOAD_BYTES",
    "MODEL_FIELDS",
    "PRECISIONS",
    "RECOMPUTE",
    "ZERO_STAGES",
    "ComparisonSaveForm",
    "OptionAttrsSelect",
    "PriceChoice",
    "PriceObject",
    "ProjectEditForm",
    "ProjectForm",
    "ScenarioForm",
    "ScenarioImportForm",
    "ScenarioJsonForm",
    "preset_matching",
    "presets_for_page",
    "price_choices",
    "price_value",
    "recipes_for_page",
]
