"""Factors the estimator's formulas take from papers, and unit conversions, named once.

Every factor here is a count from a published derivation, not a fitted or assumed value
(those live in :mod:`estimator.core.calibration` and beside the formulas that assume them,
with their reasons). Each names the source it comes from; the formulas that use it cite
the same source. ``tests/estimator/core/test_constants.py`` checks them against the papers'
closed forms.

References
----------
.. [1] Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361,
   section 2.1 and eq. 2.2 (C = 6 N FLOPs per token: 2 N forward, 4 N backward).
.. [2] Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
   arXiv:2203.15556, appendix F (the same 6 N, backward = 2 x forward).
.. [3] Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
   Clusters Using Megatron-LM", SC21, section 5.1 and eq. 3 (FLOPs per iteration, the
   recompute pass as one extra forward; 2 FLOPs per multiply-accumulate).
.. [4] Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
   Models", arXiv:2205.05198, sections 4.2.2 and 5 (tensor-parallel all-reduces per layer,
   recomputation re-runs the forward).
.. [5] Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
   Parameter Models", SC20, section 3.1 (mixed-precision Adam: 2 + 2 + 12 bytes per
   parameter) and section 7 (ZeRO-3 moves 3 Psi per step).
.. [6] Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
   Partitioning", arXiv:2307.08691, section 3 (causal masking skips half of the score
   tiles; the backward runs 5 matmuls against the forward's 2).
.. [7] Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication
   Operations in MPICH", IJHPCA 19(1) (a ring all-reduce is a reduce-scatter followed by
   an all-gather); NVIDIA nccl-tests, doc/PERFORMANCE.md (bus bandwidth 2 (n - 1)/n for
   all-reduce, (n - 1)/n for all-gather and reduce-scatter).
.. [8] Liu et al. 2023, "Ring Attention with Blockwise Transformers for Near-Infinite
   Context", arXiv:2310.01889 (key/value blocks passed around the context-parallel ring).
.. [9] Lepikhin et al. 2021, "GShard: Scaling Giant Models with Conditional Computation
   and Automatic Sharding", ICLR 2021 (one all-to-all dispatches tokens to their experts
   and one combines the results, in each pass).
"""

from __future__ import annotations

# --- Units ---------------------------------------------------------------------------------

#: Bytes in a gibibyte. [B/GiB]
GIB = 1024.0**3
#: A tera (TFLOP/s to FLOP/s, TB/s to B/s). [1]
TERA = 1e12
#: A giga (GB/s to B/s, Gbit/s to bit/s). [1]
GIGA = 1e9
#: Bits in a byte (Gbit/s network figures to bytes). [bit/B]
BITS_PER_BYTE = 8.0
#: Seconds in an hour. [s/h]
SECONDS_PER_HOUR = 3600.0
#: Seconds in a day. [s/day]
SECONDS_PER_DAY = 86400.0
#: Hours in a day (GPU-hours of a whole cluster-day). [h/day]
HOURS_PER_DAY = SECONDS_PER_DAY / SECONDS_PER_HOUR

# --- Bytes per value -----------------------------------------------------------------------

#: One fp32 value: fp32/tf32 training's weights, gradients and activations, the master
#: copy and Adam's moments in mixed precision, the logits of the loss. [B]
FP32_BYTES = 4.0
#: One 16-bit (fp16 or bf16) value: mixed precision's weights, gradients and activations. [B]
HALF_PRECISION_BYTES = 2.0
#: One fp8 value: the inputs of an fp8 matmul. [B]
FP8_BYTES = 1.0
#: One dropout mask value, a byte per element (section 4.1 of [4]). [B]
DROPOUT_MASK_BYTES = 1.0

# --- FLOPs per weight and token ([1], [2], [3]) --------------------------------------------

#: FLOPs of one multiply-accumulate: a (m x k) (k x n) matmul costs 2 m k n FLOPs [3]. [FLOP]
FLOPS_PER_MULTIPLY_ADD = 2.0
#: Backward FLOPs over forward FLOPs of a matmul layer: the input gradient and the weight
#: gradient are each a matmul of the forward's shape [1], [3]. [1]
BACKWARD_TO_FORWARD = 2.0
#: Forward FLOPs per weight and token: one multiply-accumulate [1]. [FLOP/(parameter token)]
FORWARD_FLOPS_PER_PARAMETER = FLOPS_PER_MULTIPLY_ADD
#: Input-gradient FLOPs per weight and token (dL/dx = dL/dy W^T). [FLOP/(parameter token)]
INPUT_GRADIENT_FLOPS_PER_PARAMETER = FLOPS_PER_MULTIPLY_ADD
#: Weight-gradient FLOPs per weight and token (dL/dW = x^T dL/dy). [FLOP/(parameter token)]
WEIGHT_GRADIENT_FLOPS_PER_PARAMETER = FLOPS_PER_MULTIPLY_ADD
#: Backward FLOPs per weight and token, 4 = 2 x forward [1]. [FLOP/(parameter token)]
BACKWARD_FLOPS_PER_PARAMETER = BACKWARD_TO_FORWARD * FORWARD_FLOPS_PER_PARAMETER
#: Training FLOPs per trained weight and token, the 6 of C = 6 N D: 2 forward + 4 backward
#: [1], [2]. [FLOP/(parameter token)]
TRAINING_FLOPS_PER_PARAMETER = FORWARD_FLOPS_PER_PARAMETER + BACKWARD_FLOPS_PER_PARAMETER
#: Training FLOPs per frozen weight a gradient flows through: forward and input gradient,
#: no weight gradient. [FLOP/(parameter token)]
FROZEN_FLOPS_PER_PARAMETER = FORWARD_FLOPS_PER_PARAMETER + INPUT_GRADIENT_FLOPS_PER_PARAMETER
#: Forward + backward in units of one forward pass, 1 + 2 = 3: the LM head's three
#: matmuls, and the forward's share of a training step's FLOPs is 1/3 [3]. [1]
FORWARD_BACKWARD_PASSES = 1.0 + BACKWARD_TO_FORWARD
#: The 4 of the attention score and value matmuls' forward FLOPs, 4 s (n_heads d_head)
#: per token and layer: Q K^T and A V, 2 FLOPs per multiply-accumulate each, counted
#: without causal halving [3]. [FLOP/(token layer position width)]
ATTENTION_SCORE_FORWARD_FLOPS = 2.0 * FLOPS_PER_MULTIPLY_ADD
#: The 12 of their forward + backward FLOPs, 12 l s (n_heads d_head) per token: the s/6h
#: term of eq. 3 of [3]. [FLOP/(token layer position width)]
ATTENTION_SCORE_TRAINING_FLOPS = ATTENTION_SCORE_FORWARD_FLOPS * FORWARD_BACKWARD_PASSES

#: Weight matrices of a transformer MLP: up and down projections. [1]
MLP_MATRICES = 2
#: Weight matrices of a gated (GLU, SwiGLU) MLP: gate, up and down projections (Shazeer
#: 2020, "GLU Variants Improve Transformer", arXiv:2002.05202, section 2). [1]
GATED_MLP_MATRICES = 3

# --- FlashAttention ([6]) ------------------------------------------------------------------

#: FlashAttention's backward executes 2.5 x its forward FLOPs (5 matmuls against 2: it
#: recomputes the scores) [6]. [1]
ATTENTION_BACKWARD_FACTOR = 2.5
#: Share of the s x s score tiles a causal FlashAttention kernel computes [6]. [1]
CAUSAL_FRACTION = 0.5

# --- Model states ([5]) --------------------------------------------------------------------

#: The fp32 master copy of a weight mixed-precision training keeps [5]. [B]
MASTER_WEIGHT_BYTES = FP32_BYTES
#: Adam's moments per weight, m and v [5]. [1]
ADAM_MOMENTS = 2
#: Mixed-precision Adam state per parameter, the K = 12 of [5]: fp32 master copy, m and
#: v. [B]
ADAM_MIXED_PRECISION_STATE_BYTES = MASTER_WEIGHT_BYTES + ADAM_MOMENTS * FP32_BYTES
#: Model states per parameter of mixed-precision Adam, 2 + 2 + 12 = 16 [5]: 16-bit weight
#: and gradient plus :data:`ADAM_MIXED_PRECISION_STATE_BYTES`. [B]
MIXED_PRECISION_ADAM_BYTES = 2 * HALF_PRECISION_BYTES + ADAM_MIXED_PRECISION_STATE_BYTES
#: Weight all-gathers per micro-batch under ZeRO-3: one before the forward, one before the
#: backward, beside one gradient reduce-scatter: 3 Psi per step against 2 Psi [5]. [1]
ZERO3_WEIGHT_GATHERS = 2.0
#: Megatron-Core's default DDP bucket: max(40 M, 1 M x dp) parameters
#: (megatron/core/distributed/distributed_data_parallel_config.py, ``bucket_size``: "larger
#: DP sizes need larger buckets to ensure collectives do not become latency-bound"). [1]
MCORE_BUCKET_MIN_PARAMETERS = 40e6
MCORE_BUCKET_PARAMETERS_PER_RANK = 1e6

# --- Communication ([4], [7], [8], [9]) ----------------------------------------------------

#: A ring all-reduce is a reduce-scatter then an all-gather: twice the latency steps and
#: twice the bytes of either [7]. [1]
ALL_REDUCE_PHASES = 2.0
#: Tensor-parallel all-reduces per layer in the forward: the g operators after the
#: attention block and after the MLP (Shoeybi et al. 2019, "Megatron-LM", figure 3) [4].
#: [1]
TP_COLLECTIVES_FORWARD = 2.0
#: Tensor-parallel all-reduces per layer in the backward: the conjugate f operators before
#: the two blocks [4]. [1]
TP_COLLECTIVES_BACKWARD = 2.0
#: Ring-attention key/value exchange rounds per layer in the forward (K and V) [8]. [1]
CP_EXCHANGES_FORWARD = 1.0
#: Ring-attention exchange rounds per layer in the backward (K/V, then their gradients) [8].
#: [1]
CP_EXCHANGES_BACKWARD = 2.0
#: Expert-parallel all-to-alls per MoE layer in the forward: dispatch and combine [9]. [1]
EP_ALL_TO_ALLS_FORWARD = 2.0
#: Expert-parallel all-to-alls per MoE layer in the backward: their transposes [9]. [1]
EP_ALL_TO_ALLS_BACKWARD = 2.0
#: Point-to-point sends per micro-batch and model chunk at a pipeline-stage boundary: the
#: activation forward and its gradient backward [3]. [1]
PIPELINE_SENDS_PER_MICRO_BATCH = 2.0
