"""Framework profiles: what a training framework can run, so the layout search stays within it.

A scenario names one with the optional top-level key ``framework``; ``"auto"`` (the default)
is what a careful team uses today on that hardware: Megatron-LM (Megatron-Core) on GPUs and
Gaudi, MaxText on TPUs. Each profile states the parallelisms, pipeline schedules, ZeRO/FSDP
stages, recomputation modes, fp8 and offload modes the framework supports, how much device
memory it leaves free (the usable-memory fraction: allocator fragmentation beyond the
modelled 5 %, peak transients of the optimizer step, NCCL buffers growing with the groups),
whether tensor-parallel communication can overlap the matmuls and the expert all-to-alls the
shared experts, and whether the compiler rematerialises activations that do not fit (XLA).

Sources: each framework's documentation of its parallelism options (Megatron-LM
``arguments.py``; torchtitan's ``JobConfig``; DeepSpeed's configuration reference; MaxText's
``base.yml``), as of 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.core.errors import ScenarioError


@dataclass(frozen=True)
class Stack:
    """A software stack: the kernels, fusions and runtime a framework family trains with.

    Its calibrated factor (``estimator/data/calibration.json``, ``stacks``) multiplies the
    accelerator family's kernel efficiencies (:func:`estimator.core.calibration.efficiency_for`).

    Attributes
    ----------
    id, name : str
        Identifier and display name.
    examples : str
        The frameworks and published runs it stands for.
    """

    id: str
    name: str
    examples: str


#: The stacks the calibration tells apart (docs/methodology.md, "Software stacks").
STACKS: dict[str, Stack] = {
    s.id: s
    for s in (
        Stack(
            "megatron-core",
            "vendor-tuned Megatron (Megatron-Core, NeMo, MLPerf submissions)",
            "NVIDIA's Megatron-LM tables, NeMo recipes and MLPerf Training submissions; the "
            "vendors' own Megatron forks (AMD's ROCm Megatron-LM and Primus, Intel's Gaudi "
            "Megatron-DeepSpeed)",
        ),
        Stack(
            "pytorch-native",
            "PyTorch-native (FSDP/FSDP2 + TP)",
            "torchtitan, Composer/llm-foundry, OLMo-core, fms-fsdp, FlashAttention's trainer",
        ),
        Stack("nanotron", "nanotron", "Hugging Face nanotron"),
        Stack("deepspeed", "DeepSpeed", "DeepSpeed ZeRO and Megatron-DeepSpeed, as users run them"),
        Stack("maxtext", "MaxText / JAX (XLA)", "MaxText on TPU and GPU, Pax"),
        Stack("hf-peft", "Hugging Face Transformers + PEFT", "Accelerate, PEFT, TRL"),
        Stack(
            "megatron-2021",
            "the 2021-22 fp16 stacks",
            "Megatron-LM 2021, Megatron-DeepSpeed 2022 (no FlashAttention)",
        ),
    )
}
#: The stacks of the period profiles (fp16 without FlashAttention): never what "auto" stands
#: for on today's kernels, nor an alternative worth showing beside them.
PERIOD_STACKS = frozenset({"megatron-2021"})
#: What an estimate with no stated framework assumes: the median of the calibrated stacks,
#: not the best one, with the between-stack spread in its band.
POOLED_STACK = "pooled"


@dataclass(frozen=True)
class FrameworkProfile:
    """What one framework supports.

    Attributes
    ----------
    id, name : str
        Scenario value and display name.
    tensor_parallel, pipeline_parallel, context_parallel, expert_parallel : bool
        Which model-parallel axes the framework implements.
    interleaved_schedule : bool
        Whether pipelines may run the interleaved (virtual-stage) schedule.
    zero_stages : tuple of int
        Optimizer/gradient/weight sharding stages it offers (FSDP full shard = 3).
    recompute : tuple of str
        Activation recomputation modes.
    fp8 : bool
        Whether fp8 training is supported.
    offload : tuple of str
        ``training.offload`` modes supported.
    memory_headroom : float
        Share of device memory a run keeps free; the search only picks layouts within the
        rest. [1]
    tp_overlap : bool
        Whether tensor-parallel collectives can overlap the matmuls (inside a node).
    shared_expert_overlap : bool
        Whether the expert all-to-alls of an MoE layer run beside its shared experts'
        matmuls (Megatron-Core ``--moe-shared-expert-overlap``; DeepSeek-V2's HAI-LLM).
    compiler_remat : bool
        Whether the compiler rematerialises activations that do not fit (XLA).
    flash_attention : bool
        Whether attention runs as one fused kernel that never stores the s x s scores
        (FlashAttention, Dao et al. 2022); without it the scores are written, soft-maxed and
        read back through memory and kept for the backward unless recomputed.
    sequence_parallel : bool
        Whether the search splits the LayerNorm/dropout activations over the tensor-parallel
        group (Korthikanti et al. 2022); a stated layout's flag is taken as given.
    dropout : bool
        Whether the models it trains use dropout (attention and hidden): masks are stored
        and applied in both passes.
    sharded_multi_rail : bool
        Whether its ZeRO-3/FSDP gathers and reduce-scatters across nodes bring every NIC of
        the node that the group has members on (NCCL's one ring per NIC, as FSDP and
        Megatron-Core reach today: the fms-fsdp and foundry measurements at 96-512 GPUs), or
        move at one NIC per device (DeepSpeed's ZeRO-3 of 2021, the measured rate of
        Narayanan et al.'s table-2 rows).
    methods : tuple of str
        ``training.method.type`` values it trains (full, LoRA, QLoRA).
    freezing : bool
        Whether it freezes chosen layers and embeddings (``frozen_layers``).
    optimizers : tuple of str
        ``training.optimizer`` values it offers.
    stack : str
        The software stack (:data:`STACKS`) whose calibrated efficiency it runs at.
    mcore_ddp : bool
        Whether its data parallelism is Megatron-Core's DDP and distributed optimizer: buckets
        of max(40 M, 1 M x dp) parameters (``DistributedDataParallelConfig.bucket_size``:
        larger groups move fewer, larger buckets so the collectives do not become
        latency-bound), and in the interleaved schedule each model chunk's gradients
        reduce-scattered once its last backward ends and its weights gathered before its
        first forward, behind the other chunks' passes (``grad_sync_func`` and
        ``param_sync_func`` of ``forward_backward_pipelining_with_interleaving``).
    """

    id: str
    name: str
    stack: str = "megatron-core"
    tensor_parallel: bool = True
    pipeline_parallel: bool = True
    interleaved_schedule: bool = True
    context_parallel: bool = True
    expert_parallel: bool = True
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    fp8: bool = True
    offload: tuple[str, ...] = ("none", "optimizer", "optimizer_and_params")
    memory_headroom: float = 0.10
    tp_overlap: bool = True
    shared_expert_overlap: bool = True
    compiler_remat: bool = False
    flash_attention: bool = True
    sequence_parallel: bool = True
    dropout: bool = False
    sharded_multi_rail: bool = True
    methods: tuple[str, ...] = ("full",)
    freezing: bool = True
    optimizers: tuple[str, ...] = ("adamw",)
    mcore_ddp: bool = False

    def as_dict(self) -> dict[str, object]:
        """The profile as the estimate output's ``framework`` object.

        Returns
        -------
        dict
            ``id``, ``name``, ``memory_headroom`` [1] and ``supports`` (what it runs).
        """
        return {
            "id": self.id,
            "name": self.name,
            "stack": self.stack,
            "memory_headroom": self.memory_headroom,
            "supports": {
                "tp": self.tensor_parallel,
                "pp": self.pipeline_parallel,
                "interleaved_schedule": self.interleaved_schedule,
                "cp": self.context_parallel,
                "ep": self.expert_parallel,
                "zero_stages": list(self.zero_stages),
                "recompute": list(self.recompute),
                "fp8": self.fp8,
                "offload": list(self.offload),
                "tp_overlap": self.tp_overlap,
                "shared_expert_overlap": self.shared_expert_overlap,
                "compiler_remat": self.compiler_remat,
                "flash_attention": self.flash_attention,
                "sequence_parallel": self.sequence_parallel,
                "sharded_multi_rail": self.sharded_multi_rail,
                "methods": list(self.methods),
                "freezing": self.freezing,
                "optimizers": list(self.optimizers),
            },
        }


#: Share of device memory the 2021 stack keeps free. Narayanan et al. 2021, section 5.6: a
#: 145B GPT (80 layers, h 12288) at (t, p) = (8, 16), micro-batch 1, on 80 GB A100s ran
#: without recomputation only at small batch sizes, and recomputation at large batch sizes
#: was "up to 2x higher than the best throughput achieved without" it. With 1F1B the first
#: stage holds min(p, m) micro-batches, so that 2x is the best run without recomputation at
#: batch 8 (this model: 2.0x; batch 16 would give 1.4x): batch 16 did not fit, at 83 % of
#: the memory by Korthikanti et al.'s activation count, while batch 8 (54 %) did. What
#: this count leaves out on that stack (the 2021 caching allocator's fragmentation around
#: the s x s score tensors, pipeline outputs kept until their backward, fp32 gradient
#: buffers) needs more than 17 % of the device; 20 % keeps every layout NVIDIA published
#: for it (examples/sc21, 57-64 %) and the batch-8 run, and rules out the batch-16 one.
MEGATRON_2021_HEADROOM = 0.20

# Megatron-LM as of Narayanan et al. 2021, the stack of the fp16 runs of 2021-22: attention as
# two batched matmuls around a fused scale-mask-softmax kernel with dropout (no FlashAttention,
# Dao et al. 2022), no sequence parallelism and no selective recomputation (both Korthikanti et
# al. 2022), no distributed optimizer (2022), no context parallelism, no fp8, no TP overlap;
# 1F1B and interleaved pipelines. Resolved for "auto" when an NVIDIA GPU that has bf16 trains
# in fp16 (see :func:`auto_profiles`); a stated layout it does not run (ZeRO, selective
# recomputation) goes to the next profile.
_MEGATRON_2021 = FrameworkProfile(
    id="megatron-lm-2021",
    name="Megatron-LM 2021 (fp16, no FlashAttention)",
    stack="megatron-2021",
    memory_headroom=MEGATRON_2021_HEADROOM,
    context_parallel=False,
    zero_stages=(0,),
    offload=("none",),
    recompute=("none", "full"),
    fp8=False,
    tp_overlap=False,
    shared_expert_overlap=False,
    flash_attention=False,
    sequence_parallel=False,
    dropout=True,
    optimizers=("adamw", "sgd"),
)

PROFILES: dict[str, FrameworkProfile] = {
    p.id: p
    for p in (
        # Megatron-Core: TP with sequence parallelism and comm overlap, PP (1F1B and
        # interleaved, uneven first/last stages), CP (ring attention), EP with the shared
        # experts beside the all-to-alls (--moe-shared-expert-overlap), the distributed
        # optimizer (ZeRO-1) and its FSDP (stage 3); optimizer CPU offload; Adam and SGD
        # (--optimizer); LoRA through Megatron-Bridge/NeMo PEFT.
        FrameworkProfile(
            id="megatron-lm",
            name="Megatron-LM",
            zero_stages=(0, 1, 3),
            offload=("none", "optimizer"),
            methods=("full", "lora"),
            optimizers=("adamw", "sgd"),
            mcore_ddp=True,
        ),
        # torchtitan on PyTorch FSDP2: DDP or FSDP (stage 2 "reshard after forward off",
        # stage 3), TP with async TP, PP schedules incl. interleaved, CP, EP, float8;
        # FSDP CPU offload moves parameters, gradients and optimizer state together.
        FrameworkProfile(
            id="torchtitan",
            name="torchtitan (PyTorch FSDP2)",
            stack="pytorch-native",
            zero_stages=(0, 2, 3),
            offload=("none", "optimizer_and_params"),
            shared_expert_overlap=False,
        ),
        # DeepSpeed (with Megatron-DeepSpeed for TP/PP): ZeRO 0-3 and ZeRO-Offload, 1F1B
        # pipelines only, no ring-attention CP, no fp8 in the mainline engine, no TP overlap;
        # any PyTorch optimizer passed in (bitsandbytes 8-bit AdamW, Adafactor, Lion); LoRA
        # (DeepSpeed-Chat).
        FrameworkProfile(
            id="deepspeed",
            name="DeepSpeed",
            stack="deepspeed",
            interleaved_schedule=False,
            context_parallel=False,
            fp8=False,
            tp_overlap=False,
            shared_expert_overlap=False,
            methods=("full", "lora"),
            optimizers=("adamw", "adamw8bit", "adafactor", "sgd", "lion"),
        ),
        # MaxText (JAX/XLA; opt_type adamw or sgd): data, FSDP (stage 3), tensor,
        # sequence/context, expert and pipeline (circular = interleaved) axes; remat
        # policies; XLA plans buffers ahead of time and rematerialises what does not fit, so
        # it runs closer to the limit.
        FrameworkProfile(
            id="maxtext",
            name="MaxText (JAX/XLA)",
            stack="maxtext",
            zero_stages=(0, 3),
            offload=("none",),
            memory_headroom=0.05,
            shared_expert_overlap=False,
            compiler_remat=True,
            optimizers=("adamw", "sgd"),
        ),
        # Hugging Face Transformers + PEFT on Accelerate (DDP, DeepSpeed ZeRO 1-3 or FSDP),
        # the usual fine-tuning stack: LoRA and QLoRA (bitsandbytes NF4, FSDP-QLoRA), every
        # optimizer above, CPU offload; no model parallelism, gradient checkpointing only
        # whole layers, no fp8.
        FrameworkProfile(
            id="hf-peft",
            name="Hugging Face PEFT (Accelerate)",
            stack="hf-peft",
            tensor_parallel=False,
            pipeline_parallel=False,
            interleaved_schedule=False,
            context_parallel=False,
            expert_parallel=False,
            recompute=("none", "full"),
            fp8=False,
            tp_overlap=False,
            shared_expert_overlap=False,
            methods=("full", "lora", "qlora"),
            optimizers=("adamw", "adamw8bit", "adafactor", "sgd", "lion"),
        ),
        # nanotron: TP (with sequence parallelism), 1F1B and all-forward-all-backward
        # pipelines (no interleaving), ZeRO-1, full recomputation, no context parallelism
        # and no fp8 in its released trainer (nanotron README and config reference, v0.5).
        FrameworkProfile(
            id="nanotron",
            name="nanotron",
            stack="nanotron",
            interleaved_schedule=False,
            context_parallel=False,
            zero_stages=(0, 1),
            recompute=("none", "full"),
            fp8=False,
            offload=("none",),
            tp_overlap=False,
            shared_expert_overlap=False,
        ),
        _MEGATRON_2021,
        # The other fp16 stacks of 2021-22, on the same kernels: Megatron-DeepSpeed (ZeRO-1
        # with Megatron TP and DeepSpeed's 1F1B pipeline: GLM-130B, BLOOM) and
        # FairScale/PyTorch FSDP with Megatron TP (OPT-175B's metaseq). "auto" moves on to
        # it for such a scenario when no layout of the 2021 stack fits (OPT-175B on 992
        # A100s: without sharding nothing does), and a stated ZeRO layout runs on it. Its
        # ZeRO-3 collectives move at one NIC per device: DeepSpeed's ZeRO-3 rows of
        # Narayanan et al. 2021 (table 2, 384-2,240 A100s) spent 19-27 GB/s per GPU on
        # them, one 200 Gb/s HDR port, where the node had eight. Same kernels, same
        # allocator: the same memory headroom (MEGATRON_2021_HEADROOM).
        replace(
            _MEGATRON_2021,
            id="megatron-deepspeed-2022",
            name="Megatron-DeepSpeed / FSDP 2022 (fp16, no FlashAttention)",
            interleaved_schedule=False,
            zero_stages=(0, 1, 2, 3),
            sharded_multi_rail=False,
        ),
    )
}
#: What "auto" means per accelerator family; families not listed get Megatron-LM.
DEFAULT_BY_FAMILY = {"google-tpu": "maxtext"}
DEFAULT_FRAMEWORK = "megatron-lm"
FRAMEWORK_CHOICES = ("auto", *PROFILES)
#: The stack "auto" means for fp16 mixed precision on an NVIDIA GPU that has a bf16 peak
#: (Ampere and later): every mainstream LLM framework trains in bf16 there since 2022, and
#: the published fp16 runs on such GPUs (Megatron-LM 2021, OPT, GLM-130B, GPT-NeoX) ran
#: without FlashAttention and sequence parallelism. Not for AMD: ROCm stacks kept fp16
#: longer, with FlashAttention (ORNL's 2023 Frontier runs).
LEGACY_FP16_FRAMEWORK = "megatron-lm-2021"
#: The same period's stacks with ZeRO/FSDP, next in line for such a scenario.
LEGACY_FP16_SHARDED_FRAMEWORK = "megatron-deepspeed-2022"
LEGACY_FP16_FAMILY_PREFIX = "nvidia-"
#: The period stacks: "auto" never resolves to them outside the fp16 rule, and only they
#: give way to the next candidate when no layout fits.
LEGACY_FP16_FRAMEWORKS = frozenset({LEGACY_FP16_FRAMEWORK, LEGACY_FP16_SHARDED_FRAMEWORK})


def stack_assumed(framework: str, stated: bool, family: str) -> str:
    """The software stack an estimate runs at.

    Parameters
    ----------
    framework : str
        The resolved framework profile id.
    stated : bool
        Whether the scenario named its framework (not ``"auto"``).
    family : str
        The accelerator family.

    Returns
    -------
    str
        A named framework's stack; for ``"auto"``, the stack where only one runs the
        scenario (the period stacks of fp16 on a GPU with bf16, MaxText on TPUs), else
        :data:`POOLED_STACK`.
    """
    if stated or framework in LEGACY_FP16_FRAMEWORKS or family in DEFAULT_BY_FAMILY:
        return PROFILES[framework].stack
    return POOLED_STACK


def auto_profiles(family: str, precision: str, has_bf16: bool) -> list[FrameworkProfile]:
    """The profiles ``"auto"`` tries for a scenario, in order.

    Validation resolves ``"auto"`` to the first that runs the scenario (its layout and
    training options); with the layout left to the search, the search moves on to the next
    that runs it while no layout fits (:func:`estimator.core.search.with_fitting_framework`).

    Parameters
    ----------
    family : str
        The accelerator's efficiency family: TPUs run MaxText only; the fp16 rule is for
        NVIDIA families.
    precision : str
        ``training.precision``.
    has_bf16 : bool
        Whether the accelerator has a bf16 peak.

    Returns
    -------
    list of FrameworkProfile
        fp16 on an NVIDIA GPU with bf16: the 2021 stack, its sharded contemporaries, then
        the family default and the rest; otherwise the family default, then the other
        current GPU profiles.
    """
    default = profile_for("auto", family)
    if family in DEFAULT_BY_FAMILY:
        return [default]
    current = [
        p for p in PROFILES.values() if p is not default and p.id not in LEGACY_FP16_FRAMEWORKS
    ]
    if precision == "fp16" and has_bf16 and family.startswith(LEGACY_FP16_FAMILY_PREFIX):
        legacy = [PROFILES[LEGACY_FP16_FRAMEWORK], PROFILES[LEGACY_FP16_SHARDED_FRAMEWORK]]
        return [*legacy, default, *current]
    return [default, *current]


def profile_for(name: str, family: str) -> FrameworkProfile:
    """The profile a scenario's ``framework`` names.

    Parameters
    ----------
    name : str
        A key of :data:`PROFILES`, or ``"auto"``: the family's default
        (:data:`DEFAULT_BY_FAMILY`, else :data:`DEFAULT_FRAMEWORK`).
    family : str
        The accelerator's efficiency family.

    Returns
    -------
    FrameworkProfile

    Raises
    ------
    ScenarioError
        An unknown framework; the key is ``framework``.
    """
    if name == "auto":
        name = DEFAULT_BY_FAMILY.get(family, DEFAULT_FRAMEWORK)
    try:
        return PROFILES[name]
    except KeyError:
        raise ScenarioError(
            "framework", f"must be one of {FRAMEWORK_CHOICES}, got {name!r}"
        ) from None
