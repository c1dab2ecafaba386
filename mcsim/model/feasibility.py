"""Whether candidate layouts can run, and why not (docs/model.md §2).

The workload model checks every candidate layout in a fixed order and keeps the first check
it fails as a code (:func:`feasibility_codes`, on arrays; the planner's screen rejects by it);
a single configuration's objection (:func:`objection`) adds the checks that concern the whole
configuration (its checkpoint strategy, its failure domains: :func:`configuration_problem`)
and puts each in words, as (the scenario key it is about, the reason).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mcsim.model.layouts import Layouts, ParallelDegrees
from mcsim.model.memory import capacity_gb
from mcsim.model.strategies import STRATEGIES
from mcsim.scenario.config import Config

# Guards that keep every run finite (docs/model.md §2): at most 1e10 iterations, and an
# iteration at least 2^-40 of max_wall, so t + iteration_time > t for all t <= max_wall
# (doubles carry 53 bits) and a run takes at most 2^40 steps.
MAX_ITERATIONS = 10**10
TIME_RESOLUTION = 2.0**-40

# Feasibility codes of workload_arrays, in the order they are checked (the first failure wins).
# Between PP_LAYERS and FREQUENCY the scalar workload() checks the checkpoint strategy and the
# failure domains (configuration-level checks; the screen checks them per group).
FEASIBLE = 0
NODE_MULTIPLE = 1  # parallelism.gpus: G not a multiple of gpus_per_node
TP_PP_DIVIDE = 2  # parallelism.tp: t p does not divide G
BATCH_DIVIDE = 3  # model.global_batch: d b does not divide B
PP_LAYERS = 4  # parallelism.pp: p > L
FREQUENCY = 5  # compute.freq_mhz outside the GPU's range
TOO_MANY_ITERATIONS = 6  # model.tokens
TIME_RESOLUTION_CODE = 7  # model.global_batch: iteration below the time resolution
MEMORY = 8  # parallelism: memory per GPU exceeds the GPU's (its catalog GB are GiB: memory.capacity_gb)
CP_SEQUENCE = 9  # parallelism.cp: cp does not divide seq_len (checked after TP_PP_DIVIDE)
INTERLEAVE_LAYERS = 10  # parallelism.interleave: p v > L, a virtual stage without a layer (after PP_LAYERS)
# parallelism.ep: ep does not divide model.experts, or expert_tp ep does not divide the t cp d ranks of a
# pipeline stage (Megatron-Core's expert layout; after CP_SEQUENCE)
EP_LAYOUT = 11
STRUCTURAL = (NODE_MULTIPLE, TP_PP_DIVIDE, CP_SEQUENCE, EP_LAYOUT, BATCH_DIVIDE, PP_LAYERS, INTERLEAVE_LAYERS)


def feasibility_codes(
    cfg: Config,
    lay: Layouts,
    deg: ParallelDegrees,
    iterations: int,
    iteration_time_s: np.ndarray,
    memory_gb: np.ndarray,
) -> np.ndarray:
    """The code of the first check each candidate fails (:data:`FEASIBLE` where none), in the codes' order.

    ``iterations`` of the run, ``iteration_time_s`` and ``memory_gb`` per candidate, from the
    workload model; ``cfg`` supplies the model, ``gpus_per_node`` and ``max_wall_days``.
    """
    mdl = cfg.model
    G, t, p, c, d, b, v = deg.gpus, deg.tp, deg.pp, deg.cp, deg.dp, deg.microbatch, deg.interleave
    max_wall_s = cfg.run.max_wall_days * 86400.0
    checks = (
        (NODE_MULTIPLE, G % cfg.hardware.gpus_per_node != 0),
        (TP_PP_DIVIDE, G % (t * p * c) != 0),
        (CP_SEQUENCE, mdl.seq_len % c != 0),
        (EP_LAYOUT, (max(mdl.experts, 1) % deg.ep != 0) | ((t * c * d) % (deg.expert_tp * deg.ep) != 0)),
        (BATCH_DIVIDE, mdl.global_batch % (d * b) != 0),
        (PP_LAYERS, p > mdl.layers),
        (INTERLEAVE_LAYERS, p * v > mdl.layers),
        (FREQUENCY, ~((lay.freq_min_mhz <= lay.freq_mhz) & (lay.freq_mhz <= lay.freq_max_mhz))),
        (TOO_MANY_ITERATIONS, np.full(G.shape, iterations > MAX_ITERATIONS)),
        # Below this, adding an iteration to the clock late in a run would not move it.
        (TIME_RESOLUTION_CODE, iteration_time_s < max_wall_s * TIME_RESOLUTION),
        (MEMORY, memory_gb > capacity_gb(lay.memory_gb)),
    )
    code = np.zeros(G.shape, dtype=np.int64)
    for which, failed in checks:
        code[(code == FEASIBLE) & failed] = which
    return code


def configuration_problem(cfg: Config) -> tuple[str, str] | None:
    """The checkpoint strategy's or a failure domain's objection to ``cfg`` as (key, reason), or None."""
    strategy_problem = STRATEGIES[cfg.checkpoint.strategy].infeasible(cfg)
    if strategy_problem:
        return "checkpoint.strategy", strategy_problem
    nodes = cfg.parallelism.gpus // cfg.hardware.gpus_per_node
    for fclass in cfg.failures:
        if fclass.scope == "node" and nodes % fclass.domain_nodes:
            return (
                f"failures.{fclass.name}.domain_nodes",
                f"domain_nodes = {fclass.domain_nodes} does not divide the job's {nodes} nodes",
            )
    return None


class Checked(NamedTuple):
    """One configuration, or one of its training phases, as the workload model checked it."""

    cfg: Config
    code: int  # its feasibility code
    iterations: int
    iteration_time_s: float
    memory_per_gpu_gb: float


class Objection(NamedTuple):
    """Why one configuration cannot run: the scenario key it is about and the reason."""

    key: str
    reason: str
    timed: bool  # the workload's times and memory are meaningful (only memory's objection leaves them so)


def objection(whole: Checked, phases: list[Checked]) -> Objection | None:
    """The objection to one configuration, or None where it can run.

    ``phases``: its training phases, each checked on its own, to name the phase an objection is
    about (``[whole]`` for a configuration of one phase).
    """
    cfg, code = whole.cfg, whole.code
    if code in STRUCTURAL:
        return Objection(*_phase_reason(cfg, code, phases), timed=False)
    problem = configuration_problem(cfg)
    if problem:
        return Objection(*problem, timed=False)
    if code == FREQUENCY:
        return Objection(
            "compute.freq_mhz",
            f"freq_mhz = {cfg.freq_mhz:g} is outside the {cfg.hardware.gpu}'s "
            f"range {cfg.gpu.freq_min_mhz:g}..{cfg.gpu.freq_max_mhz:g} MHz",
            timed=False,
        )
    if code == TOO_MANY_ITERATIONS:
        return Objection(
            "model.tokens",
            f"{whole.iterations:.3g} iterations (tokens / (global_batch * seq_len)) "
            f"exceed the supported {MAX_ITERATIONS:.0e}",
            timed=False,
        )
    if code == TIME_RESOLUTION_CODE:
        return _time_resolution_objection(whole, phases)
    if code == MEMORY:
        return _memory_objection(whole, phases)
    return None


def _time_resolution_objection(whole: Checked, phases: list[Checked]) -> Objection:
    """An iteration too short for the clock of a run of ``run.max_wall_days``, naming the phase that has it."""
    cfg = whole.cfg
    max_wall_s = cfg.run.max_wall_days * 86400.0
    key, prefix, iteration_time = "model.global_batch", "", whole.iteration_time_s
    for i, phase in enumerate(phases if cfg.phases.token_shares else []):
        if phase.code == TIME_RESOLUTION_CODE:  # name the phase, with its own iteration time
            key, prefix, iteration_time = "phases.global_batch", f"training phase {i + 1}: ", phase.iteration_time_s
            break
    return Objection(
        key,
        f"{prefix}iteration time {iteration_time:.3g} s is below the time "
        f"resolution of a {cfg.run.max_wall_days:g}-day run "
        f"({max_wall_s * TIME_RESOLUTION:.3g} s); use larger batches "
        "or a shorter run.max_wall_days",
        timed=False,
    )


def _memory_objection(whole: Checked, phases: list[Checked]) -> Objection:
    """Memory per GPU beyond the GPU's, naming the phase that needs the most."""
    cfg = whole.cfg
    reason = (
        f"memory per GPU {whole.memory_per_gpu_gb:.1f} GB exceeds the {cfg.hardware.gpu}'s "
        f"{float(capacity_gb(cfg.gpu.memory_gb)):.1f} GB ({cfg.gpu.memory_gb:g} GiB)"
    )
    if len(phases) > 1:  # name the phase that needs it
        needs = [phase.memory_per_gpu_gb for phase in phases]
        reason = f"training phase {int(np.argmax(needs)) + 1}: {reason}"
    return Objection("parallelism", reason, timed=True)


def _phase_reason(cfg: Config, code: int, phases: list[Checked]) -> tuple[str, str]:
    """The structural reason of ``code`` as (key, reason), naming the first phase that has it."""
    if len(phases) == 1:
        return _structural_reason(cfg, code)
    for i, phase in enumerate(phases):
        if phase.code == code:
            key, reason = _structural_reason(phase.cfg, code)
            if key in ("model.global_batch", "model.seq_len") and getattr(cfg.phases, key.split(".")[1]):
                key = "phases." + key.split(".")[1]
            if cfg.phases.seq_len:  # the sequence length came from [phases]
                reason = reason.replace("model.seq_len", "phases.seq_len")
            return key, f"training phase {i + 1}: {reason}"
    return _structural_reason(cfg, code)


def _structural_reason(cfg: Config, code: int) -> tuple[str, str]:
    par, gpn = cfg.parallelism, cfg.hardware.gpus_per_node
    G, t, p, b = par.gpus, par.tp, par.pp, par.microbatch
    if code == NODE_MULTIPLE:
        return "parallelism.gpus", f"gpus = {G} is not a multiple of hardware.gpus_per_node = {gpn}"
    cp = par.cp
    if code == TP_PP_DIVIDE:
        if cp > 1:
            return "parallelism.tp", f"tp*pp*cp = {t}*{p}*{cp} = {t * p * cp} does not divide gpus = {G}"
        return "parallelism.tp", f"tp*pp = {t}*{p} = {t * p} does not divide gpus = {G}"
    if code == CP_SEQUENCE:
        return "parallelism.cp", f"cp = {cp} does not divide model.seq_len = {cfg.model.seq_len}"
    if code == EP_LAYOUT:
        return _expert_layout_reason(cfg)
    if code == BATCH_DIVIDE:
        d = G // (t * p * cp)
        return "model.global_batch", (
            f"global_batch = {cfg.model.global_batch} is not divisible by dp*microbatch = {d}*{b} = {d * b}"
        )
    if code == INTERLEAVE_LAYERS:
        v = par.interleave
        return "parallelism.interleave", (
            f"pp*interleave = {p}*{v} = {p * v} virtual stages exceed layers = {cfg.model.layers}"
        )
    return "parallelism.pp", f"pp = {p} exceeds layers = {cfg.model.layers}"


def _expert_layout_reason(cfg: Config) -> tuple[str, str]:
    """Why the expert layout does not fit: ep does not divide the experts, or expert_tp x ep the ranks of a stage."""
    par = cfg.parallelism
    if max(cfg.model.experts, 1) % par.ep:
        return "parallelism.ep", f"ep = {par.ep} does not divide model.experts = {cfg.model.experts}"
    dense_ranks = par.gpus // (par.pp * par.cp * par.tp) * par.tp * par.cp
    return "parallelism.ep", (
        f"expert_tp*ep = {par.expert_tp}*{par.ep} = {par.expert_tp * par.ep} does not divide the "
        f"tp*cp*dp = {dense_ranks} GPUs of a pipeline stage"
    )
