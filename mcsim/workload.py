"""The deterministic workload model of one configuration (docs/model.md §2).

Symbols: N params, L layers, h hidden, s seq_len, B global batch (sequences),
D tokens, G gpus, t tp, p pp, d = G/(t p) dp, b microbatch, v interleave,
m = B/(d b) microbatches per pipeline per iteration, I = ceil(D/(B s)).
All times in seconds, bytes in bytes, memory reported in GB (1e9 bytes).
The equations, with their sources, are written out in ``docs/model.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .scenario import Config
from .strategies import STRATEGIES

BF16_BYTES = 2
# Guards that keep every run finite (docs/model.md §2): at most 1e10 iterations, and an
# iteration at least 2^-40 of max_wall, so t + iteration_time > t for all t <= max_wall
# (doubles carry 53 bits) and a run takes at most 2^40 steps.
MAX_ITERATIONS = 10**10
TIME_RESOLUTION = 2.0**-40


@dataclass(frozen=True)
class Workload:
    """Per-configuration quantities; timings are NaN when structurally infeasible."""

    feasible: bool
    infeasible_key: str          # scenario key the reason is about ("" when feasible)
    infeasible_reason: str       # "" when feasible
    iterations: int
    dp: int
    microbatches: int            # m, per pipeline per iteration
    model_flops: float           # per iteration, 6 N B s
    hardware_flops: float        # per iteration, with recomputation
    t_comp_s: float
    bubble_s: float
    tp_comm_s: float             # exposed
    pp_comm_s: float             # exposed
    dp_comm_s: float             # exposed
    memory_per_gpu_gb: float
    mfu_ideal: float
    intra_bytes_per_gpu: float = math.nan   # moved per iteration on the intra-node link (all, not only exposed)
    inter_bytes_per_gpu: float = math.nan   # ... on the inter-node link

    @property
    def compute_time_s(self) -> float:
        """t_comp + pipeline bubble: the part that scales with stragglers and frequency."""
        return self.t_comp_s + self.bubble_s

    @property
    def comm_time_s(self) -> float:
        """Exposed communication per iteration."""
        return self.tp_comm_s + self.pp_comm_s + self.dp_comm_s

    @property
    def iteration_time_s(self) -> float:
        """Ideal (failure- and straggler-free) iteration time."""
        return self.compute_time_s + self.comm_time_s

    @property
    def ideal_time_s(self) -> float:
        """Ideal training time, iterations x ideal iteration time."""
        return self.iterations * self.iteration_time_s


def ring_allreduce_s(ranks: int, nbytes: float, bandwidth_gbps: float, latency_s: float) -> float:
    """Ring all-reduce time: ``2(n-1)/n * bytes / bw + 2(n-1) * latency`` (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * nbytes / (bandwidth_gbps * 1e9) + 2.0 * (ranks - 1) * latency_s


def activation_bytes_per_layer(cfg: Config) -> float:
    """Activation memory of one layer and one microbatch on one GPU, bytes.

    Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
    Models" (MLSys 2023, arXiv 2205.05198), Table 2, with tensor and sequence
    parallelism: ``sbh(34 + 5as/h)/t`` without recomputation, ``34 sbh/t`` with
    selective recomputation, ``2 sbh/t`` (the layer input only) with full.
    Without dropout the two sbh-byte dropout masks and the as^2b-byte
    attention mask and 2as^2b-byte attention dropout output of their §4.1
    derivation are not stored: ``32 + 2as/h`` and ``32``.
    """
    s, h = cfg.model.seq_len, cfg.model.hidden
    b, t = cfg.parallelism.microbatch, cfg.parallelism.tp
    heads = cfg.model.heads or max(1, h // 128)
    base, attention = (34.0, 5.0) if cfg.model.dropout else (32.0, 2.0)
    per = {"none": base + attention * heads * s / h, "selective": base, "full": 2.0}[cfg.model.recompute]
    return s * b * h * per / t


def stage_layers(layers: int, stages: int) -> list[int]:
    """Layers on each pipeline stage.

    When ``stages`` does not divide ``layers`` the stages that get one layer
    fewer are the outermost ones, first and last alternately (the first stage
    also holds the embedding, the last the output layer), as Llama 3 did
    (arXiv 2407.21783, §3.3.2).
    """
    per, extra = divmod(layers, stages)
    if extra == 0:
        return [per] * stages
    counts = [per + 1] * stages
    order = [i // 2 if i % 2 == 0 else stages - 1 - i // 2 for i in range(stages)]
    for stage in order[: stages - extra]:
        counts[stage] = per
    return counts


def peak_activation_bytes(cfg: Config, microbatches: int) -> float:
    """Activation memory of the fullest pipeline stage under 1F1B, bytes.

    Stage i (0-based) of p holds the activations of min(p - i, m) in-flight
    microbatches for each of its layers; the peak is the maximum over stages.
    """
    p = cfg.parallelism.pp
    per_layer = activation_bytes_per_layer(cfg)
    return per_layer * max(n * min(p - i, microbatches) for i, n in enumerate(stage_layers(cfg.model.layers, p)))


def _infeasible(key: str, reason: str, iterations: int = 0) -> Workload:
    nan = math.nan
    return Workload(False, key, reason, iterations, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan)


def workload(cfg: Config) -> Workload:
    """Evaluate the deterministic workload model of one configuration."""
    mdl, par, net = cfg.model, cfg.parallelism, cfg.network
    N, L, h, s, B, D = mdl.params, mdl.layers, mdl.hidden, mdl.seq_len, mdl.global_batch, mdl.tokens
    G, t, p, b, v = par.gpus, par.tp, par.pp, par.microbatch, par.interleave
    iterations = math.ceil(D / (B * s))
    gpn = cfg.hardware.gpus_per_node
    if G % gpn:
        return _infeasible("parallelism.gpus", f"gpus = {G} is not a multiple of "
                                               f"hardware.gpus_per_node = {gpn}", iterations)
    if G % (t * p):
        return _infeasible("parallelism.tp", f"tp*pp = {t}*{p} = {t * p} does not divide gpus = {G}",
                           iterations)
    d = G // (t * p)
    if B % (d * b):
        return _infeasible("model.global_batch", f"global_batch = {B} is not divisible by "
                                                 f"dp*microbatch = {d}*{b} = {d * b}", iterations)
    if p > L:
        return _infeasible("parallelism.pp", f"pp = {p} exceeds layers = {L}", iterations)
    strategy_problem = STRATEGIES[cfg.checkpoint.strategy].infeasible(cfg)
    if strategy_problem:
        return _infeasible("checkpoint.strategy", strategy_problem, iterations)
    for fclass in cfg.failures:
        if fclass.scope == "node" and (G // gpn) % fclass.domain_nodes:
            return _infeasible(f"failures.{fclass.name}.domain_nodes",
                               f"domain_nodes = {fclass.domain_nodes} does not divide the job's {G // gpn} nodes",
                               iterations)
    m = B // (d * b)
    if not cfg.gpu.freq_min_mhz <= cfg.freq_mhz <= cfg.gpu.freq_max_mhz:
        return _infeasible("compute.freq_mhz", f"freq_mhz = {cfg.freq_mhz:g} is outside the {cfg.hardware.gpu}'s "
                                               f"range {cfg.gpu.freq_min_mhz:g}..{cfg.gpu.freq_max_mhz:g} MHz",
                           iterations)
    if iterations > MAX_ITERATIONS:
        return _infeasible("model.tokens", f"{iterations:.3g} iterations (tokens / (global_batch * seq_len)) "
                                           f"exceed the supported {MAX_ITERATIONS:.0e}", iterations)

    model_flops = 6.0 * N * B * s
    if mdl.recompute == "full":
        hardware_flops = model_flops * 4.0 / 3.0
    elif mdl.recompute == "selective":
        # Forward attention scores recomputed: QK^T and AV, 2 s^2 h FLOPs each per sequence and layer.
        hardware_flops = model_flops + 4.0 * B * s * s * h * L
    else:
        hardware_flops = model_flops
    peak_flops = cfg.gpu.peak_tflops * 1e12
    # DVFS: the compute-bound share of the compute time scales as f_max / f, the rest
    # (memory-bound kernels) does not.
    share = cfg.compute.freq_scaling_share
    slowdown = share * cfg.gpu.freq_max_mhz / cfg.freq_mhz + (1.0 - share)
    t_comp = hardware_flops / (G * peak_flops * cfg.compute.efficiency) * slowdown
    bubble = t_comp * (p - 1) / (v * m)

    latency_s = net.latency_us * 1e-6
    act_bytes = b * s * h * BF16_BYTES
    # TP spans nodes when tp > gpus_per_node: it then runs on the inter-node link.
    tp_bw = net.intra_gbps if t <= gpn else net.inter_gbps
    tp_comm = (L / p) * m * 4 * ring_allreduce_s(t, act_bytes, tp_bw, latency_s) * (1 - par.overlap_tp)
    pp_comm = 2.0 * m * v * (act_bytes / (net.inter_gbps * 1e9) + latency_s) if p > 1 else 0.0
    grad_bytes = BF16_BYTES * N / (t * p)
    dp_comm = ring_allreduce_s(d, grad_bytes, net.inter_gbps, latency_s) * (1 - par.overlap_dp)
    # Bytes each GPU sends per iteration (a ring all-reduce sends 2(n-1)/n of the buffer).
    tp_bytes = (L / p) * m * 4 * (2.0 * (t - 1) / t * act_bytes if t > 1 else 0.0)
    pp_bytes = 2.0 * m * v * act_bytes if p > 1 else 0.0
    dp_bytes = 2.0 * (d - 1) / d * grad_bytes if d > 1 else 0.0
    intra_bytes = tp_bytes if t <= gpn else 0.0
    inter_bytes = pp_bytes + dp_bytes + (tp_bytes if t > gpn else 0.0)

    state_bytes = N / (t * p) * (2 + 2 + 12 / d)
    memory_gb = (state_bytes + peak_activation_bytes(cfg, m)) / 1e9

    iteration_time = t_comp + bubble + tp_comm + pp_comm + dp_comm
    mfu = 6.0 * N * D / (G * peak_flops * iterations * iteration_time)
    max_wall_s = cfg.run.max_wall_days * 86400.0
    if iteration_time < max_wall_s * TIME_RESOLUTION:
        # Below this, adding an iteration to the clock late in a run would not move it.
        return _infeasible("model.global_batch", f"iteration time {iteration_time:.3g} s is below the time "
                                                 f"resolution of a {cfg.run.max_wall_days:g}-day run "
                                                 f"({max_wall_s * TIME_RESOLUTION:.3g} s); use larger batches "
                                                 "or a shorter run.max_wall_days", iterations)
    if memory_gb > cfg.gpu.memory_gb:
        reason = (f"memory per GPU {memory_gb:.1f} GB exceeds the {cfg.hardware.gpu}'s "
                  f"{cfg.gpu.memory_gb:g} GB")
        return Workload(False, "parallelism", reason, iterations, d, m, model_flops, hardware_flops,
                        t_comp, bubble, tp_comm, pp_comm, dp_comm, memory_gb, mfu, intra_bytes, inter_bytes)
    return Workload(True, "", "", iterations, d, m, model_flops, hardware_flops, t_comp, bubble,
                    tp_comm, pp_comm, dp_comm, memory_gb, mfu, intra_bytes, inter_bytes)
