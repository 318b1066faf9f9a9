"""Labels of the estimator's breakdowns, in stacking order: one list for pages and documents."""

#: (key in the estimator's output, label) in stacking order; their sum is the step time.
STEP_PARTS = (
    ("compute", "Compute"),
    ("recompute", "Recompute"),
    ("tp_communication", "Tensor-parallel comms"),
    ("pp_bubble", "Pipeline bubble"),
    ("exposed_communication", "Exposed DP/CP comms"),
    ("overheads", "Framework overheads"),
)
MEMORY_PARTS = (
    ("weights", "Weights"),
    ("gradients", "Gradients"),
    ("optimizer", "Optimizer states"),
    ("activations", "Activations"),
    ("other", "Other (buffers, fragmentation)"),
)
