"""Estimators for choosing a configuration when the inputs are uncertain, on plain arrays.

A result with parameter draws holds, per configuration c, draw d and run r, a value
x[c, d, r] of an objective. These functions take such arrays, already signed so that
lower is better (the objective times +1, or -1 where higher is better), and return
the decision statistics that :mod:`mcsim.analysis` puts on the sweep's coordinates and
:mod:`mcsim.analysis.robustness` splits by input. Definitions (docs/model.md, "Decisions under
uncertainty"):

* ``m[c, d]``, the mean over the R runs of draw d: the objective of c "in draw d";
* P(best) of c: the share of draws in which m[c, d] is the best (ties shared), with a
  95 % Wilson interval over the D draws;
* regret of c in draw d: m[c, d] - min_c' m[c', d] (objective units, >= 0); expected
  regret: its mean over draws, with the normal 95 % interval over draws.

The draw means carry the runs' noise: what is estimated is the probability that c's
R-run mean is the best, which tends to the probability that c is best in expectation as
R grows. ``p_best_clear`` counts only the draws won by more than 1.96 standard errors of
the paired difference to the runner-up, so ``p_best - p_best_clear`` is the share of
draws decided within the runs' noise.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

Z_95 = 1.959963984540054  # Phi^-1(0.975)


def wilson_interval(successes: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927).

    Unlike the normal interval ``p ± z sqrt(p(1-p)/n)`` it does not collapse to a
    point at p = 0 or 1. ``successes`` may be fractional (ties counted half), and so may
    ``n`` (an effective number of trials).
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact bounds at p = 0 and 1,
    high = 1.0 if successes >= n else min(1.0, centre + half)  # free of round-off
    return (low, high)


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():  # rows without a finite value: NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=axis)


def draw_means(signed: np.ndarray) -> np.ndarray:
    """m[c, d]: mean over runs (last axis) of ``signed`` (configs x draws x runs), NaN runs skipped."""
    return _nanmean(np.asarray(signed, dtype=float), axis=2)


def regret(means: np.ndarray) -> np.ndarray:
    """Regret m[c, d] - min_c' m[c', d] (>= 0) of each configuration in each draw (NaN rows left out of the min)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return means - np.nanmin(means, axis=0)


def mean_interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over the last axis and its normal 95 % interval (NaN with fewer than two finite values)."""
    values = np.asarray(values, dtype=float)
    n = np.sum(np.isfinite(values), axis=-1)
    mean = _nanmean(values, axis=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(values, axis=-1, ddof=1)
        half = np.where(n > 1, Z_95 * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return mean, mean - half, mean + half


def decision_arrays(signed: np.ndarray) -> dict[str, np.ndarray]:
    """P(best), its Wilson interval, the clear share and the expected regret of each configuration.

    Parameters
    ----------
    signed : ndarray
        (configs, draws, runs), lower is better; a configuration that may not be ranked
        is all NaN. Draws in which no configuration has a finite mean are left out.

    Returns
    -------
    dict of str to ndarray
        One value per configuration: ``p_best``, ``p_best_ci95_low``, ``p_best_ci95_high``,
        ``p_best_clear``, ``expected_regret``, ``expected_regret_ci95_low``,
        ``expected_regret_ci95_high`` (NaN for an all-NaN configuration), and ``draws``
        (the number of draws used, one value).
    """
    signed = np.asarray(signed, dtype=float)
    means = draw_means(signed)
    ranked = np.isfinite(means).any(axis=1)
    valid = np.isfinite(means[ranked]).any(axis=0) if ranked.any() else np.zeros(means.shape[1], bool)
    means, signed = means[:, valid], signed[:, valid]
    n_draws = int(valid.sum())
    regrets = regret(means)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        winners = means == np.nanmin(means, axis=0)
        shares = winners / np.maximum(winners.sum(axis=0), 1)  # a tie shares the draw
    wins = shares.sum(axis=1)
    clear = _clear_wins(signed, means)
    out = {"p_best": wins / max(n_draws, 1), "p_best_clear": clear / max(n_draws, 1)}
    bounds = np.array([wilson_interval(w, n_draws) for w in wins]).reshape(-1, 2)
    out["p_best_ci95_low"], out["p_best_ci95_high"] = bounds[:, 0], bounds[:, 1]
    mean, low, high = mean_interval(regrets)
    out.update(expected_regret=mean, expected_regret_ci95_low=low, expected_regret_ci95_high=high)
    for name in out:
        out[name] = np.where(ranked, out[name], np.nan)
    out["draws"] = np.array(n_draws)
    return out


def _clear_wins(signed: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Per configuration, the draws it wins by more than 1.96 standard errors of the paired
    run differences to the draw's runner-up (every win counts with one configuration)."""
    n_configs, n_draws = means.shape
    clear = np.zeros(n_configs)
    if n_draws == 0:
        return clear
    order = np.argsort(np.where(np.isfinite(means), means, np.inf), axis=0, kind="stable")
    first = order[0]
    if int(np.isfinite(means).any(axis=1).sum()) < 2:  # a single candidate wins every draw
        np.add.at(clear, first, 1.0)
        return clear
    columns = np.arange(n_draws)
    differences = signed[order[1], columns, :] - signed[first, columns, :]  # runner-up minus winner, paired runs
    n = np.sum(np.isfinite(differences), axis=1)
    lead = _nanmean(differences, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        se = np.nanstd(differences, axis=1, ddof=1) / np.sqrt(n)
    is_clear = (lead > 0) & ((se == 0) | (lead > Z_95 * se))  # NaN se (one run): never clear
    np.add.at(clear, first[is_clear], 1.0)
    return clear


def within_arrays(indicator: np.ndarray, probability: float | None = None) -> dict[str, np.ndarray]:
    """Predictive probability of an event pooled over draws and runs, per configuration.

    Parameters
    ----------
    indicator : ndarray
        (configs, draws, runs): 1 where the run met the event (finished in time), 0
        where not, NaN where the configuration cannot run.
    probability : float, optional
        Also give the share of draws whose own probability is at least this.

    Returns
    -------
    dict of str to ndarray
        ``p_within`` (mean over draws and runs) with ``p_within_ci95_low/high``: the
        Wilson interval at the effective number of independent trials
        ``n_eff = p (1 - p) / V``, V = s^2 / D the variance of the pooled share from the
        spread s of the D per-draw shares (Kish's design effect of the draws as clusters),
        n_eff = D when V = 0 or p is 0 or 1, and at most D x R. With ``probability``:
        ``draws_meeting`` and its Wilson interval over draws ``draws_meeting_ci95_low/high``.
    """
    indicator = np.asarray(indicator, dtype=float)
    n_configs, n_draws, n_runs = indicator.shape
    per_draw = _nanmean(indicator, axis=2)
    p = _nanmean(per_draw, axis=1)
    out = {name: np.full(n_configs, np.nan) for name in ("p_within_ci95_low", "p_within_ci95_high")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        variance = np.nanvar(per_draw, axis=1, ddof=1) / n_draws if n_draws > 1 else np.zeros(n_configs)
    for c in range(n_configs):
        if not math.isfinite(p[c]):
            continue
        pc, v = float(p[c]), float(variance[c])
        n_eff = pc * (1 - pc) / v if v > 0 and 0 < pc < 1 else float(n_draws)
        n_eff = min(max(n_eff, 1.0), float(n_draws * n_runs))
        out["p_within_ci95_low"][c], out["p_within_ci95_high"][c] = wilson_interval(pc * n_eff, n_eff)
    out["p_within"] = p
    if probability is not None:
        meeting = np.where(np.isfinite(per_draw), per_draw >= probability, np.nan)
        share = _nanmean(meeting, axis=1)
        out["draws_meeting"] = share
        bounds = np.array(
            [wilson_interval(s * n_draws, n_draws) if math.isfinite(s) else (math.nan, math.nan) for s in share]
        ).reshape(-1, 2)
        out["draws_meeting_ci95_low"], out["draws_meeting_ci95_high"] = bounds[:, 0], bounds[:, 1]
    return out
