"""Training methods: which weights are trained, what they store and the FLOPs they need.

Full training updates every weight (but, optionally, frozen bottom layers and embedding
tables). LoRA freezes every base weight W0 (d x k) and trains a low-rank update B A with
B (d x r) and A (r x k): r (d + k) parameters per adapted matrix (Hu et al. 2021, "LoRA:
Low-Rank Adaptation of Large Language Models", arXiv:2106.09685, section 4.1). QLoRA
stores the frozen linear weights of the transformer blocks in 4-bit NormalFloat with
double quantisation, 4 + 8/64 + 32/(64 x 256) = 4.127 bits per weight (Dettmers et al. 2023,
"QLoRA: Efficient Finetuning of Quantized LLMs", arXiv:2305.14314, section 3), dequantised
to 16 bits just before each matmul; embeddings and the LM head stay 16-bit (bitsandbytes
leaves ``lm_head`` unquantised).

Optimizer state per trained parameter, besides the fp32 master copy that mixed-precision
full training keeps (Rajbhandari et al. 2020), with fp32 moments (16-bit ones in pure
16-bit training, ``training.master_weights`` false):

* AdamW: first and second moments in fp32, 8 B (Loshchilov & Hutter 2019).
* 8-bit AdamW: both moments block-wise quantised to 8 bits, 2 B; the per-block scales
  (one fp32 per 2,048 values) add 0.2 % (Dettmers et al. 2022, "8-bit Optimizers via
  Block-wise Quantization", ICLR 2022, section 2).
* Adafactor without momentum (its default, beta1 = 0): the second moment factored into a
  row and a column vector, r + c values per r x c matrix, under 0.1 % of the weights
  (Shazeer & Stern 2018, "Adafactor", section 3): counted as 0.
* SGD with momentum: one fp32 buffer, 4 B.
* Lion: one fp32 momentum, 4 B (Chen et al. 2023, "Symbolic Discovery of Optimization
  Algorithms", algorithm 2).

LoRA adapters train in the 16-bit compute type with fp32 optimizer state and no fp32 master
copy, the QLoRA paper's setup (bf16 adapters, 32-bit paged AdamW): 2 + 2 + 8 = 12 B per
adapter parameter with AdamW.

FLOPs. A trained matmul costs 6 FLOPs per weight per token (forward 2, input gradient 2,
weight gradient 2); a frozen one that gradients flow through 4 (no weight gradient); a
frozen one below every trained weight 2 (forward only: nothing below needs a gradient).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from estimator.core import model as arithmetic
from estimator.core.constants import (
    ADAM_MOMENTS,
    BACKWARD_TO_FORWARD,
    BITS_PER_BYTE,
    DROPOUT_MASK_BYTES,
    FORWARD_BACKWARD_PASSES,
    FORWARD_FLOPS_PER_PARAMETER,
    FP32_BYTES,
    FROZEN_FLOPS_PER_PARAMETER,
    HALF_PRECISION_BYTES,
    INPUT_GRADIENT_FLOPS_PER_PARAMETER,
    MASTER_WEIGHT_BYTES,
    TRAINING_FLOPS_PER_PARAMETER,
    WEIGHT_GRADIENT_FLOPS_PER_PARAMETER,
)
from estimator.core.scenario import MethodConfig, ModelConfig

#: NF4 block: one 8-bit quantisation constant per 64 weights (QLoRA section 3). [weights]
NF4_BLOCK_SIZE = 64.0
#: Double quantisation: one fp32 constant per 256 blocks' 8-bit constants (QLoRA section 3).
NF4_CONSTANTS_BLOCK_SIZE = 256.0
#: Bits per weight of NF4 with double quantisation, 4 + 8/64 + 32/(64 x 256) (QLoRA
#: section 3). [bit]
NF4_BITS = 4.0 + 8.0 / NF4_BLOCK_SIZE + 32.0 / (NF4_BLOCK_SIZE * NF4_CONSTANTS_BLOCK_SIZE)
#: Optimizer state values per trained parameter (moments), master copy excluded.
OPTIMIZER_STATE_VALUES = {
    "adamw": ADAM_MOMENTS,
    "adamw8bit": ADAM_MOMENTS,
    "adafactor": 0,
    "sgd": 1,
    "lion": 1,
}
#: 8-bit AdamW's block of values sharing one fp32 scale (Dettmers et al. 2022, section 2).
ADAMW_8BIT_BLOCK_SIZE = 2048.0
#: 8-bit AdamW: two 1-byte moments plus one fp32 scale per block of 2,048 values. [B]
ADAMW_8BIT_BYTES = ADAM_MOMENTS * (1.0 + FP32_BYTES / ADAMW_8BIT_BLOCK_SIZE)
#: Display names of the optimizers.
OPTIMIZER_NAMES = {
    "adamw": "AdamW",
    "adamw8bit": "8-bit AdamW",
    "adafactor": "Adafactor",
    "sgd": "SGD with momentum",
    "lion": "Lion",
}
FULL = MethodConfig()
#: Projections LoRA can adapt, and the groups ``targets`` may name instead.
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_GROUPS = {
    "attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
}


def optimizer_state_bytes(optimizer: str, bytes_per_value: float) -> float:
    """Optimizer state per trained parameter, master copy excluded.

    Parameters
    ----------
    optimizer : str
        One of :data:`OPTIMIZER_STATE_VALUES`.
    bytes_per_value : float
        Bytes of one moment: 4 in fp32, 2 in pure 16-bit training. [B]

    Returns
    -------
    float
        The optimizer's moments at ``bytes_per_value`` (AdamW 2, SGD and Lion 1, Adafactor
        0); 8-bit AdamW's are 1 byte plus their block scales whatever the precision. [B]

    References
    ----------
    Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", ICLR 2022,
    section 2; Shazeer & Stern 2018, "Adafactor", section 3; Chen et al. 2023, "Symbolic
    Discovery of Optimization Algorithms", algorithm 2.
    """
    if optimizer == "adamw8bit":
        return ADAMW_8BIT_BYTES
    return OPTIMIZER_STATE_VALUES[optimizer] * bytes_per_value


def state_bytes(
    precision: str, optimizer: str, adapters: bool, master_weights: bool = True
) -> tuple[float, float, float]:
    """Weights, gradients and optimizer state (master copy included) per trained parameter.

    Parameters
    ----------
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision; fp8 training keeps 16-bit weights and gradients.
    optimizer : str
        One of :data:`OPTIMIZER_STATE_VALUES`.
    adapters : bool
        LoRA/QLoRA adapters: 16-bit weights, fp32 moments, no master copy.
    master_weights : bool
        Mixed precision with an fp32 master copy and fp32 moments; False: pure 16-bit
        training (torchtune's and LLaMA-Factory's ``pure_bf16``).

    Returns
    -------
    tuple of float
        (4, 4, s) in fp32/tf32; (2, 2, 4 + s) in mixed precision with an fp32 master copy
        and fp32 moments; (2, 2, s) for LoRA adapters; (2, 2, s) with 16-bit moments when
        ``master_weights`` is False. s from :func:`optimizer_state_bytes`. With AdamW in
        mixed precision this is 2 + 2 + 12. [B]

    References
    ----------
    Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
    Models", SC20, section 3.1; Dettmers et al. 2023, "QLoRA", section 3 (adapters).
    """
    if precision in ("fp32", "tf32"):
        return FP32_BYTES, FP32_BYTES, optimizer_state_bytes(optimizer, FP32_BYTES)
    half = HALF_PRECISION_BYTES
    if not master_weights:
        return half, half, optimizer_state_bytes(optimizer, half)
    master = 0.0 if adapters else MASTER_WEIGHT_BYTES
    return half, half, master + optimizer_state_bytes(optimizer, FP32_BYTES)


@dataclass(frozen=True)
class AdaptedMatrix:
    """One projection of a layer that carries a LoRA adapter.

    ``dense`` counts the copies every token passes through (dense MLPs and shared experts,
    weighted by their share of layers), ``routed`` the routed experts' copies, of which a
    token passes top-k; ``column`` marks a column-parallel matrix (output split over tp),
    else row-parallel (input split).
    """

    module: str
    d_in: int
    d_out: int
    dense: float
    routed: float
    column: bool


def target_modules(targets: tuple[str, ...]) -> tuple[str, ...]:
    """The projections ``targets`` name, groups expanded, in :data:`LORA_MODULES` order.

    Parameters
    ----------
    targets : tuple of str
        ``training.method.targets``: groups of :data:`LORA_GROUPS` or projection names.

    Returns
    -------
    tuple of str
        Projection names (``q_proj``, ..., ``down_proj``), each once.
    """
    chosen = {m for t in targets for m in LORA_GROUPS.get(t, (t,))}
    return tuple(m for m in LORA_MODULES if m in chosen)


def adapted_matrices(model: ModelConfig, method: MethodConfig) -> list[AdaptedMatrix]:
    """Matrices of one (average) layer that carry adapters.

    Attention: Q, K, V and the output projection; MLP: the gate (gated MLPs only), up and
    down projections of dense layers, shared and routed experts, MoE layers weighted by
    their share of layers. The router is not adapted. Under multi-head latent attention
    Q, K and V count as projections from h to the heads' query, key and value widths (the
    adapters sit on the latents' up-projections, whose input is narrower: a slight
    overcount of adapter size).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method; full training adapts nothing.

    Returns
    -------
    list of AdaptedMatrix
        Shapes (d_in, d_out) [elements] and copies per layer of each adapted projection.
    """
    if not method.adapters:
        return []
    h, q, o = model.hidden_size, model.attention_width, model.output_width
    k, v = model.key_width, model.value_width
    moe_share = arithmetic.num_moe_layers(model) / model.num_layers
    f, shared, routed = model.ffn_hidden_size, 0.0, 0.0
    if model.moe is not None:
        f_moe = model.moe.expert_ffn_hidden_size
        shared, routed = moe_share * model.moe.num_shared_experts, moe_share * model.moe.num_experts
    shapes = {
        "q_proj": (h, q, 1.0, 0.0, True),
        "k_proj": (h, k, 1.0, 0.0, True),
        "v_proj": (h, v, 1.0, 0.0, True),
        "o_proj": (o, h, 1.0, 0.0, False),
    }
    mlp = {"gate_proj": True, "up_proj": True, "down_proj": False} if model.gated_mlp else {
        "up_proj": True, "down_proj": False
    }  # fmt: skip
    out = [AdaptedMatrix(m, *shapes[m]) for m in target_modules(method.targets) if m in shapes]
    for module, column in mlp.items():
        if module not in target_modules(method.targets):
            continue
        d_in, d_out = (h, f) if column else (f, h)
        out.append(AdaptedMatrix(module, d_in, d_out, 1.0 - moe_share, 0.0, column))
        if model.moe is not None:
            d_in, d_out = (h, f_moe) if column else (f_moe, h)
            out.append(AdaptedMatrix(module, d_in, d_out, shared, routed, column))
    return out


def adapter_parameters(model: ModelConfig, method: MethodConfig, active: bool = False) -> float:
    """Adapter parameters of the whole model: l x sum of r (d_in + d_out) over the adapted
    matrices.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method: rank r and targets (0 for full training).
    active : bool
        Count per token: only top-k of the routed experts' adapters.

    Returns
    -------
    float
        [parameters]

    References
    ----------
    Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models",
    arXiv:2106.09685, section 4.1.
    """
    share = 1.0 if model.moe is None or not active else model.moe.top_k / model.moe.num_experts
    total = sum(
        (matrix.dense + share * matrix.routed) * method.rank * (matrix.d_in + matrix.d_out)
        for matrix in adapted_matrices(model, method)
    )
    return model.num_layers * total


def adapter_activation_bytes_per_token(
    model: ModelConfig, method: MethodConfig, bytes_per_value: float
) -> tuple[float, float]:
    """Activations LoRA adds per token and layer, as (a, b) of a + b / tp.

    Each adapter's rank-r intermediate x A (B's weight gradient needs it) and, with
    ``dropout`` > 0, the dropped-out copy of its input and the 1-byte mask (A's weight
    gradient needs them: PEFT and torchtune apply the dropout on the adapter branch only).
    Routed experts count for the tokens routed to them; inputs of row-parallel matrices are
    split over tp.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method: rank, targets and dropout (0 for full training).
    bytes_per_value : float
        Bytes of one activation value (2 for 16-bit, 4 for fp32). [B]

    Returns
    -------
    tuple of float
        (replicated, split over tp) bytes per token and layer. [B/token]
    """
    share = 1.0 if model.moe is None else model.moe.top_k / model.moe.num_experts
    fixed = split = 0.0
    for matrix in adapted_matrices(model, method):
        copies = matrix.dense + share * matrix.routed
        fixed += copies * method.rank * bytes_per_value
        if method.dropout > 0:
            dropped = copies * matrix.d_in * (bytes_per_value + DROPOUT_MASK_BYTES)
            fixed, split = (fixed + dropped, split) if matrix.column else (fixed, split + dropped)
    return fixed, split


def _frozen_embedding_parameters(model: ModelConfig, method: MethodConfig) -> int:
    """Embedding parameters frozen by ``frozen_embeddings``: the input table (with it the
    tied LM head); an untied LM head stays trained."""
    return model.vocab_size * model.hidden_size if method.frozen_embeddings else 0


@lru_cache(maxsize=256)
def trainable_parameters(model: ModelConfig, method: MethodConfig) -> float:
    """Parameters the optimizer updates.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method: the adapters under LoRA/QLoRA, else every weight but the frozen
        bottom layers and embedding table.

    Returns
    -------
    float
        [parameters]
    """
    if method.adapters:
        return adapter_parameters(model, method)
    per_layer = arithmetic.layer_parameters(model) / model.num_layers
    frozen = method.frozen_layers * per_layer + _frozen_embedding_parameters(model, method)
    return arithmetic.total_parameters(model) - frozen


def trained_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the base weights trained.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method.

    Returns
    -------
    float
        Trainable over total parameters: 1 for full training, 0 under adapters. [1]
    """
    if method.adapters:
        return 0.0
    return trainable_parameters(model, method) / arithmetic.total_parameters(model)


def backward_layer_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the layers a backward pass runs through.

    Frozen bottom layers need none when nothing below them (the embedding) trains.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method.

    Returns
    -------
    float
        1 - frozen layers / l with frozen embeddings, else 1. [1]
    """
    if method.adapters or not (method.frozen_layers and method.frozen_embeddings):
        return 1.0
    return 1.0 - method.frozen_layers / model.num_layers


def weight_gradient_layer_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the layers whose base weights get gradients.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method.

    Returns
    -------
    float
        1 - frozen layers / l; 0 under adapters. [1]
    """
    if method.adapters:
        return 0.0
    return 1.0 - method.frozen_layers / model.num_layers


def head_trained(model: ModelConfig, method: MethodConfig) -> bool:
    """Whether the LM head's weight gets a gradient.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape (tied embeddings share the head with the input table).
    method : MethodConfig
        Training method.

    Returns
    -------
    bool
        False under adapters, and when the head is tied to a frozen embedding.
    """
    return not method.adapters and not (model.tied_embeddings and method.frozen_embeddings)


def base_weight_bytes(model: ModelConfig, method: MethodConfig, weight_bytes: float) -> float:
    """Bytes per base weight, averaged over the model.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method; QLoRA stores the transformer-block matrices in NF4.
    weight_bytes : float
        Bytes of one weight at the training precision. [B]

    Returns
    -------
    float
        ``weight_bytes``, or for QLoRA the parameter-weighted mean of NF4 (:data:`NF4_BITS`
        / 8) over the layers and ``weight_bytes`` over the embeddings. [B]

    References
    ----------
    Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs",
    arXiv:2305.14314, section 3.
    """
    if method.type != "qlora":
        return weight_bytes
    layers = arithmetic.layer_parameters(model)
    embeddings = arithmetic.embedding_parameters(model)
    return (layers * NF4_BITS / BITS_PER_BYTE + embeddings * weight_bytes) / (layers + embeddings)


@lru_cache(maxsize=256)
def training_flops_per_token(model: ModelConfig, method: MethodConfig) -> float:
    """FLOPs per token the method needs, forward + backward, without recomputation.

    Full training without frozen parts is :func:`model.model_flops_per_token`. Otherwise
    each layer matmul counts 6, 4 or 2 FLOPs per weight (trained, frozen with gradients
    flowing through, frozen below every trained weight), the LM head 6 or 4, adapters 6 per
    active adapter parameter, and the attention scores 12 l (n_heads d_head) s for the
    layers a backward runs through (4 per layer forward only).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method.

    Returns
    -------
    float
        [FLOP/token]

    References
    ----------
    Kaplan et al. 2020, "Scaling Laws for Neural Language Models", eq. 2.2 (2 forward +
    4 backward FLOPs per weight); Narayanan et al. 2021, eq. 3; Hu et al. 2021, section 4.1.
    """
    backward = backward_layer_share(model, method)
    trained = weight_gradient_layer_share(model, method)
    per_weight = (
        FORWARD_FLOPS_PER_PARAMETER
        + INPUT_GRADIENT_FLOPS_PER_PARAMETER * backward
        + WEIGHT_GRADIENT_FLOPS_PER_PARAMETER * trained
    )
    layers = arithmetic.layer_parameters(model, active=True) * per_weight
    scores = (
        arithmetic.attention_flops_per_token(model)
        * (1.0 + BACKWARD_TO_FORWARD * backward)
        / FORWARD_BACKWARD_PASSES
    )
    head_flops = (
        TRAINING_FLOPS_PER_PARAMETER if head_trained(model, method) else FROZEN_FLOPS_PER_PARAMETER
    )
    head = model.vocab_size * model.hidden_size * head_flops
    adapters = TRAINING_FLOPS_PER_PARAMETER * adapter_parameters(model, method, active=True)
    return layers + scores + head + adapters


@lru_cache(maxsize=256)
def recompute_flops_per_token(model: ModelConfig, method: MethodConfig, recompute: str) -> float:
    """Extra forward FLOPs of activation recomputation.

    The model's (:func:`model.recompute_flops_per_token`) plus, with full recomputation,
    the adapters' forward, only over the layers a backward runs through.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method.
    recompute : {'none', 'selective', 'full'}
        Activation recomputation mode.

    Returns
    -------
    float
        [FLOP/token]

    References
    ----------
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", section 5.
    """
    extra = arithmetic.recompute_flops_per_token(model, recompute)
    if recompute == "full":
        extra += FORWARD_FLOPS_PER_PARAMETER * adapter_parameters(model, method, active=True)
    return extra * backward_layer_share(model, method)


def checkpoint_parameters(model: ModelConfig, method: MethodConfig) -> float:
    """Parameters a checkpoint saves with their optimizer state.

    The checkpoint size sets the write time and the work lost to failures.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    method : MethodConfig
        Training method: the adapters under LoRA (the frozen base is read back from the
        original model), every weight otherwise.

    Returns
    -------
    float
        [parameters]
    """
    if method.adapters:
        return adapter_parameters(model, method)
    return float(arithmetic.total_parameters(model))


def describe(method: MethodConfig, optimizer: str) -> str:
    """One line for people, e.g. "LoRA r=16 on attention, mlp, AdamW".

    Parameters
    ----------
    method : MethodConfig
        Training method.
    optimizer : str
        One of :data:`OPTIMIZER_NAMES`.

    Returns
    -------
    str
        The method, its rank and targets or frozen parts, and the optimizer's name.
    """
    name = OPTIMIZER_NAMES[optimizer]
    if method.adapters:
        kind = "QLoRA (NF4 base)" if method.type == "qlora" else "LoRA"
        return f"{kind} r={method.rank} on {', '.join(method.targets)}, {name}"
    frozen = []
    if method.frozen_layers:
        frozen.append(f"{method.frozen_layers} bottom layers")
    if method.frozen_embeddings:
        frozen.append("embeddings")
    return "full training" + (f" ({' and '.join(frozen)} frozen)" if frozen else "") + f", {name}"
