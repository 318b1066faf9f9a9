"""The one money rule: what GPU-hours cost at a price per GPU-hour.

``cost = GPU-hours x price per GPU-hour``: the price covers every accelerator of the cluster
for the whole wall clock, failures and restarts included, as a reserved or rented cluster is
billed. The core prices in floats (the capacity planner's points, the sensitivity's cases,
arrays of them alike); the planner prices in ``Decimal`` and rounds to the cent at its edge
(:func:`planner.budget_figures.cost_of`). Both call :func:`cost_of`.
"""

from __future__ import annotations

from decimal import Decimal

from estimator.core._types import FloatArray


def cost_of[Amount: (float, FloatArray, Decimal)](
    gpu_hours: Amount, price_per_gpu_hour: Amount
) -> Amount:
    """What ``gpu_hours`` cost at ``price_per_gpu_hour``, in the price's type.

    Parameters
    ----------
    gpu_hours : float, array of float or Decimal
        Accelerator-hours of the whole run. [GPU-h]
    price_per_gpu_hour : same type as ``gpu_hours``
        Price of one accelerator-hour. [currency / GPU-h]

    Returns
    -------
    float, array of float or Decimal
        The cost, unrounded (a Decimal is rounded by whoever shows it). [currency]
    """
    return gpu_hours * price_per_gpu_hour
