"""TrainPlan estimator core: pure Python + numpy, no Django.

Public API: :func:`estimate`, :func:`validate_scenario`, :class:`ScenarioError`,
:func:`load_catalog` and :class:`AcceleratorSpec`; the layout search is :func:`search`
(:func:`search_chunk` and :func:`merge_search_results` split it into mergeable slices);
the per-layout formulas for a layout search are :class:`Layouts` and :func:`evaluate_layouts`.
"""

from estimator.core.catalog import AcceleratorSpec, load_catalog
from estimator.core.errors import ScenarioError
from estimator.core.estimate import estimate
from estimator.core.explicit import ESTIMATOR_VERSION
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import LayoutResults, Layouts
from estimator.core.scenario import Scenario
from estimator.core.search import merge_search_results, search, search_chunk
from estimator.core.validation import validate_scenario

__version__ = ESTIMATOR_VERSION
__all__ = [
    "ESTIMATOR_VERSION",
    "AcceleratorSpec",
    "LayoutResults",
    "Layouts",
    "Scenario",
    "ScenarioError",
    "__version__",
    "estimate",
    "evaluate_layouts",
    "load_catalog",
    "merge_search_results",
    "search",
    "search_chunk",
    "validate_scenario",
]
