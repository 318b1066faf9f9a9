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
full training keeps (Rajbhandari et al. 2020):

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

from estimator.core import model as arithmetic
from estimator.core.scenario import MethodConfig, ModelConfig

#: Bits per weight of NF4 with double quantisation (QLoRA section 3). [bit]
NF4_BITS = 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0)
#: Optimizer state per trained parameter, master copy excluded. [B]
OPTIMIZER_STATE_BYTES = {
    "adamw": 8.0,
    "adamw8bit": 2.0 * (1.0 + 4.0 / 2048.0),
    "adafactor": 0.0,
    "sgd": 4.0,
    "lion": 4.0,
}
#: Display names of the optimizers.
OPTIMIZER_NAMES = {
    "adamw": "AdamW",
    "adamw8bit": "8-bit AdamW",
    "adafactor": "Adafactor",
    "sgd": "SGD with momentum",
    "lion": "Lion",
}
FULL = MethodConfig()


def state_bytes(precision: str, optimizer: str, adapters: bool) -> tuple[float, float, float]:
    """Weights, gradients and optimizer state (master copy included) per trained parameter.

    Returns
    -------
    tuple of float
        (4, 4, s) in fp32/tf32; (2, 2, 4 + s) in mixed precision with an fp32 master copy;
        (2, 2, s) for LoRA adapters; s from :data:`OPTIMIZER_STATE_BYTES`. With AdamW this
        is Rajbhandari et al. 2020's 2 + 2 + 12. [B]
    """
    states = OPTIMIZER_STATE_BYTES[optimizer]
    if precision in ("fp32", "tf32"):
        return 4.0, 4.0, states
    return 2.0, 2.0, states + (0.0 if adapters else 4.0)


def adapted_matrices(model: ModelConfig, method: MethodConfig) -> list[tuple[int, int, float]]:
    """Matrices of one (average) layer that carry adapters: (d_in, d_out, count).

    Attention: Q, K, V and the output projection; MLP: the up (and gate) and down
    projections of dense layers, shared and routed experts, MoE layers weighted by their
    share of layers. The router is not adapted.
    """
    if not method.adapters:
        return []
    h, q, kv = model.hidden_size, model.attention_width, model.num_kv_heads * model.head_dim
    up = 2 if model.gated_mlp else 1
    out: list[tuple[int, int, float]] = []
    if "attention" in method.targets:
        out += [(h, q, 1.0), (h, kv, 2.0), (q, h, 1.0)]
    if "mlp" in method.targets:
        moe_share = arithmetic.num_moe_layers(model) / model.num_layers
        dense = 1.0 - moe_share
        out += [(h, model.ffn_hidden_size, up * dense), (model.ffn_hidden_size, h, dense)]
        if model.moe is not None:
            experts = moe_share * (model.moe.num_experts + model.moe.num_shared_experts)
            f = model.moe.expert_ffn_hidden_size
            out += [(h, f, up * experts), (f, h, experts)]
    return out


def adapter_parameters(model: ModelConfig, method: MethodConfig, active: bool = False) -> float:
    """Adapter parameters of the whole model: l x sum of r (d_in + d_out) over the adapted
    matrices; ``active``: per token (top-k routed experts only). [parameters]"""
    total = 0.0
    for d_in, d_out, count in adapted_matrices(model, method):
        total += count * method.rank * (d_in + d_out)
    if active and model.moe is not None and "mlp" in method.targets:
        share = arithmetic.num_moe_layers(model) / model.num_layers
        f, up = model.moe.expert_ffn_hidden_size, (3 if model.gated_mlp else 2)
        idle = share * (model.moe.num_experts - model.moe.top_k)
        total -= idle * up * method.rank * (model.hidden_size + f)
    return model.num_layers * total


def _frozen_embedding_parameters(model: ModelConfig, method: MethodConfig) -> int:
    """Embedding parameters frozen by ``frozen_embeddings``: the input table (with it the
    tied LM head); an untied LM head stays trained."""
    return model.vocab_size * model.hidden_size if method.frozen_embeddings else 0


def trainable_parameters(model: ModelConfig, method: MethodConfig) -> float:
    """Parameters the optimizer updates. [parameters]"""
    if method.adapters:
        return adapter_parameters(model, method)
    per_layer = arithmetic.layer_parameters(model) / model.num_layers
    frozen = method.frozen_layers * per_layer + _frozen_embedding_parameters(model, method)
    return arithmetic.total_parameters(model) - frozen


def trained_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the base weights trained: 1 for full training, 0 under adapters. [1]"""
    if method.adapters:
        return 0.0
    return trainable_parameters(model, method) / arithmetic.total_parameters(model)


def backward_layer_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the layers a backward pass runs through. Frozen bottom layers need none
    when nothing below them (the embedding) trains. [1]"""
    if method.adapters or not (method.frozen_layers and method.frozen_embeddings):
        return 1.0
    return 1.0 - method.frozen_layers / model.num_layers


def weight_gradient_layer_share(model: ModelConfig, method: MethodConfig) -> float:
    """Share of the layers whose base weights get gradients (0 under adapters). [1]"""
    if method.adapters:
        return 0.0
    return 1.0 - method.frozen_layers / model.num_layers


def head_trained(model: ModelConfig, method: MethodConfig) -> bool:
    """Whether the LM head's weight gets a gradient (frozen under adapters, and when tied to
    a frozen embedding)."""
    return not method.adapters and not (model.tied_embeddings and method.frozen_embeddings)


def base_weight_bytes(model: ModelConfig, method: MethodConfig, weight_bytes: float) -> float:
    """Bytes per base weight, averaged over the model: NF4 for QLoRA's transformer-block
    matrices, ``weight_bytes`` for everything else. [B]"""
    if method.type != "qlora":
        return weight_bytes
    layers = arithmetic.layer_parameters(model)
    embeddings = arithmetic.embedding_parameters(model)
    return (layers * NF4_BITS / 8.0 + embeddings * weight_bytes) / (layers + embeddings)


def training_flops_per_token(model: ModelConfig, method: MethodConfig) -> float:
    """FLOPs per token the method needs, forward + backward, without recomputation.

    Full training without frozen parts is :func:`model.model_flops_per_token`. Otherwise
    each layer matmul counts 6, 4 or 2 FLOPs per weight (trained, frozen with gradients
    flowing through, frozen below every trained weight), the LM head 6 or 4, adapters 6 per
    active adapter parameter, and the attention scores 12 l (n_heads d_head) s for the
    layers a backward runs through (4 per layer forward only). [FLOP/token]
    """
    backward = backward_layer_share(model, method)
    trained = weight_gradient_layer_share(model, method)
    per_weight = 2.0 + 2.0 * backward + 2.0 * trained
    layers = arithmetic.layer_parameters(model, active=True) * per_weight
    scores = arithmetic.attention_flops_per_token(model) * (1.0 + 2.0 * backward) / 3.0
    head = model.vocab_size * model.hidden_size * (6.0 if head_trained(model, method) else 4.0)
    return layers + scores + head + 6.0 * adapter_parameters(model, method, active=True)


def recompute_flops_per_token(model: ModelConfig, method: MethodConfig, recompute: str) -> float:
    """Extra forward FLOPs of activation recomputation: the model's (see
    :func:`model.recompute_flops_per_token`) plus the adapters' forward with full
    recomputation, only over the layers a backward runs through. [FLOP/token]"""
    extra = arithmetic.recompute_flops_per_token(model, recompute)
    if recompute == "full":
        extra += 2.0 * adapter_parameters(model, method, active=True)
    return extra * backward_layer_share(model, method)


def checkpoint_parameters(model: ModelConfig, method: MethodConfig) -> float:
    """Parameters a checkpoint saves with their optimizer state: the adapters under LoRA
    (the frozen base is read back from the original model), every weight otherwise. The
    checkpoint size sets the write time and the work lost to failures. [parameters]"""
    if method.adapters:
        return adapter_parameters(model, method)
    return float(arithmetic.total_parameters(model))


def describe(method: MethodConfig, optimizer: str) -> str:
    """One line for people: "LoRA r=16 on attention + MLP, AdamW"."""
    name = OPTIMIZER_NAMES[optimizer]
    if method.adapters:
        kind = "QLoRA (NF4 base)" if method.type == "qlora" else "LoRA"
        return f"{kind} r={method.rank} on {' + '.join(method.targets)}, {name}"
    frozen = []
    if method.frozen_layers:
        frozen.append(f"{method.frozen_layers} bottom layers")
    if method.frozen_embeddings:
        frozen.append("embeddings")
    return "full training" + (f" ({' and '.join(frozen)} frozen)" if frozen else "") + f", {name}"
