"""Array type aliases shared by the vectorised formulas."""

from __future__ import annotations

from typing import Union

import numpy as np
import numpy.typing as npt

#: A float64 array; layout parameters and results are passed as these.
FloatArray = npt.NDArray[np.float64]
#: A scalar or an array that broadcasts against the layout arrays.
Numeric = Union[float, FloatArray, npt.NDArray[np.bool_]]  # noqa: UP007 (runtime alias, py3.11)
