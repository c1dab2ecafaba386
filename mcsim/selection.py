"""Selecting the best configuration by simulation: Kim–Nelson's fully sequential procedure.

:func:`select_best` simulates a set of feasible candidate configurations in stages and
stops when the recommended one is the best within an indifference zone with
probability at least 1 − alpha, or says why it could not decide within its budget of
runs. The procedure is KN (Kim & Nelson 2001) with common random numbers: run r of
every candidate draws from the streams of (seed, r), so the runs of two candidates are
paired and the variance of their difference, not of each alone, sets how many runs
are needed. Definitions and guarantees: docs/model.md, "Selecting the best
configuration".

Runs go through the same tasks, backends (local, dask) and resume store as
``mcsim run``; stage k + 1 adds runs n .. n' - 1 of each surviving candidate, so the
selection depends only on the seed, never on workers, chunking or resumption.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import stats
from tqdm.auto import tqdm

from .backends import make_backend
from .checkpointing import checkpoint_plan
from .decisions import mean_interval
from .kernels import montecarlo as mc
from .resume import PieceStore
from .scenario import Config
from .simulate import OPTIMIZE_RUNS, _Execution, _optimize_intervals, _per_run_outputs
from .tasks import DEFAULT_CHUNK_RUNS, Task, plan_tasks, with_fixed_interval
from .workload import workload

OBJECTIVES = ("cost", "energy", "wall_time", "co2")
MODES = ("fast", "exact")
# Each stage after the first brings the survivors' runs to ceil(GROWTH * r) (at least r + 1):
# the decision overshoots the run at which KN would stop by about (GROWTH - 1) / 2 of the runs.
GROWTH = 1.25
MAX_SEED = 2**63 - 1


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """What :func:`select_best` found.

    Attributes
    ----------
    best : int
        Index (into the candidates) of the recommended configuration.
    pcs : float
        Probability of correct selection: the procedure's guaranteed lower bound
        1 − alpha when ``decided`` (1 with a single candidate); otherwise an estimate,
        the Bonferroni bound 1 − Σ P(μ_l < μ_best − δ) from pairwise paired-t
        probabilities (not a guarantee).
    decided : bool
        Whether the procedure stopped by its rule (else the budget ran out).
    reason : str
        One line: how it stopped, the survivors and the runs spent.
    runs : ndarray of int, shape (k,)
        Runs simulated per candidate (0 .. runs - 1).
    eliminated_round : ndarray of int, shape (k,)
        Stage (0: after the first stage) at which each candidate was eliminated, -1 if never.
    means : ndarray, shape (k,)
        Mean objective over each candidate's runs (objective units: USD, MWh, h, t CO2e,
        or the weighted sum).
    half_widths : ndarray, shape (k,)
        Half-width of the normal 95 % interval of each mean (same units).
    rows : dict of int to ndarray
        Kernel output rows ``(runs[i], N_OUT)`` of every candidate, runs in order.
    total_runs : int
        Runs simulated in all (the interval optimiser's grid points not included).
    configs : tuple of Config
        The candidates as simulated (``interval = "optimize"`` resolved to a fixed interval):
        pass them with the rows to :func:`mcsim.simulate._per_run_outputs`.
    delta : float
        The indifference zone in objective units (indifference × the best first-stage mean).
    h2 : float
        KN's constant h² for this k, first-stage size and alpha.
    stages : int
        Stages simulated (the first included).
    """

    best: int
    pcs: float
    decided: bool
    reason: str
    runs: np.ndarray
    eliminated_round: np.ndarray
    means: np.ndarray
    half_widths: np.ndarray
    rows: dict[int, np.ndarray]
    total_runs: int
    configs: tuple[Config, ...] = field(default=())
    delta: float = math.nan
    h2: float = math.nan
    stages: int = 0


class _RunSpec(NamedTuple):
    """What :class:`mcsim.simulate._Execution` reads of a run section."""

    seed: int
    mode: str
    runs: int


def kn_constants(k: int, first_runs: int, alpha: float) -> tuple[float, float]:
    """KN's η and h² (Kim & Nelson 2001, with c = 1).

    η = ½ [(2α / (k − 1))^(−2 / (n0 − 1)) − 1] and h² = 2 c η (n0 − 1), c = 1.

    Parameters
    ----------
    k : int
        Number of candidates (at least 2).
    first_runs : int
        First-stage runs n0 (at least 2).
    alpha : float
        1 − the guaranteed probability of correct selection.
    """
    eta = 0.5 * ((2.0 * alpha / (k - 1)) ** (-2.0 / (first_runs - 1)) - 1.0)
    return eta, 2.0 * eta * (first_runs - 1)


def _check_objective(objective: str | Mapping[str, float]) -> dict[str, float]:
    """The objective as {output name: weight}; raises ValueError when it is not one."""
    if isinstance(objective, str):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)} or a mapping of them to "
                             f"weights, got {objective!r}")
        return {objective: 1.0}
    if not isinstance(objective, Mapping) or not objective:
        raise ValueError(f"objective: expected one of {', '.join(OBJECTIVES)} or a non-empty mapping of them "
                         f"to weights, got {objective!r}")
    weights = {}
    for name, weight in objective.items():
        if name not in OBJECTIVES:
            raise ValueError(f"objective: unknown output {name!r}; expected some of {', '.join(OBJECTIVES)}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (0 <= weight < math.inf):
            raise ValueError(f"objective: the weight of {name!r} must be a finite number >= 0, got {weight!r}")
        weights[name] = float(weight)
    if not any(weights.values()):
        raise ValueError("objective: at least one weight must be > 0")
    return weights


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_arguments(configs: Sequence[Config], seed: int, mode: str, alpha: float, indifference: float,
                     first_runs: int, max_runs: int, max_total_runs: int | None, chunk_runs: int | None) -> None:
    """Raise ValueError with one clear line for any argument out of its domain."""
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence) or not configs:
        raise ValueError("configs: expected a non-empty sequence of configurations")
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, Config):
            raise ValueError(f"configs[{i}]: expected a mcsim Config, got {type(cfg).__name__}")
        wl = workload(cfg)
        if not wl.feasible:
            raise ValueError(f"configs[{i}] ({cfg.name}) is infeasible ({wl.infeasible_key}: "
                             f"{wl.infeasible_reason}); screen the candidates first")
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: expected a whole number from 0 to 2**63 - 1, got {seed!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected 'fast' or 'exact', got {mode!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha: expected a number in (0, 0.5), got {alpha!r}")
    if isinstance(indifference, bool) or not isinstance(indifference, (int, float)) or not 0 < indifference < 1:
        raise ValueError(f"indifference: expected a fraction of the best mean in (0, 1), got {indifference!r}")
    if not _is_int(first_runs) or first_runs < 2:
        raise ValueError(f"first_runs: expected a whole number >= 2 (10 or more recommended), got {first_runs!r}")
    if not _is_int(max_runs) or max_runs < first_runs:
        raise ValueError(f"max_runs: expected a whole number >= first_runs = {first_runs}, got {max_runs!r}")
    if max_total_runs is not None and (not _is_int(max_total_runs) or max_total_runs < len(configs) * first_runs):
        raise ValueError(f"max_total_runs: expected a whole number >= {len(configs) * first_runs} (first_runs "
                         f"for each of the {len(configs)} candidates), got {max_total_runs!r}")
    if chunk_runs is not None and (not _is_int(chunk_runs) or chunk_runs < 1):
        raise ValueError(f"chunk_runs: expected a whole number >= 1, got {chunk_runs!r}")


def objective_values(cfg: Config, rows: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """Per-run objective of a feasible configuration from its kernel rows: Σ weight × output.

    Outputs as :func:`mcsim.simulate._per_run_outputs` computes them (cost USD, energy MWh,
    wall_time h, co2 t CO2e).
    """
    wl = workload(cfg)
    outputs = _per_run_outputs(cfg, wl, checkpoint_plan(cfg, wl), rows)
    return sum(weight * outputs[name] for name, weight in weights.items() if weight)


class _Samples:
    """Runs so far of every candidate: kernel rows, objective values, censoring."""

    def __init__(self, configs: list[Config], weights: Mapping[str, float]) -> None:
        self.configs, self.weights = configs, weights
        k = len(configs)
        self.rows: list[np.ndarray] = [np.empty((0, mc.N_OUT)) for _ in range(k)]
        self.values: list[np.ndarray] = [np.empty(0) for _ in range(k)]
        self.censored = np.zeros(k, dtype=bool)

    def add(self, i: int, rows: np.ndarray) -> None:
        """Append the rows of candidate ``i``'s next runs (in run order)."""
        self.rows[i] = np.concatenate([self.rows[i], rows])
        self.values[i] = np.concatenate([self.values[i], objective_values(self.configs[i], rows, self.weights)])
        self.censored[i] |= bool(np.any(rows[:, mc.OUT_COMPLETED] != 1.0))

    def runs(self) -> np.ndarray:
        return np.array([len(v) for v in self.values], dtype=np.int64)


def _pair_variances(values: list[np.ndarray], alive: list[int], n0: int) -> np.ndarray:
    """S²_il of KN: sample variance of X_i − X_l over the first n0 runs (k × k; NaN off ``alive``).

    Computed from the differences themselves (not var_i + var_l − 2 cov_il, which cancels
    when common random numbers make the candidates nearly equal).
    """
    k = len(values)
    s2 = np.full((k, k), np.nan)
    first = np.array([values[i][:n0] for i in alive])
    for row, i in enumerate(alive):
        s2[i, alive] = np.var(first[row] - first, axis=1, ddof=1)
    return s2


def _eliminate(means: np.ndarray, s2: np.ndarray, alive: list[int], r: int, delta: float, h2: float) -> list[int]:
    """Survivors of KN's screen at r runs each: i stays if X̄_i ≤ X̄_l + W_il(r) for every l.

    W_il(r) = max(0, δ / (2 r) (h² S²_il / δ² − r)) (c = 1; minimisation). The pair (i, i)
    has W = 0 and never eliminates.
    """
    index = np.asarray(alive)
    m = means[index]
    w = np.maximum(0.0, delta / (2.0 * r) * (h2 * s2[np.ix_(index, index)] / delta**2 - r))
    worse = np.any(m[:, None] > m[None, :] + w, axis=1)
    return [i for i, out in zip(alive, worse) if not out]


def _last_run(s2: np.ndarray, alive: list[int], delta: float, h2: float) -> int:
    """KN's N + 1 over the surviving pairs: at that many runs W = 0 and the best mean is chosen."""
    index = np.asarray(alive)
    return math.floor(h2 * float(np.max(s2[np.ix_(index, index)])) / delta**2) + 1


def bonferroni_pcs(values: list[np.ndarray], best: int, delta: float) -> float:
    """Estimated PCS when undecided: 1 − Σ_l P(μ_l < μ_best − δ), each from a paired t.

    For each other candidate l, over the runs both have, d = X_best − X_l has mean d̄ and
    standard error s/√n; P(μ_best − μ_l > δ) ≈ 1 − T_{n−1}((δ − d̄) / (s/√n)). A
    Bonferroni bound on these approximate (flat-prior posterior) probabilities: an
    estimate, not a guarantee.
    """
    total = 0.0
    for other, x in enumerate(values):
        if other == best:
            continue
        n = min(len(x), len(values[best]))
        d = values[best][:n] - x[:n]
        se = float(np.std(d, ddof=1)) / math.sqrt(n) if n > 1 else math.inf
        if se == 0.0:
            total += float(d.mean() > delta)
        elif math.isfinite(se):
            total += float(stats.t.sf((delta - d.mean()) / se, n - 1))
        else:
            total += 1.0
    return max(0.0, 1.0 - total)


def _stage_tasks(alive: list[int], start: int, stop: int, chunk: int) -> list[Task]:
    """Tasks for runs ``start .. stop - 1`` of each candidate in ``alive``."""
    return [Task(t.config, t.start + start, t.stop + start) for t in plan_tasks(alive, stop - start, chunk)]


def _candidates(indices: Sequence[int], shown: int = 10) -> str:
    """``#3, #5, #7`` (the first ``shown``, then how many more)."""
    text = ", ".join(f"#{i}" for i in indices[:shown])
    return text + (f" and {len(indices) - shown} more" if len(indices) > shown else "")


class _Procedure:
    """The stages of one selection: simulate, screen, decide."""

    def __init__(self, execution: _Execution, samples: _Samples, chunk: int, alpha: float,
                 indifference: float, first_runs: int, max_runs: int, max_total_runs: int | None) -> None:
        self.execution, self.samples, self.chunk = execution, samples, chunk
        self.alpha, self.indifference = alpha, indifference
        self.first_runs, self.max_runs, self.max_total_runs = first_runs, max_runs, max_total_runs
        k = len(samples.configs)
        self.k = k
        self.eliminated = np.full(k, -1, dtype=np.int64)
        self.stage = 0
        self.eta, self.h2 = kn_constants(k, first_runs, alpha) if k > 1 else (math.nan, math.nan)

    def simulate(self, alive: list[int], start: int, stop: int) -> None:
        """Runs ``start .. stop - 1`` of the candidates ``alive``, appended in run order."""
        tasks = _stage_tasks(alive, start, stop, self.chunk)
        bar = self.execution.bar
        bar.total = (bar.total or 0) + sum(t.runs for t in tasks)
        bar.refresh()
        got: dict[int, list[tuple[int, np.ndarray]]] = {i: [] for i in alive}
        self.execution.execute(tasks, lambda task, rows: got[task.config].append((task.start, rows)),
                               "selection tasks")
        for i in alive:
            self.samples.add(i, np.concatenate([rows for _, rows in sorted(got[i], key=lambda item: item[0])]))

    def drop(self, alive: list[int], keep: list[int]) -> list[int]:
        """``keep``; the others of ``alive`` are marked eliminated at this stage."""
        kept = set(keep)
        for i in alive:
            if i not in kept:
                self.eliminated[i] = self.stage
        return keep

    def uncensored(self, alive: list[int]) -> list[int]:
        """``alive`` without the candidates with runs cut off at run.max_wall_days (said through notify)."""
        censored = [i for i in alive if self.samples.censored[i]]
        if censored and self.execution.notify is not None:
            self.execution.notify(f"selection: candidates {_candidates(censored)} left out: runs cut off at "
                                  "run.max_wall_days (their objective would be a lower bound)")
        return self.drop(alive, [i for i in alive if not self.samples.censored[i]])

    def tell(self, alive: list[int], r: int) -> None:
        notify = self.execution.notify
        if notify is not None:
            spent = int(self.samples.runs().sum())
            notify(f"selection stage {self.stage}: {len(alive)} of {self.k} candidates left after {r} runs each "
                   f"({spent} runs in all): {_candidates(alive)}")

    def run(self) -> tuple[int, bool, str, float]:
        """Stages until decided or out of budget; returns best, decided, reason, delta."""
        alive = list(range(self.k))
        r = self.first_runs
        self.simulate(alive, 0, r)
        alive = self.uncensored(alive)
        values = self.samples.values
        means = np.array([v.mean() for v in values])
        if not alive:
            return int(np.argmin(means)), False, self.all_censored(r), math.nan
        delta = self.indifference * float(np.min(np.abs(means[alive])))
        if len(alive) == 1:
            reason = ("only one candidate" if self.k == 1 else "one candidate left after the others were cut off")
            return alive[0], True, f"{reason} (#{alive[0]}, {r} runs)", delta
        if not delta > 0:
            best = alive[int(np.argmin(means[alive]))]
            return best, False, (f"not decided: the best first-stage mean is 0, so the relative indifference "
                                 f"zone is empty; candidates {_candidates(alive)} after {r} runs each"), delta
        s2 = _pair_variances(values, alive, self.first_runs)
        while True:
            means = np.array([v.mean() for v in values])
            alive = self.drop(alive, _eliminate(means, s2, alive, r, delta, self.h2))
            self.tell(alive, r)
            last = _last_run(s2, alive, delta, self.h2)
            if len(alive) == 1 or r >= last:
                best = alive[int(np.argmin(means[alive]))]
                how = "one survivor" if len(alive) == 1 else f"KN's last stage (N + 1 = {last} runs)"
                return best, True, (f"decided by {how}: #{best} after {r} runs each, "
                                    f"{int(self.samples.runs().sum())} runs in all"), delta
            target = min(self.max_runs, last, max(r + 1, math.ceil(GROWTH * r)))
            if self.max_total_runs is not None:
                room = (self.max_total_runs - int(self.samples.runs().sum())) // len(alive)
                target = min(target, r + room)
            if target <= r:
                best = alive[int(np.argmin(means[alive]))]
                limit = (f"max_runs = {self.max_runs}" if r >= self.max_runs
                         else f"max_total_runs = {self.max_total_runs}")
                return best, False, (f"not decided within the budget ({limit}): {len(alive)} candidates left "
                                     f"({_candidates(alive)}) after {r} runs each, "
                                     f"{int(self.samples.runs().sum())} runs in all; KN needs up to {last} "
                                     "runs each: raise the budget or widen the indifference zone"), delta
            self.stage += 1
            self.simulate(alive, r, target)
            r = target
            survivors = alive
            alive = self.uncensored(alive)
            if not alive:
                means = np.array([v.mean() for v in values])
                return survivors[int(np.argmin(means[survivors]))], False, self.all_censored(r), delta

    def all_censored(self, r: int) -> str:
        """Reason when every remaining candidate has runs cut off."""
        return (f"not decided: every remaining candidate has runs cut off at run.max_wall_days after {r} runs "
                f"each ({int(self.samples.runs().sum())} runs in all); raise run.max_wall_days")


def select_best(configs: Sequence[Config], objective: str | Mapping[str, float], *, seed: int,
                mode: str = "fast", alpha: float = 0.05, indifference: float = 0.005,
                first_runs: int = 100, max_runs: int = 5000, max_total_runs: int | None = None,
                workers: int | None = None, scheduler: str | None = None, store: PieceStore | None = None,
                progress: bool | None = None, notify: Callable[[str], None] | None = None,
                chunk_runs: int | None = None) -> SelectionResult:
    """Select the configuration with the lowest mean objective, with a stated probability.

    Kim & Nelson's (2001) fully sequential procedure KN with common random numbers,
    screened at the end of stages of runs (docs/model.md, "Selecting the best
    configuration").

    Parameters
    ----------
    configs : sequence of Config
        Feasible candidates (the caller screens them); ``interval = "optimize"`` is
        resolved first, as :func:`mcsim.simulate` does.
    objective : str or mapping
        "cost" (USD), "energy" (MWh), "wall_time" (h) or "co2" (t CO2e), or a mapping of
        those names to weights >= 0: the weighted sum of the per-run outputs. Minimised.
    seed : int
        Run r of every candidate uses the streams of (seed, r).
    mode : {"fast", "exact"}
        Kernel mode.
    alpha : float
        The recommendation is within the indifference zone of the best with
        probability >= 1 - alpha (0 < alpha < 0.5).
    indifference : float
        Indifference zone relative to the best mean: δ = indifference × the best
        first-stage mean (objective units).
    first_runs : int
        First-stage runs n0 of every candidate (>= 2; KN's variances come from them).
    max_runs : int
        Most runs of one candidate.
    max_total_runs : int, optional
        Most runs in all (at least ``len(configs) * first_runs``).
    workers, scheduler : optional
        Backend, as for :func:`mcsim.simulate`.
    store : PieceStore, optional
        Resume store; must be for this seed and mode. Its ``configs`` are set to the candidates.
    progress : bool, optional
        One tqdm bar over the runs; by default only when stderr is a terminal.
    notify : callable, optional
        Called with one line per stage (survivors, runs spent) and the backend's messages.
    chunk_runs : int, optional
        Runs per task (default 250); does not change the result.

    Returns
    -------
    SelectionResult

    Raises
    ------
    ValueError
        An argument out of its domain, an infeasible candidate, or a store made for
        another seed or mode.
    BackendUnavailable
        No dask extra, or no dask scheduler answering at ``scheduler``.
    """
    weights = _check_objective(objective)
    _check_arguments(configs, seed, mode, alpha, indifference, first_runs, max_runs, max_total_runs, chunk_runs)
    configs = list(configs)
    spec = _RunSpec(int(seed), mode, min(max_runs, OPTIMIZE_RUNS))
    if store is not None:
        header = store.header(Task(0, 0, 1))
        if header["seed"] != spec.seed or header["mode"] != mode:
            raise ValueError(f"store: made for seed {header['seed']} and mode {header['mode']!r}, "
                             f"not seed {spec.seed} and mode {mode!r}")
        store.configs = configs  # pieces are checked against the candidate they ran
    chunk = chunk_runs or DEFAULT_CHUNK_RUNS
    backend = make_backend(workers, scheduler)
    try:
        if notify is not None:
            notify(f"selecting the best of {len(configs)} candidates by simulation on {backend.description}")
        with tqdm(total=0, disable=None if progress is None else not progress, unit="run", desc="select",
                  leave=False, dynamic_ncols=True) as bar:
            execution = _Execution(backend, configs, spec, store, bar, notify)
            to_optimize = [i for i, c in enumerate(configs) if c.checkpoint.interval.kind == "optimize"]
            for i, optimum in (_optimize_intervals(execution, to_optimize, chunk) if to_optimize else {}).items():
                configs[i] = with_fixed_interval(configs[i], optimum.interval_iterations)
            samples = _Samples(configs, weights)
            procedure = _Procedure(execution, samples, chunk, alpha, indifference, first_runs, max_runs,
                                   max_total_runs)
            best, decided, reason, delta = procedure.run()
    finally:
        backend.close()
    return _result(procedure, samples, best, decided, reason, delta, alpha)


def _result(procedure: _Procedure, samples: _Samples, best: int, decided: bool, reason: str, delta: float,
            alpha: float) -> SelectionResult:
    values = samples.values
    means, _, high = mean_interval(np.array([np.pad(v, (0, max(map(len, values)) - len(v)), constant_values=np.nan)
                                             for v in values]))
    if len(values) == 1:
        pcs = 1.0
    elif decided:
        pcs = 1.0 - alpha
    else:
        pcs = bonferroni_pcs(values, best, delta) if math.isfinite(delta) else math.nan
    runs = samples.runs()
    if decided and len(values) > 1:
        reason += f"; P(correct selection) >= {1 - alpha:g} within {delta:.4g} of the best"
    elif not decided and math.isfinite(pcs):
        reason += f" (estimated P(correct selection) {pcs:.3f}, Bonferroni over paired t)"
    return SelectionResult(best=best, pcs=pcs, decided=decided, reason=reason, runs=runs,
                           eliminated_round=procedure.eliminated.copy(), means=means, half_widths=high - means,
                           rows={i: r for i, r in enumerate(samples.rows)}, total_runs=int(runs.sum()),
                           configs=tuple(samples.configs), delta=delta, h2=procedure.h2, stages=procedure.stage + 1)
