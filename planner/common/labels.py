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
#: (``training.method.type``, label): how the weights are trained.
TRAINING_METHODS = (
    ("full", "Full training"),
    ("lora", "LoRA"),
    ("qlora", "QLoRA"),
)
#: (``training.method.targets`` entry, label): the weight matrices LoRA adapts.
LORA_TARGETS = (
    ("attention", "attention"),
    ("mlp", "MLP"),
    ("q_proj", "q_proj"),
    ("k_proj", "k_proj"),
    ("v_proj", "v_proj"),
    ("o_proj", "o_proj"),
    ("gate_proj", "gate_proj"),
    ("up_proj", "up_proj"),
    ("down_proj", "down_proj"),
)
#: (``training.optimizer``, label).
OPTIMIZERS = (
    ("adamw", "AdamW"),
    ("adamw8bit", "8-bit AdamW"),
    ("adafactor", "Adafactor"),
    ("sgd", "SGD with momentum"),
    ("lion", "Lion"),
)
#: (``training.offload``, label): what lives in host (CPU) memory between steps.
OFFLOAD_MODES = (
    ("none", "None"),
    ("optimizer", "Optimizer states to CPU"),
    ("optimizer_and_params", "Optimizer states and weights to CPU"),
)
#: (memory verdict of an estimate, label, badge tone): one wording on every page and document.
MEMORY_VERDICTS = (
    ("fits", "fits in memory", "good"),
    ("tight", "tight on memory", "warn"),
    ("does_not_fit", "does not fit in memory", "bad"),
)
