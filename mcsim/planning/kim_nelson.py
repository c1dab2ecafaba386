"""Kim & Nelson's fully sequential selection procedure KN, on arrays of outputs.

:func:`kim_nelson` selects, among k candidates, the one with the lowest mean output,
drawing their observations in stages through a caller's function (the simulation, for
:func:`mcsim.planning.selection.select_best`; random numbers, in the tests). Observation r of
every candidate should share random numbers (common random numbers): the procedure
uses the variances of the paired differences. Definitions, choices and sources:
docs/model.md, "Selecting the best configuration".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from mcsim._lazy import lazy_module

if TYPE_CHECKING:
    from scipy import stats
else:  # imported at its first use: importing scipy.stats costs ~0.5 s, and a decided selection needs none
    stats = lazy_module("scipy.stats")

# Each stage after the first brings the survivors' observations to ceil(GROWTH * r) (at
# least r + 1): the decision overshoots the r at which KN would stop by at most 25 %.
GROWTH = 1.25

Draw = Callable[[list[int], int, int], Mapping[int, np.ndarray]]


class Outcome(NamedTuple):
    """How :func:`kim_nelson` ended."""

    best: int  # index of the recommended candidate
    decided: bool  # stopped by KN's rule (else out of budget, or nothing eligible)
    reason: str  # one line: how it stopped, survivors, observations spent
    delta: float  # indifference zone in output units (NaN if never set)
    h2: float  # KN's h² (NaN with one candidate)
    eliminated: np.ndarray  # stage at which each candidate was eliminated, -1 if never
    stages: int  # stages drawn, the first included
    values: list[np.ndarray]  # every candidate's observations, in order


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
    return [i for i, out in zip(alive, worse, strict=False) if not out]


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


def candidates_text(indices: Sequence[int], shown: int = 10) -> str:
    """``#3, #5, #7`` (the first ``shown``, then how many more)."""
    text = ", ".join(f"#{i}" for i in indices[:shown])
    return text + (f" and {len(indices) - shown} more" if len(indices) > shown else "")


class _KN:
    """The stages of one selection: draw, screen, decide."""

    def __init__(
        self,
        k: int,
        draw: Draw,
        excluded: Callable[[int], bool],
        alpha: float,
        indifference: float,
        first_runs: int,
        max_runs: int,
        max_total_runs: int | None,
        notify,
    ) -> None:
        self.k, self.draw, self.excluded, self.notify = k, draw, excluded, notify
        self.indifference, self.first_runs = indifference, first_runs
        self.max_runs, self.max_total_runs = max_runs, max_total_runs
        self.values: list[np.ndarray] = [np.empty(0) for _ in range(k)]
        self.eliminated = np.full(k, -1, dtype=np.int64)
        self.stage = 0
        self.h2 = kn_constants(k, first_runs, alpha)[1] if k > 1 else math.nan

    def spent(self) -> int:
        return sum(len(v) for v in self.values)

    def means(self) -> np.ndarray:
        return np.array([v.mean() if len(v) else np.inf for v in self.values])

    def add(self, alive: list[int], start: int, stop: int) -> list[int]:
        """Observations ``start .. stop - 1`` of ``alive``; returns those not excluded."""
        drawn = self.draw(alive, start, stop)
        for i in alive:
            self.values[i] = np.concatenate([self.values[i], np.asarray(drawn[i], dtype=float)])
        excluded = [i for i in alive if self.excluded(i)]
        if excluded and self.notify is not None:
            self.notify(
                f"selection: candidates {candidates_text(excluded)} left out: runs cut off at "
                "run.max_wall_days (their objective would be a lower bound)"
            )
        return self.drop(alive, [i for i in alive if i not in excluded])

    def drop(self, alive: list[int], keep: list[int]) -> list[int]:
        """``keep``; the others of ``alive`` are marked eliminated at this stage."""
        kept = set(keep)
        for i in alive:
            if i not in kept:
                self.eliminated[i] = self.stage
        return keep

    def tell(self, alive: list[int], r: int) -> None:
        if self.notify is not None:
            self.notify(
                f"selection stage {self.stage}: {len(alive)} of {self.k} candidates left after {r} runs "
                f"each ({self.spent()} runs in all): {candidates_text(alive)}"
            )

    def none_eligible(self, r: int) -> str:
        return (
            f"not decided: every remaining candidate has runs cut off at run.max_wall_days after {r} runs "
            f"each ({self.spent()} runs in all); raise run.max_wall_days"
        )

    def first_stage(self) -> tuple[list[int], float, tuple[int, bool, str, float] | None]:
        """The first stage; returns the survivors, δ, and the outcome when it already decides."""
        r = self.first_runs
        alive = self.add(list(range(self.k)), 0, r)
        means = self.means()
        if not alive:
            return alive, math.nan, (int(np.argmin(means)), False, self.none_eligible(r), math.nan)
        delta = self.indifference * float(np.min(np.abs(means[alive])))
        if len(alive) == 1:
            reason = "only one candidate" if self.k == 1 else "one candidate left after the others were cut off"
            return alive, delta, (alive[0], True, f"{reason} (#{alive[0]}, {r} runs)", delta)
        if not delta > 0:
            return (
                alive,
                delta,
                (
                    alive[int(np.argmin(means[alive]))],
                    False,
                    f"not decided: the best first-stage mean is 0, so the relative indifference zone is "
                    f"empty; candidates {candidates_text(alive)} after {r} runs each",
                    delta,
                ),
            )
        return alive, delta, None

    def run(self) -> tuple[int, bool, str, float]:
        """Stages until decided or out of budget; returns best, decided, reason, delta."""
        alive, delta, ended = self.first_stage()
        if ended is not None:
            return ended
        r = self.first_runs
        s2 = _pair_variances(self.values, alive, r)
        while True:
            means = self.means()
            alive = self.drop(alive, _eliminate(means, s2, alive, r, delta, self.h2))
            self.tell(alive, r)
            last = _last_run(s2, alive, delta, self.h2)
            best = alive[int(np.argmin(means[alive]))]
            if len(alive) == 1 or r >= last:
                how = "one survivor" if len(alive) == 1 else f"KN's last stage (N + 1 = {last} runs)"
                return best, True, f"decided by {how}: #{best} after {r} runs each, {self.spent()} runs in all", delta
            target = min(self.max_runs, last, max(r + 1, math.ceil(GROWTH * r)))
            if self.max_total_runs is not None:
                target = min(target, r + (self.max_total_runs - self.spent()) // len(alive))
            if target <= r:
                limit = (
                    f"max_runs = {self.max_runs}" if r >= self.max_runs else f"max_total_runs = {self.max_total_runs}"
                )
                return (
                    best,
                    False,
                    (
                        f"not decided within the budget ({limit}): {len(alive)} candidates left "
                        f"({candidates_text(alive)}) after {r} runs each, {self.spent()} runs in all; "
                        f"KN needs up to {last} runs each: raise the budget or widen the "
                        "indifference zone"
                    ),
                    delta,
                )
            self.stage += 1
            survivors, alive, r = alive, self.add(alive, r, target), target
            if not alive:
                return survivors[int(np.argmin(self.means()[survivors]))], False, self.none_eligible(r), delta


def kim_nelson(
    k: int,
    draw: Draw,
    *,
    alpha: float,
    indifference: float,
    first_runs: int,
    max_runs: int,
    max_total_runs: int | None = None,
    excluded: Callable[[int], bool] | None = None,
    notify: Callable[[str], None] | None = None,
) -> Outcome:
    """Select the candidate of lowest mean with KN (Kim & Nelson 2001), screened at stage ends.

    Parameters
    ----------
    k : int
        Number of candidates.
    draw : callable
        ``draw(alive, start, stop)`` returns {i: observations start .. stop - 1 of
        candidate i} for every i in ``alive`` (arrays of stop - start floats).
    alpha : float
        P(the choice is within δ of the best) >= 1 - alpha.
    indifference : float
        δ = indifference × the lowest first-stage mean (absolute value).
    first_runs, max_runs : int
        First-stage observations n0 and the most per candidate.
    max_total_runs : int, optional
        The most observations in all.
    excluded : callable, optional
        ``excluded(i)`` after each draw: True leaves candidate i out (runs cut off).
    notify : callable, optional
        Called with one line per stage.

    Arguments are not validated here (:func:`mcsim.planning.selection.select_best` does it).
    """
    kn = _KN(k, draw, excluded or (lambda i: False), alpha, indifference, first_runs, max_runs, max_total_runs, notify)
    best, decided, reason, delta = kn.run()
    return Outcome(best, decided, reason, delta, kn.h2, kn.eliminated, kn.stage + 1, kn.values)
