"""The candidates of a plan: its search enumerated into arrays, and each one as the lower layers take it.

:func:`enumerate_candidates` expands the plan's ``[search]`` into :class:`Candidates` (one array
element per candidate, no Python loop per candidate), keeping only the layouts the workload model
can run. A candidate is then handed on in the form each lower layer reads: all of them as the
model's :class:`~mcsim.model.expected_runs.CandidateRuns` (:func:`candidate_runs`: the workload
model's :class:`~mcsim.model.layouts.Layouts`, each with the candidate whose workload it shares,
and per GPU type the catalog fields of :func:`gpu_field` and the price of :func:`type_prices`),
for the screen's estimates; one of them as a :class:`~mcsim.scenario.config.Config`
(:func:`candidate_config`, what ``mcsim run`` and the simulation take).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.io.format import format_bytes
from mcsim.model.expected_runs import CandidateRuns
from mcsim.model.layouts import RECOMPUTE_CODES, Layouts
from mcsim.planning.plan_file import Plan
from mcsim.scenario.catalog import gpu_hour_usd
from mcsim.scenario.config import Config
from mcsim.scenario.limits import over_memory_limit

MAX_INTERLEAVE = 8
MAX_CANDIDATES = 20_000_000  # the screen's arrays stay within a few GB
# Peak bytes per candidate of the enumeration and the screen: 568 measured with tracemalloc on
# plan-llama3-70b (217,800 candidates, 124 MB); twice that leaves room for the later stages.
SCREEN_BYTES_PER_CANDIDATE = 1136
# The fields that make a candidate's layout (all but its checkpoint strategy and interval).
LAYOUT_FIELDS = (
    "gpu_type",
    "gpus",
    "tp",
    "pp",
    "cp",
    "ep",
    "expert_tp",
    "microbatch",
    "interleave",
    "recompute",
    "sequence_parallel",
    "zero_stage",
    "freq_mhz",
)


@dataclass(frozen=True)
class Candidates:
    """The enumerated candidates: one array element each (indices into the search's value tuples)."""

    gpu_type: np.ndarray  # index into search.gpu_types
    gpus: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray  # expert-parallel degree (1 for a dense model)
    expert_tp: np.ndarray  # expert tensor-parallel degree (1 for a dense model)
    dp: np.ndarray
    microbatch: np.ndarray
    interleave: np.ndarray
    recompute: np.ndarray  # RECOMPUTE_CODES
    sequence_parallel: np.ndarray  # bool
    zero_stage: np.ndarray  # 0..3
    strategy: np.ndarray  # index into search.strategy
    interval: np.ndarray  # index into search.interval
    freq_mhz: np.ndarray
    enumerated: int  # combinations before the structural filter
    # of them, those valid but for the expert layout (ep dividing the experts, expert_tp ep the t cp d ranks)
    expert_layout_rejected: int = 0

    def __len__(self) -> int:
        return int(self.gpus.size)

    def subset(self, indices: np.ndarray) -> Candidates:
        """The candidates at ``indices``, in that order (``enumerated`` unchanged)."""
        counts = ("enumerated", "expert_layout_rejected")
        arrays = {f.name: getattr(self, f.name)[indices] for f in dataclasses.fields(self) if f.name not in counts}
        return Candidates(**arrays, enumerated=self.enumerated, expert_layout_rejected=self.expert_layout_rejected)


def _heads(plan: Plan) -> int:
    model = plan.scenario.base.model
    return model.heads or max(1, model.hidden // 128)


def default_values(plan: Plan) -> dict[str, tuple[int, ...]]:
    """The default values of ``tp``, ``pp`` and ``interleave`` for the plan's model.

    ``tp``: powers of two within a node that divide the heads. ``pp``: 1 to the layers; where
    it does not divide them the stages are uneven, the outermost ones a layer short, as Llama 3
    (PP 16 for 126 layers) and BLOOM (PP 12 for 70 layers) did (docs/model.md §2); only those
    dividing G / tp survive the enumeration. ``interleave``: 1 to 8 (kept where every virtual
    stage holds a layer, below).
    """
    base = plan.scenario.base
    gpn, layers, heads = base.hardware.gpus_per_node, base.model.layers, _heads(plan)
    tp = tuple(t for t in (2**k for k in range(0, 21)) if t <= gpn and heads % t == 0)
    return {"tp": tp or (1,), "pp": tuple(range(1, layers + 1)), "interleave": tuple(range(1, MAX_INTERLEAVE + 1))}


def _check_grid(plan: Plan, size: int, what: str) -> None:
    if size > MAX_CANDIDATES:
        raise ScenarioError(
            plan.source,
            "search",
            f"{size:,} combinations of {what} to enumerate; expected at most {MAX_CANDIDATES:,} (narrow the lists)",
        )


def _check_screen_memory(plan: Plan, candidates: int) -> None:
    """Refuse, before anything is allocated, a search whose screen would not fit in memory."""
    need = candidates * SCREEN_BYTES_PER_CANDIDATE
    if (over := over_memory_limit(need)) is not None:
        raise ScenarioError(
            plan.source,
            "search",
            f"{candidates:,} candidates need about {format_bytes(need)} of memory to screen, {over}; narrow the lists",
        )


def _cross(plan: Plan, columns: tuple[np.ndarray, ...], values: np.ndarray, name: str) -> tuple[np.ndarray, ...]:
    """Every row of ``columns`` with every one of ``values`` (rows outer, values inner)."""
    _check_grid(plan, columns[0].size * values.size, f"the layouts kept so far x {name}")
    rows, k = (g.ravel() for g in np.meshgrid(np.arange(columns[0].size), np.arange(values.size), indexing="ij"))
    return (*(c[rows] for c in columns), values[k])


def enumerate_candidates(plan: Plan) -> Candidates:
    """Every valid combination of the search (vectorised; no Python loop per candidate).

    Kept: ``tp * pp * cp`` divides G and ``cp`` the sequence; ``global_batch`` divisible by ``dp * microbatch``;
    ``pp <= layers``; ``interleave`` 1, or ``pp > 1`` and at least one layer per virtual
    stage (``interleave <= layers // pp``; uneven splits as for the stages); G within
    ``min_gpus..max_gpus`` is a constraint
    (kept, rejected by the screen with its reason). A mixture of experts' expert layout (``ep``,
    ``expert_tp``, Megatron-Core's): ``ep`` divides ``model.experts`` and ``expert_tp * ep`` the
    ``tp * cp * dp`` ranks of a pipeline stage; the combinations valid but for it are counted
    (:attr:`Candidates.expert_layout_rejected`, the plan report's reason for them).
    """
    layout, enumerated_layouts, expert_rejected = _valid_layouts(plan)
    return _with_choices(plan, layout, enumerated_layouts, expert_rejected)


def _valid_layouts(plan: Plan) -> tuple[tuple[np.ndarray, ...], int, int]:
    """The valid layouts ``(G, tp, pp, cp, ep, expert_tp, microbatch, interleave, dp)`` of the search, the
    count of combinations of their axes before the filter, and of those valid but for the expert layout."""
    search, model = plan.search, plan.scenario.base.model
    defaults = default_values(plan)
    tp = np.array(search.tp or defaults["tp"], dtype=np.int64)
    pp = np.array(search.pp or defaults["pp"], dtype=np.int64)
    mb = np.array(search.microbatch, dtype=np.int64)
    v = np.array(search.interleave or defaults["interleave"], dtype=np.int64)
    gpus = np.array(search.gpus, dtype=np.int64)
    cp = np.array(search.cp or (plan.scenario.base.parallelism.cp,), dtype=np.int64)
    enumerated = gpus.size * tp.size * pp.size * cp.size * mb.size * v.size * _expert_axes_size(plan)
    # Axis by axis, each product filtered before the next axis joins (the full product of a legal search
    # can be billions of elements); the order is that of the full product (gpus, tp, pp, cp, microbatch, v,
    # then ep and expert_tp).
    _check_grid(plan, gpus.size * tp.size * pp.size, "gpus x tp x pp")
    G, t, p = (g.ravel() for g in np.meshgrid(gpus, tp, pp, indexing="ij"))
    ok = (G % (t * p) == 0) & (p <= model.layers)
    G, t, p = G[ok], t[ok], p[ok]
    G, t, p, c = _cross(plan, (G, t, p), cp, "cp")
    ok = (G % (t * p * c) == 0) & (model.seq_len % c == 0)
    G, t, p, c = G[ok], t[ok], p[ok], c[ok]
    G, t, p, c, b = _cross(plan, (G, t, p, c), mb, "microbatch")
    d = G // (t * p * c)
    ok = model.global_batch % (d * b) == 0
    G, t, p, c, b, d = G[ok], t[ok], p[ok], c[ok], b[ok], d[ok]
    G, t, p, c, b, d, iv = _cross(plan, (G, t, p, c, b, d), v, "interleave")
    ok = (iv == 1) | ((p > 1) & (iv <= model.layers // p))
    if not ok.any():
        raise ScenarioError(
            plan.source,
            "search",
            "no combination of the searched values is a valid layout "
            "(tp*pp*cp dividing gpus, cp dividing seq_len, dp*microbatch dividing global_batch, "
            "pp <= layers, interleave <= layers // pp)",
        )
    layout, rejected = _expert_layouts(plan, (G[ok], t[ok], p[ok], c[ok], b[ok], iv[ok], d[ok]))
    return layout, enumerated, rejected


def _expert_values(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """The searched ``ep`` and ``expert_tp`` values (the scenario's where ``[search]`` names none)."""
    search, par = plan.search, plan.scenario.base.parallelism
    ep = np.array(search.ep or (par.ep,), dtype=np.int64)
    return ep, np.array(search.expert_tp or (par.expert_tp,), dtype=np.int64)


def _expert_axes_size(plan: Plan) -> int:
    ep, expert_tp = _expert_values(plan)
    return int(ep.size * expert_tp.size)


def _expert_layouts(plan: Plan, layout: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], int]:
    """The valid layouts ``(G, t, p, c, b, v, d)`` with every searched ``ep`` and ``expert_tp`` that fit them,
    ``(G, t, p, c, e, expert_tp, b, v, d)``, and the count of those that do not (Megatron-Core's layout: ``ep``
    divides the experts, ``expert_tp * ep`` the ``t c d`` ranks of a pipeline stage; a dense model: 1, 1)."""
    ep, expert_tp = _expert_values(plan)
    G, t, p, c, b, iv, d, e = _cross(plan, layout, ep, "ep")
    G, t, p, c, b, iv, d, e, et = _cross(plan, (G, t, p, c, b, iv, d, e), expert_tp, "expert_tp")
    experts = max(plan.scenario.base.model.experts, 1)
    ok = (experts % e == 0) & ((t * c * d) % (et * e) == 0)
    if not ok.any():
        raise ScenarioError(
            plan.source,
            "search.ep",
            f"no searched expert layout fits a valid layout (ep dividing model.experts = {experts}, "
            f"expert_tp*ep dividing the tp*cp*dp GPUs of a pipeline stage)",
        )
    return (G[ok], t[ok], p[ok], c[ok], e[ok], et[ok], b[ok], iv[ok], d[ok]), int(ok.size - np.count_nonzero(ok))


def _with_choices(
    plan: Plan, layout: tuple[np.ndarray, ...], enumerated_layouts: int, expert_rejected: int
) -> Candidates:
    """Every valid layout with every GPU type, recomputation, software choice, strategy, interval and clock
    (GPU type outermost, the clock fastest), but the choices without effect."""
    search, par = plan.search, plan.scenario.base.parallelism
    G, t, p, c, e, et, b, iv, d = layout
    freqs = search.freq_mhz
    sp_values = np.array(search.sequence_parallel or (par.sequence_parallel,), dtype=np.bool_)
    zero_values = np.array(search.zero_stage or (par.zero_stage,), dtype=np.int64)
    extra = (
        len(search.gpu_types),
        len(search.recompute),
        sp_values.size,
        zero_values.size,
        len(search.strategy),
        len(search.interval),
        len(freqs) if freqs else 1,
    )
    total = G.size * int(np.prod(extra))
    if total > MAX_CANDIDATES:
        raise ScenarioError(
            plan.source, "search", f"{total:,} candidates; expected at most {MAX_CANDIDATES:,} (narrow the lists)"
        )
    _check_screen_memory(plan, total)
    grids = np.meshgrid(np.arange(extra[0]), np.arange(G.size), *(np.arange(n) for n in extra[1:]), indexing="ij")
    gtype, lay, rec, sp, zero, strat, interval, fidx = (g.ravel() for g in grids)
    # Choices without effect make copies: sequence parallelism without tensor parallelism, a
    # ZeRO stage without data- or context-parallel ranks (nor, in a mixture of experts, expert
    # data-parallel ones: edp = t cp d / (expert_tp ep) ranks shard the experts' state). Only the
    # first listed value is kept there (whole blocks of strategies, intervals and clocks go, so the
    # order stays).
    edp = (t * c * d) // (et * e) if plan.scenario.base.model.experts else np.ones_like(t)
    void = ((t[lay] == 1) & (sp > 0)) | ((d[lay] * c[lay] == 1) & (edp[lay] == 1) & (zero > 0))
    if void.any():
        gtype, lay, rec, sp, zero, strat, interval, fidx = (
            g[~void] for g in (gtype, lay, rec, sp, zero, strat, interval, fidx)
        )
    recompute_codes = np.array([RECOMPUTE_CODES[r] for r in search.recompute], dtype=np.int64)
    if freqs:
        freq = np.array(freqs, dtype=np.float64)[fidx]
    else:
        freq = np.array([spec.freq_max_mhz for spec in plan.gpu_specs], dtype=np.float64)[gtype]
    return Candidates(
        gtype, G[lay], t[lay], p[lay], c[lay], e[lay], et[lay], d[lay], b[lay], iv[lay], recompute_codes[rec],
        sp_values[sp], zero_values[zero], strat, interval, freq, enumerated_layouts * int(np.prod(extra)),
        expert_rejected * int(np.prod(extra)),
    )  # fmt: skip


def candidate_config(plan: Plan, cand: Candidates, index: int) -> Config:
    """The :class:`Config` of one candidate (for ``mcsim run`` and the simulation)."""
    base, search = plan.scenario.base, plan.search
    spec = plan.gpu_specs[int(cand.gpu_type[index])]
    recompute = {code: name for name, code in RECOMPUTE_CODES.items()}[int(cand.recompute[index])]
    return dataclasses.replace(
        base,
        gpu=spec,
        hardware=dataclasses.replace(base.hardware, gpu=search.gpu_types[int(cand.gpu_type[index])]),
        parallelism=dataclasses.replace(
            base.parallelism,
            gpus=int(cand.gpus[index]),
            tp=int(cand.tp[index]),
            pp=int(cand.pp[index]),
            microbatch=int(cand.microbatch[index]),
            interleave=int(cand.interleave[index]),
            sequence_parallel=bool(cand.sequence_parallel[index]),
            cp=int(cand.cp[index]),
            ep=int(cand.ep[index]),
            expert_tp=int(cand.expert_tp[index]),
            zero_stage=int(cand.zero_stage[index]),
        ),
        model=dataclasses.replace(base.model, recompute=recompute),
        compute=dataclasses.replace(base.compute, freq_mhz=float(cand.freq_mhz[index])),
        checkpoint=dataclasses.replace(
            base.checkpoint,
            strategy=search.strategy[int(cand.strategy[index])],
            interval=search.interval[int(cand.interval[index])],
        ),
    )


def reference_candidate(plan: Plan, cand: Candidates) -> int:
    """Index of the candidate that is the plan file's own ``[parallelism]`` layout (its GPU type, size,
    recompute, strategy, interval and clock too), or -1 when the file names none or it is not searched."""
    if not plan.has_reference:
        return -1
    base, search = plan.scenario.base, plan.search
    par = base.parallelism
    try:
        gpu_type = search.gpu_types.index(base.hardware.gpu)
        strategy = search.strategy.index(base.checkpoint.strategy)
        interval = search.interval.index(base.checkpoint.interval)
    except ValueError:
        return -1
    own = {
        "gpu_type": gpu_type,
        "gpus": par.gpus,
        "tp": par.tp,
        "pp": par.pp,
        "microbatch": par.microbatch,
        "interleave": par.interleave,
        "recompute": RECOMPUTE_CODES[base.model.recompute],
        "sequence_parallel": par.sequence_parallel,
        "zero_stage": par.zero_stage,
        "cp": par.cp,
        "ep": par.ep,
        "expert_tp": par.expert_tp,
        "strategy": strategy,
        "interval": interval,
        "freq_mhz": base.freq_mhz,
    }
    match = np.ones(len(cand), dtype=bool)
    for name, value in own.items():
        match &= getattr(cand, name) == value
    found = np.flatnonzero(match)
    return int(found[0]) if found.size else -1


def gpu_field(plan: Plan, cand: Candidates, name: str) -> np.ndarray:
    """Per candidate, the field ``name`` of its GPU type's catalog entry (the scenario's overrides applied)."""
    return _type_field(plan, name)[cand.gpu_type]


def _type_field(plan: Plan, name: str) -> np.ndarray:
    """Per searched GPU type, the field ``name`` of its catalog entry (the scenario's overrides applied)."""
    return np.array([getattr(spec, name) for spec in plan.gpu_specs], dtype=np.float64)


def candidate_runs(plan: Plan, cand: Candidates) -> CandidateRuns:
    """The candidates as the model's first-order estimates take them
    (:class:`~mcsim.model.expected_runs.CandidateRuns`): their layouts, each with the candidate whose
    workload it shares, and per GPU type the rest of its catalog fields and its rental price."""
    return CandidateRuns(
        _layouts(plan, cand),
        _layout_representatives(plan, cand),
        cand.strategy,
        cand.interval,
        cand.gpu_type,
        _type_field(plan, "d2h_gbps"),
        _type_field(plan, "tdp_w"),
        _type_field(plan, "idle_w"),
        type_prices(plan),
        plan.search.strategy,
        plan.search.interval,
    )


def type_prices(plan: Plan) -> np.ndarray:
    """Rental price of each searched GPU type, USD/(GPU h), in ``search.gpu_types`` order.

    NaN where the type has no price (only under the ``owned`` cost model, which uses none).
    """
    cost = plan.scenario.base.cost
    prices = (gpu_hour_usd(cost, name) for name in plan.search.gpu_types)
    return np.array([np.nan if price is None else price for price in prices], dtype=np.float64)


def _layouts(plan: Plan, cand: Candidates) -> Layouts:
    """The workload model's :class:`~mcsim.model.workload.Layouts` of the candidates."""
    specs = {
        name: gpu_field(plan, cand, name)
        for name in ("peak_tflops", "memory_gb", "freq_min_mhz", "freq_max_mhz", "hbm_gbps", "fp8_tflops")
    }
    return Layouts(
        cand.gpus,
        cand.tp,
        cand.pp,
        cand.microbatch,
        cand.interleave,
        cand.recompute,
        cand.freq_mhz,
        specs["peak_tflops"],
        specs["memory_gb"],
        specs["freq_min_mhz"],
        specs["freq_max_mhz"],
        specs["hbm_gbps"],
        specs["fp8_tflops"],
        cand.sequence_parallel,
        cand.zero_stage,
        cand.cp,
        cand.ep,
        cand.expert_tp,
    )


def _layout_representatives(plan: Plan, cand: Candidates) -> np.ndarray:
    """Per candidate, the index of the candidate with its layout, strategy 0 and interval 0.

    The workload model does not read the checkpoint strategy or interval, and
    :func:`enumerate_candidates` varies them (then the clock) fastest, so the candidate
    ``i - strategy * I * F - interval * F`` has the same layout, GPU type, recomputation,
    software and clock. A subset of candidates (the uncertain inputs' finalists) does not have
    that order: each candidate is then its own representative.
    """
    n_freq = len(plan.search.freq_mhz) if plan.search.freq_mhz else 1
    per_strategy = len(plan.search.interval) * n_freq
    rep = np.arange(len(cand)) - cand.strategy * per_strategy - cand.interval * n_freq
    if rep.size == 0 or rep.min() < 0:
        return np.arange(len(cand))
    same = (cand.strategy[rep] == 0) & (cand.interval[rep] == 0)
    for name in LAYOUT_FIELDS:
        same &= getattr(cand, name)[rep] == getattr(cand, name)
    return rep if bool(same.all()) else np.arange(len(cand))
