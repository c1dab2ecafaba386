"""Software profiles: one named set of scenario defaults per training-software generation.

``compute.software`` names one entry of :data:`SOFTWARE_PROFILES` (default
:data:`DEFAULT_SOFTWARE`). Under the operator step model (docs/model.md §2b) the profile gives
every key below that the scenario leaves out; a key the scenario (or ``--set``) states wins:

- ``parallelism.overlap_dp``, ``overlap_tp``, ``overlap_pp``: the hidden shares of the
  data-, tensor- and pipeline-parallel exchanges;
- ``parallelism.sequence_parallel`` and ``compute.fused_attention``: whether that software had them;
- ``compute.grouped_expert_gemm`` (a mixture of experts: one grouped GEMM for the local experts, or a
  loop of small ones) and ``compute.kernel_launch_us`` (the host's time per kernel launch, which
  bounds that loop from below);
- ``compute.efficiency``: the operator model's efficiency fitted to that software's published
  iteration times on each GPU type measured (docs/validation.md, "Step time"; the fit of
  :mod:`mcsim.analysis.steptime_validation` over every case of the source, its leave-one-out
  range beside it). A GPU type the source did not measure borrows the profile's
  ``reference_gpu`` value (:meth:`SoftwareProfile.efficiency_for`; docs/model.md §2b says so).

The pipeline engine and the gradient buckets are recorded for the models that need them
(``pipeline_engine``: Megatron's interleaved 1F1B, whose transfers may overlap, against
DeepSpeed's pipeline engine, whose transfers block; the bucket sizes, for the memory model).
The aggregate step model (§2) takes none of these defaults: it keeps the schema's.

Every figure cites its source. This module imports nothing of the model: the scenario layer
fills the defaults in (:func:`profile_defaults`), and :mod:`mcsim.model.software` gives the
model layer the same records.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SoftwareProfile",
    "SOFTWARE_PROFILES",
    "DEFAULT_SOFTWARE",
    "PIPELINE_ENGINES",
    "KERNEL_LAUNCH_US",
    "profile_defaults",
]

PIPELINE_ENGINES = ("interleaved-1f1b", "blocking-1f1b")


@dataclass(frozen=True)
class SoftwareProfile:
    """The defaults of one training-software generation, each from its source (see :data:`SOFTWARE_PROFILES`).

    Attributes
    ----------
    name : str
        The key ``compute.software`` names.
    overlap_dp, overlap_tp, overlap_pp : float
        Hidden shares (0-1) of the gradient reduction, the tensor-parallel exchange and the
        pipeline transfers.
    sequence_parallel, fused_attention : bool
        Whether the software split norms and dropouts over the tensor-parallel group
        (Korthikanti et al. 2022) and ran fused (flash) attention.
    grouped_expert_gemm : bool
        Whether the software runs a MoE layer's local experts as one grouped GEMM per matrix (False:
        one small GEMM per expert, launched from a host loop; docs/model.md, "Mixture of experts").
    kernel_launch_us : float
        Host time per kernel launch, us: a loop of kernels takes at least their count times this.
    pipeline_engine : str
        ``"interleaved-1f1b"`` (Megatron: virtual stages, transfers that may overlap) or
        ``"blocking-1f1b"`` (DeepSpeed's pipeline engine: one stage per GPU, blocking transfers).
    reduce_bucket_params : float
        Parameters (elements) per gradient-reduction bucket; 0: the whole gradient buffer in
        one collective after the backward pass.
    reduce_bucket_params_per_dp_rank : float
        Where the bucket grows with the data-parallel degree d: the bucket is
        ``max(reduce_bucket_params, reduce_bucket_params_per_dp_rank x d)`` (Megatron-Core); 0 otherwise.
    allgather_bucket_params : float
        Parameters per all-gather bucket of the sharded optimizer's updated weights; 0: one buffer.
    efficiency : tuple of (GPU type, float)
        ``compute.efficiency`` of the operator model fitted to the source's iteration times on
        each GPU type it measured.
    reference_gpu : str
        The measured type whose efficiency a type not measured borrows.
    unquantified : str
        What the source's measurements need that no source quantifies (empty when nothing).
    sources : str
        Where each figure comes from.
    """

    name: str
    overlap_dp: float
    overlap_tp: float
    overlap_pp: float
    sequence_parallel: bool
    fused_attention: bool
    grouped_expert_gemm: bool
    kernel_launch_us: float
    pipeline_engine: str
    reduce_bucket_params: float
    reduce_bucket_params_per_dp_rank: float
    allgather_bucket_params: float
    efficiency: tuple[tuple[str, float], ...]
    reference_gpu: str
    unquantified: str
    sources: str

    def efficiency_for(self, gpu: str) -> float:
        """The fitted efficiency on ``gpu``, or the ``reference_gpu``'s where that type was not measured."""
        fitted = dict(self.efficiency)
        return fitted.get(gpu, fitted[self.reference_gpu])

    def measured_on(self, gpu: str) -> bool:
        """Whether the profile's efficiency was fitted on ``gpu`` (False: borrowed from ``reference_gpu``)."""
        return gpu in dict(self.efficiency)

    def reduce_bucket(self, dp: float) -> float:
        """Parameters per gradient-reduction bucket at data-parallel degree ``dp`` (0: one buffer)."""
        return max(self.reduce_bucket_params, self.reduce_bucket_params_per_dp_rank * dp)


# Host time per kernel launch: Meta's Holistic Trace Analysis documentation (facebookresearch/
# HolisticTraceAnalysis, docs/source/features/cuda_kernel_launch_stats.rst, "Short GPU kernels"):
# "Usually, the launch time on the CPU side is between 5-20 microseconds". No source gives a figure
# per software generation, so every profile takes the range's geometric middle, sqrt(5 x 20) = 10 us
# (the middle of a range spanning a factor of 4, on the log scale a time ratio lives on; the
# arithmetic middle, 12.5 us, would weight the upper end). docs/validation.md reports the seed study's
# direction across 5-20 us.
KERNEL_LAUNCH_US = (5.0 * 20.0) ** 0.5
# No MoE in Megatron-LM 2021-2022 (its MoE came with Megatron-Core, 2023-24): the key has no effect there;
# False says that these versions had no grouped expert GEMM.
_NO_MOE = False

# Efficiencies: the least-squares fit in log time over every case of the source (mcsim validate
# --step-time's cases, mcsim/analysis/steptime_validation.py, on its 0.001 grid); the range in the
# comment is the leave-one-out fits' (docs/validation.md, "Step time", errors per source).
_PROFILES = (
    SoftwareProfile(
        name="megatron-lm-2021",
        # Narayanan et al., SC'21 (arXiv 2104.04473), and its launch script (Megatron-LM
        # examples/academic_paper_scripts/sc21/run_table_1.sh): Megatron's own DDP
        # ("--DDP-impl local") for the models above 18B, one contiguous gradient buffer
        # all-reduced after the backward pass (not overlapped, no buckets); no overlap of the
        # TP or pipeline transfers; no sequence parallelism and no fused attention (both 2022).
        # No mixture of experts in that Megatron-LM (grouped_expert_gemm: _NO_MOE).
        overlap_dp=0.0,
        overlap_tp=0.0,
        overlap_pp=0.0,
        sequence_parallel=False,
        fused_attention=False,
        grouped_expert_gemm=_NO_MOE,
        kernel_launch_us=KERNEL_LAUNCH_US,
        pipeline_engine="interleaved-1f1b",
        reduce_bucket_params=0.0,
        reduce_bucket_params_per_dp_rank=0.0,
        allgather_bucket_params=0.0,
        efficiency=(("A100-80GB", 0.658),),  # narayanan2021: 10 cases, Selene; leave-one-out 0.648-0.674
        reference_gpu="A100-80GB",
        unquantified="",
        sources="Narayanan et al. 2021 (arXiv 2104.04473), Table 1 and run_table_1.sh; docs/validation.md",
    ),
    SoftwareProfile(
        name="megatron-lm-2022",
        # Korthikanti et al., MLSys 2023 (arXiv 2205.05198), Tables 3 and 5: the same Megatron
        # DDP and schedule a year later, with sequence parallelism (§4.2.2) and selective
        # recomputation; no overlapped communication, no fused attention. No mixture of experts
        # (grouped_expert_gemm: _NO_MOE).
        overlap_dp=0.0,
        overlap_tp=0.0,
        overlap_pp=0.0,
        sequence_parallel=True,
        fused_attention=False,
        grouped_expert_gemm=_NO_MOE,
        kernel_launch_us=KERNEL_LAUNCH_US,
        pipeline_engine="interleaved-1f1b",
        reduce_bucket_params=0.0,
        reduce_bucket_params_per_dp_rank=0.0,
        allgather_bucket_params=0.0,
        efficiency=(("A100-80GB", 0.758),),  # korthikanti2022: 8 cases, Selene; leave-one-out 0.749-0.767
        reference_gpu="A100-80GB",
        unquantified="",
        sources="Korthikanti et al. 2022 (arXiv 2205.05198), Tables 3 and 5; docs/validation.md",
    ),
    SoftwareProfile(
        name="megatron-deepspeed-2022",
        # BigScience's Megatron-DeepSpeed, as benchmarked for BLOOM (bigscience-workshop/bigscience,
        # train/tr11-176B-ml/chronicles-prequel.md, 2022-02-25): DeepSpeed's pipeline engine
        # (no interleaving; its send/recv block), ZeRO stage 1, gradients reduced after the
        # pipeline (nothing overlapped: assumed, as in docs/validation.md), no sequence
        # parallelism and no fused attention (that software had neither). Buckets: DeepSpeed's
        # defaults, reduce_bucket_size = allgather_bucket_size = 5e8 elements (DeepSpeed's
        # configuration reference, "ZeRO optimizations"; BLOOM's ds_config sets neither).
        # Its MoE is DeepSpeed-MoE's (deepspeed/moe/experts.py, Experts.forward): the input chunked
        # over the local experts and a Python loop calling each expert's MLP on its chunk, no
        # grouped GEMM (grouped_expert_gemm False).
        overlap_dp=0.0,
        overlap_tp=0.0,
        overlap_pp=0.0,
        sequence_parallel=False,
        fused_attention=False,
        grouped_expert_gemm=False,
        kernel_launch_us=KERNEL_LAUNCH_US,
        pipeline_engine="blocking-1f1b",
        reduce_bucket_params=5e8,
        reduce_bucket_params_per_dp_rank=0.0,
        allgather_bucket_params=5e8,
        efficiency=(("A100-80GB", 0.637),),  # bigscience2022 (02-25): 17 cases, Jean Zay; leave-one-out 0.631-0.648
        reference_gpu="A100-80GB",
        unquantified=(
            "a host cost per layer and microbatch (about 12 ms at TP 8 on Jean Zay, implied by the "
            "2022-02-21 benchmark) that no source quantifies: not modelled, so this profile does not "
            "order BigScience's layouts as measured (docs/validation.md)"
        ),
        sources="BigScience chronicles-prequel.md (2022-02-25); DeepSpeed config-json reference; DeepSpeed "
        "deepspeed/moe/experts.py; HTA kernel launch stats (launch time); docs/validation.md",
    ),
    SoftwareProfile(
        name="megatron-core-2024",
        # The Megatron-LM README's H100 weak-scaling table (Megatron-Core r0.8.0, July 2024):
        # overlapped DP (distributed optimizer, --overlap-grad-reduce, --overlap-param-gather),
        # TP (--tp-comm-overlap) and PP communication; sequence parallelism and fused attention
        # (assumed, docs/validation.md). Buckets: DistributedDataParallelConfig.bucket_size,
        # "max(40000000, 1000000 * dp_size) parameters" when unset (megatron/core/distributed/
        # distributed_data_parallel_config.py, r0.7-r0.8); the parameter all-gather uses the same buckets.
        # MoE: one grouped GEMM for the local experts, "Enable GroupedGEMM when num_local_experts>1
        # with --moe-grouped-gemm" (megatron/core/transformer/moe/README.md, "Performance Best
        # Practice"; its Mixtral example sets it).
        overlap_dp=1.0,
        overlap_tp=1.0,
        overlap_pp=1.0,
        sequence_parallel=True,
        fused_attention=True,
        grouped_expert_gemm=True,
        kernel_launch_us=KERNEL_LAUNCH_US,
        pipeline_engine="interleaved-1f1b",
        reduce_bucket_params=4e7,
        reduce_bucket_params_per_dp_rank=1e6,
        allgather_bucket_params=4e7,
        efficiency=(("H100-SXM", 0.594),),  # megatron_core_2024: 9 cases, DGX H100; leave-one-out 0.583-0.608
        reference_gpu="H100-SXM",
        unquantified="",
        sources="Megatron-LM README (Megatron-Core r0.8.0, H100 weak scaling); Megatron-Core "
        "DistributedDataParallelConfig; Megatron-Core MoE README (--moe-grouped-gemm); HTA kernel launch "
        "stats (launch time); docs/validation.md",
    ),
)
SOFTWARE_PROFILES: dict[str, SoftwareProfile] = {profile.name: profile for profile in _PROFILES}

# The default: today's software generation (Megatron-Core), whose published runs are the most recent.
DEFAULT_SOFTWARE = "megatron-core-2024"

# Scenario keys a profile gives under the operator step model: (section, key) -> profile attribute.
PROFILE_KEYS = {
    ("parallelism", "overlap_dp"): "overlap_dp",
    ("parallelism", "overlap_tp"): "overlap_tp",
    ("parallelism", "overlap_pp"): "overlap_pp",
    ("parallelism", "sequence_parallel"): "sequence_parallel",
    ("compute", "fused_attention"): "fused_attention",
    ("compute", "grouped_expert_gemm"): "grouped_expert_gemm",
    ("compute", "kernel_launch_us"): "kernel_launch_us",
}


def profile_defaults(raw: dict, default_gpu: str, default_step_model: str) -> dict[tuple[str, str], object]:
    """The (section, key) values the scenario tables ``raw`` leave to their software profile.

    Empty under the aggregate step model, or where ``compute.software`` or ``compute.step_model``
    is not a valid name (the validator then says what is wrong). ``default_gpu`` and
    ``default_step_model`` are the schema's defaults of ``hardware.gpu`` and ``compute.step_model``.
    """
    compute = raw.get("compute", {})
    hardware = raw.get("hardware", {})
    if not isinstance(compute, dict) or not isinstance(hardware, dict):
        return {}
    name = compute.get("software", DEFAULT_SOFTWARE)
    if compute.get("step_model", default_step_model) != "operators" or not isinstance(name, str):
        return {}
    profile = SOFTWARE_PROFILES.get(name)
    if profile is None:
        return {}
    values: dict[tuple[str, str], object] = {key: getattr(profile, attr) for key, attr in PROFILE_KEYS.items()}
    gpu = hardware.get("gpu", default_gpu)
    values[("compute", "efficiency")] = profile.efficiency_for(gpu if isinstance(gpu, str) else default_gpu)
    return {
        (section, key): value
        for (section, key), value in values.items()
        if not isinstance(raw.get(section, {}), dict) or key not in raw.get(section, {})
    }
