"""Layouts as a struct of arrays, and what is computed per layout, array by array.

A :class:`Layouts` holds one parallel layout per index, each field a float64 array
(integers are exact up to 2**53); :func:`estimator.core.layout.evaluate_layouts` turns them
into :class:`LayoutResults` of the same length, through the :class:`MicroBatch` times of
each layout's most loaded stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from estimator.core import memory
from estimator.core._types import FloatArray, Numeric
from estimator.core.scenario import ParallelismConfig


@dataclass(frozen=True)
class Layouts:
    """Parallel layouts, one per index: the contract's ``parallelism`` fields as arrays.

    ``recompute`` is coded 0 none, 1 selective, 2 full; ``sequence_parallel`` and
    ``activation_offload`` 0/1; ``virtual_stages`` is 1 for 1F1B and v > 1 for the
    interleaved schedule.
    """

    tp: FloatArray
    pp: FloatArray
    dp: FloatArray
    cp: FloatArray
    ep: FloatArray
    micro_batch_size: FloatArray
    zero_stage: FloatArray
    recompute: FloatArray
    sequence_parallel: FloatArray
    virtual_stages: FloatArray
    activation_offload: FloatArray

    @classmethod
    def from_arrays(cls, **columns: Numeric) -> Layouts:
        """Broadcast the given columns to one common length.

        Parameters
        ----------
        **columns : array_like
            Every field of :class:`Layouts` by name (sizes [devices], ``micro_batch_size``
            [sequences], codes as in the class docstring); ``activation_offload`` may be
            left out (0).

        Returns
        -------
        Layouts
            float64 arrays of one common length.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        columns = {"activation_offload": 0.0, **columns}
        arrays = np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(columns[n], dtype=np.float64)) for n in names)
        )
        return cls(**{n: np.array(a) for n, a in zip(names, arrays, strict=True)})

    @classmethod
    def single(cls, layout: ParallelismConfig) -> Layouts:
        """The one layout of an explicit scenario.

        Parameters
        ----------
        layout : ParallelismConfig
            The scenario's ``parallelism``; sequence parallelism counts only with tp > 1.

        Returns
        -------
        Layouts
            Arrays of length 1.
        """
        values = {
            "tp": layout.tp,
            "pp": layout.pp,
            "dp": layout.dp,
            "cp": layout.cp,
            "ep": layout.ep,
            "micro_batch_size": layout.micro_batch_size,
            "zero_stage": layout.zero_stage,
            "recompute": memory.RECOMPUTE_CODES[layout.recompute],
            "sequence_parallel": float(layout.sequence_parallel and layout.tp > 1),
            "virtual_stages": layout.virtual_stages,
            "activation_offload": float(layout.activation_offload),
        }
        # What from_arrays makes of scalars, without its broadcasting: one float64 each.
        return cls(**{name: np.array([value], dtype=np.float64) for name, value in values.items()})

    def __len__(self) -> int:
        return int(self.tp.shape[0])


@dataclass(frozen=True)
class LayoutResults:
    """Per-layout results; memory in bytes, times in seconds per optimizer step.

    The step time is compute + recompute + tp_communication (its exposed part) + pp_bubble +
    exposed_communication + overheads, the overheads being the two margins
    (``framework_overhead`` + ``network_jitter``); ``dp_communication`` is the gross data-parallel
    traffic time, of which only the part in ``exposed_communication`` costs time.
    """

    num_micro_batches: FloatArray
    tokens_per_step: FloatArray
    weights: FloatArray
    gradients: FloatArray
    optimizer: FloatArray
    activations: FloatArray
    other: FloatArray
    total_memory: FloatArray
    compute: FloatArray
    recompute: FloatArray
    tp_communication: FloatArray
    pp_bubble: FloatArray
    dp_communication: FloatArray
    exposed_communication: FloatArray
    overheads: FloatArray
    framework_overhead: FloatArray
    network_jitter: FloatArray
    step_time: FloatArray
    memory_bound: FloatArray


@dataclass(frozen=True)
class MicroBatch:
    """Per-device, per-micro-batch times of the most loaded stage. [s]"""

    forward: FloatArray
    backward: FloatArray
    recompute: FloatArray
    attention: FloatArray
    memory_bound: FloatArray
