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
#: The two margins the estimate adds to a step, which together make the ``overheads`` part.
STEP_MARGINS = (
    ("framework_overhead", "Framework overhead"),
    ("network_jitter", "Network jitter"),
)
#: (key in the estimate's ``whole_run`` parts, label): the wall clock beyond steady state.
WHOLE_RUN_PARTS = (
    ("checkpoint_writes", "Checkpoint writes"),
    ("failures_and_restarts", "Failures and restarts"),
    ("preemptions", "Spot preemptions"),
    ("evaluation", "Evaluation"),
    ("ramp_up", "Ramp-up"),
    ("stragglers", "Stragglers"),
    ("allocation_idle", "Allocation idle"),
)
