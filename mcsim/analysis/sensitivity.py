"""Which uncertain input matters most: Sobol indices of a result with parameter draws.

For each configuration the output of each draw is its mean over the draw's runs;
the indices say how much of the variance of that mean, across draws, each
uncertain input explains (SALib: Herman & Usher, JOSS 2017; Iwanaga et al.,
SESMO 2022):

* ``run.design = "saltelli"``: first-order ``S1`` and total ``ST`` Sobol
  indices from the Saltelli design (Saltelli et al. 2010, Comput. Phys. Commun.
  181: 259-270; SALib ``analyze.sobol``), each with a bootstrap confidence
  interval. The draws of one base point share their random streams
  (:func:`mcsim.scenario.uncertain.draw_offset`), so an input without effect has ``ST``
  exactly 0.
* any other design (given data): the first-order index ``S1`` and the
  moment-independent ``delta`` (Borgonovo 2007, Reliab. Eng. Syst. Saf. 92:
  771-784; SALib ``analyze.delta``), with bootstrap intervals. A total index
  needs the Saltelli design: ``ST`` is NaN.

Inputs are ranked (1 = most influential, ``rank``) by the variance-based index: ``ST`` when there is
one (Saltelli design), else ``S1``; the tables show each with its interval, so two inputs whose
intervals overlap are not told apart. ``delta`` is computed for every design as a second opinion
(``rank_delta``): it sees effects on the whole distribution of the output, not only on its
variance, but it is non-negative and biased upward with few draws, so an input without effect
gets a delta of 0.05-0.10 at a few hundred draws (docs/capacity-planning.md): a ranking by
delta put the storage bandwidth third where its S1 is about 0. ``delta_disagrees`` marks an
input that delta orders against the variance-based ranking where the latter is clear: delta puts
it above an input whose index's interval lies wholly above its own, or below one whose interval
lies wholly below (:func:`disagreements` names the pairs). Sobol indices of ``y = x1 + 2 x2``
(independent uniforms: S1 = ST = 0.2, 0.8) are in the tests.

Bootstrap resamples (``resamples``, default :data:`RESAMPLES` = 100, SALib's own default):
SALib's intervals are ``z * s_B``, s_B the standard deviation of the index over B
bootstrap resamples, so B sets only how well the half-width is known: its relative
standard error is about ``1 / sqrt(2 (B - 1))``, 7 % at B = 100 and 3 % at B = 500
(Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, §6.4: 25-200 resamples
suffice for a standard error). The delta estimate is the mean of B bias-corrected
resamples (Plischke et al. 2013, eq. 30), so B adds a Monte Carlo error of about
``s_B / sqrt(B)`` to it: a twentieth of the half-width at B = 100. The time grows with B:
on the README's uncertain example (3 configurations, 5 inputs, 256 draws) 500 resamples,
the earlier default, took 2.7x the CPU time of 100 (docs/capacity-planning.md, "Which input
matters most"). SALib computes the point estimates of S1 and delta on one bootstrap resample
of the draws, so they move with the resampling stream by about their half-width.

Progress: a bar over the (configuration, input) pairs (:func:`mcsim.engine.execution.progress_bar`),
drawn once the work has taken 2 s.

Correlated inputs (a joint ``mvlognormal`` group, :func:`mcsim.scenario.uncertain_table.parse_joint`):
Sobol's variance decomposition, and the Saltelli estimators of ``S1`` and ``ST``,
assume independent inputs, so a scenario with a joint group cannot use the Saltelli
design (refused when it is read). The given-data ``S1`` (the correlation ratio
``Var E[Y | X_i] / Var Y``) and ``delta`` stay well defined with dependent inputs
(Borgonovo 2007; Plischke, Borgonovo & Smith 2013, Eur. J. Oper. Res. 226: 536-550),
but each then measures an input's *full* effect, including what it carries through
the inputs it is correlated with: the indices of a group overlap and do not add up.
The result names those inputs (attribute ``correlated_inputs``) and ``mcsim
sensitivity`` says so under its table.
"""

from __future__ import annotations

import contextlib
import io
import numbers
import warnings
from collections.abc import Hashable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from mcsim._lazy import lazy_module
from mcsim._version import __version__
from mcsim.io.variables import PER_RUN

if TYPE_CHECKING:
    from SALib.analyze import delta as salib_delta
    from SALib.analyze import sobol as salib_sobol

    from mcsim.engine import execution
else:  # imported at the first indices: SALib takes a noticeable share of the start-up of every command
    salib_delta = lazy_module("SALib.analyze.delta")
    salib_sobol = lazy_module("SALib.analyze.sobol")
    # the progress bar's module, at the first indices: the engine's imports (Numba, the kernels) are not
    # needed to read a result file
    execution = lazy_module("mcsim.engine.execution")

INDICES = ("S1", "ST", "delta")
CONF_LEVEL = 0.95
# The fewest draws from which the indices are estimated at all: SALib's given-data delta/S1
# estimators return NaN (or bins of one point) below a few dozen samples, and the Saltelli
# estimators need several base points. Fewer draws are refused instead of ranking NaN.
MIN_GIVEN_DATA_DRAWS = 32
MIN_SALTELLI_BASE = 4


def draws_needed(design: str, inputs: int) -> int:
    """The fewest parameter draws :func:`sensitivity` accepts for ``inputs`` uncertain inputs.

    ``MIN_GIVEN_DATA_DRAWS`` for the given-data designs (sobol, lhs); for the Saltelli design,
    ``MIN_SALTELLI_BASE`` base points of ``inputs + 2`` draws each.
    """
    return MIN_SALTELLI_BASE * (inputs + 2) if design == "saltelli" else MIN_GIVEN_DATA_DRAWS


RESAMPLES = 100  # default bootstrap resamples (see the module docstring)
MIN_RESAMPLES = 10
MAX_RESAMPLES = 100_000
PROGRESS_DELAY_S = 2.0  # the bar appears only once the indices have taken this long


def check_resamples(resamples: object) -> int:
    """``resamples`` as an int from :data:`MIN_RESAMPLES` to :data:`MAX_RESAMPLES` (one-line ValueError otherwise)."""
    value = int(resamples) if isinstance(resamples, numbers.Integral) and not isinstance(resamples, bool) else -1
    if not MIN_RESAMPLES <= value <= MAX_RESAMPLES:
        raise ValueError(
            f"resamples: expected a whole number of bootstrap resamples from {MIN_RESAMPLES} to "
            f"{MAX_RESAMPLES:,}, got {resamples!r}"
        )
    return value


def uncertain_inputs(ds: xr.Dataset) -> list[str]:
    """Keys of the uncertain inputs of a result (its ``uncertain_inputs`` attribute).

    Raises
    ------
    ValueError
        The result has no parameter draws.
    """
    keys = str(ds.attrs.get("uncertain_inputs", "")).split()
    if "draw" not in ds.dims or not keys or any(key not in ds for key in keys):
        raise ValueError(
            "the result has no parameter draws (run a scenario with an [uncertain] table and run.draws > 0)"
        )
    return keys


def correlated_inputs(ds: xr.Dataset) -> list[str]:
    """Keys of the uncertain inputs drawn jointly with another (their variable's ``joint_group``)."""
    return [key for key in uncertain_inputs(ds) if ds[key].attrs.get("joint_group")]


def _indices(
    x: np.ndarray, y: np.ndarray, names: list[str], design: str, seed: int, resamples: int, bar: Any
) -> dict[str, np.ndarray]:
    """Index estimates and CI half-widths, one per input, for one configuration's draw means ``y``.

    ``bar`` advances by one per input done.
    """
    k = len(names)
    nan = np.full(k, np.nan)
    out = {name: nan.copy() for name in INDICES} | {f"{name}_conf": nan.copy() for name in INDICES}
    if not np.all(np.isfinite(y)) or np.ptp(y) == 0.0:
        if np.all(np.isfinite(y)):  # constant output: no input explains anything
            for name in INDICES:
                out[name], out[f"{name}_conf"] = np.zeros(k), np.zeros(k)
        bar.update(k)
        return out
    bounds = [[float(np.min(x[:, i])), float(np.max(x[:, i])) or 1.0] for i in range(k)]
    seed += 1  # SALib leaves its generator unseeded for seed 0
    # One BLAS thread: SALib's estimators run many small linear-algebra calls, for which a
    # multi-threaded OpenBLAS spends ~14x longer synchronising than computing (438 s against
    # 31 s on one result, with identical output); the results do not depend on the thread count.
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")
        if design == "saltelli":
            problem = {"num_vars": k, "names": names, "bounds": bounds}
            result = salib_sobol.analyze(
                problem, y, calc_second_order=False, num_resamples=resamples, conf_level=CONF_LEVEL, seed=seed
            )
            _store(out, result, ("S1", "ST"), slice(None))
        # delta (and, without a Saltelli design, S1) one input at a time: the given-data estimators need no
        # other column; on a Saltelli design they read its draws as given data (each column's values are
        # drawn from the input's own law, independently of the other columns)
        given = ("delta",) if design == "saltelli" else ("S1", "delta")
        for i in range(k):
            problem = {"num_vars": 1, "names": [names[i]], "bounds": [bounds[i]]}
            # SALib >= 1.5 prints bin notices, and turns warnings back on ("once") to show others
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                result = salib_delta.analyze(
                    problem, x[:, i : i + 1], y, num_resamples=resamples, conf_level=CONF_LEVEL, seed=seed + i
                )
            _store(out, result, given, slice(i, i + 1))
            bar.update(1)
    return out


def _store(out: dict[str, np.ndarray], result: Any, keys: tuple[str, ...], where: slice) -> None:
    """Copy SALib's estimates and half-widths of ``keys`` into ``out[...][where]``."""
    for name in keys:
        found = name if name in result else f"{name}_raw"  # SALib >= 1.5 names the plain delta delta_raw
        out[name][where] = np.asarray(result[found], dtype=float)
        out[f"{name}_conf"][where] = np.asarray(result[f"{found}_conf"], dtype=float)


def sensitivity(
    ds: xr.Dataset,
    output: str = "cost",
    seed: int = 0,
    *,
    resamples: int | None = None,
    progress: bool | None = None,
) -> xr.Dataset:
    """Sobol sensitivity indices of ``output``'s mean per draw, per configuration.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` with parameter draws (dims sweep..., ``draw``, ``run``).
    output : str
        A per-run variable (``cost``, ``wall_time``, ...).
    seed : int
        Seed of the bootstrap resampling.
    resamples : int, optional
        Bootstrap resamples of each interval, 10 to 100,000 (default :data:`RESAMPLES`,
        100); the time is proportional to it (see the module docstring).
    progress : bool, optional
        A bar over the (configuration, input) pairs, drawn once the work has taken 2 s;
        by default when standard error is a terminal or in a Jupyter kernel.

    Returns
    -------
    xarray.Dataset
        Dims (``input``, sweep dims...): ``S1``, ``ST``, ``delta`` (dimensionless shares
        of variance; ``delta`` in [0, 1]), each with ``*_low`` / ``*_high`` bounds of its
        95 % bootstrap interval; ``rank`` (1 = most influential, by ``ST`` with a Saltelli
        design, else by ``S1``), ``rank_delta`` (the same by ``delta``, the second opinion) and
        ``delta_disagrees`` (see the module docstring and :func:`disagreements`). Attributes:
        ``method`` (``sobol``: Saltelli estimators; ``delta``: given-data estimators), ``ranked_by``
        (``ST`` or ``S1``), ``output``, ``draws``, ``design``, ``correlated_inputs``, ``resamples``,
        ``scenario_name``, ``mcsim_version``, ``created``, and the CF attributes of a result file:
        ``title``, ``history`` (the result's, then a line for these indices) and ``Conventions``.

    Raises
    ------
    ValueError
        No parameter draws, fewer than :func:`draws_needed`, ``output`` is not a per-run variable, or
        ``resamples`` out of range.
    """
    resamples, keys, design, correlated = _checked_request(ds, output, resamples)
    x = np.column_stack([np.asarray(ds[key].values, dtype=float) for key in keys])
    with warnings.catch_warnings():  # infeasible configurations: all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        means = ds[output].astype(float).mean("run")
    sweep_dims = [d for d in means.dims if d != "draw"]
    means = means.transpose(*sweep_dims, "draw")
    shape = tuple(ds.sizes[d] for d in sweep_dims)
    description = f"sensitivity of {output} ({resamples} resamples)"
    arrays = _every_configuration(x, means.values, shape, keys, design, seed, resamples, progress, description)
    coords: dict[Hashable, xr.DataArray | list[str]] = {d: ds[d] for d in sweep_dims if d in ds.coords}
    coords["input"] = keys
    result = xr.Dataset(_index_variables(arrays, design, (*sweep_dims, "input")), coords=coords)
    result = result.transpose("input", *sweep_dims)
    result.attrs = _attributes(ds, output, design, correlated, resamples)
    return result


def _attributes(ds: xr.Dataset, output: str, design: str, correlated: list[str], resamples: int) -> dict:
    """The attributes of the indices: method, output, draws, design, correlated inputs, resamples, scenario;
    and the CF-1.10 §2.6.2 ``title``, ``history`` (the result's, then this computation) and ``Conventions``
    that a result file carries (:func:`mcsim.engine.dataset.provenance_attrs`)."""
    method = "sobol" if design == "saltelli" else "delta"
    scenario = str(ds.attrs.get("scenario_name", "scenario"))
    created = datetime.now(UTC).isoformat(timespec="seconds")
    line = (
        f"{created}: mcsim {__version__} {method} sensitivity indices of {output} over "
        f"{ds.sizes['draw']} draws ({design} design, {resamples} bootstrap resamples)"
    )
    earlier = str(ds.attrs.get("history", "")).strip()
    return {
        "title": f"mcsim sensitivity indices of {output}: {scenario}",
        "method": method,
        "ranked_by": ranked_by(design),
        "output": output,
        "draws": ds.sizes["draw"],
        "design": design,
        "correlated_inputs": " ".join(correlated),
        "resamples": resamples,
        "scenario_name": scenario,
        "mcsim_version": __version__,
        "created": created,
        "Conventions": "CF-1.10",
        "history": f"{earlier}\n{line}" if earlier else line,
    }


def _checked_request(ds: xr.Dataset, output: str, resamples: int | None) -> tuple[int, list[str], str, list[str]]:
    """(resamples, the uncertain inputs, the design, the correlated inputs) of a request for indices of
    ``output``; a one-line ValueError when it cannot be answered (see :func:`sensitivity`)."""
    if not isinstance(output, str) or output not in PER_RUN or output not in ds:
        raise ValueError(f"output: expected a per-run variable ({', '.join(PER_RUN)}), got {output!r}")
    resamples = RESAMPLES if resamples is None else check_resamples(resamples)
    keys = uncertain_inputs(ds)
    design = str(ds.attrs.get("design", "sobol"))
    correlated = correlated_inputs(ds)
    if correlated and design == "saltelli":
        raise ValueError(
            f"{', '.join(correlated)} are correlated: Sobol indices from a Saltelli design need independent inputs"
        )
    if ds.sizes["draw"] < (need := draws_needed(design, len(keys))):
        raise ValueError(
            f"{ds.sizes['draw']} parameter draws are too few for sensitivity indices of {len(keys)} uncertain "
            f"input{'s' if len(keys) != 1 else ''} ({design} design): need at least {need} (run.draws >= {need})"
        )
    return resamples, keys, design, correlated


def _every_configuration(
    x: np.ndarray,
    means: np.ndarray,
    shape: tuple[int, ...],
    keys: list[str],
    design: str,
    seed: int,
    resamples: int,
    progress: bool | None,
    description: str,
) -> dict[str, np.ndarray]:
    """The estimates and half-widths of every index, (configurations..., inputs), from the draw means
    ``means`` (configurations..., draws) of each configuration, with a progress bar over the pairs."""
    names = (*INDICES, *(f"{n}_conf" for n in INDICES))
    arrays = {name: np.full(shape + (len(keys),), np.nan) for name in names}
    configurations = int(np.prod(shape)) if shape else 1
    with execution.progress_bar(
        progress,
        total=configurations * len(keys),
        unit="input",
        desc=description,
        leave=False,
        delay=PROGRESS_DELAY_S,
        dynamic_ncols=True,
    ) as bar:
        for index in np.ndindex(*shape):
            found = _indices(x, means[index], keys, design, seed, resamples, bar)
            for name, values in found.items():
                arrays[name][index] = values
    return arrays


_INDEX_TEXT = {
    "S1": "first-order Sobol index",
    "ST": "total Sobol index",
    "delta": "delta moment-independent measure",
}


def _index_variables(arrays: dict[str, np.ndarray], design: str, dims: tuple[Hashable, ...]) -> dict[str, xr.Variable]:
    """Each index with the bounds of its interval, and the inputs' ranks, as variables of the result."""
    data = {}
    for name in INDICES:
        value, conf = arrays[name], arrays[f"{name}_conf"]
        data[name] = (value, _INDEX_TEXT[name])
        data[f"{name}_low"] = (value - conf, f"{CONF_LEVEL:.0%} bootstrap interval of {name}: lower bound")
        data[f"{name}_high"] = (value + conf, f"{CONF_LEVEL:.0%} bootstrap interval of {name}: upper bound")
    main = ranked_by(design)
    data["rank"] = (
        _ranks(arrays[main]),
        "rank of the input, 1 = most influential (by ST, or S1 without a Saltelli design)",
    )
    data["rank_delta"] = (_ranks(arrays["delta"]), "rank of the input by delta, the second opinion")
    clear = _clearly_above(arrays[main] - arrays[f"{main}_conf"], arrays[main] + arrays[f"{main}_conf"])
    delta = arrays["delta"]
    by_delta = delta[..., :, None] < delta[..., None, :]  # [i, j]: delta puts i below j
    against = (clear & by_delta) | (np.swapaxes(clear, -1, -2) & np.swapaxes(by_delta, -1, -2))
    data["delta_disagrees"] = (
        np.asarray(against.any(axis=-1)),
        f"delta orders the input against a clear {main} ranking (intervals of {main} apart)",
    )
    return {name: xr.Variable(dims, value, {"units": "1", "long_name": text}) for name, (value, text) in data.items()}


def ranked_by(design: str) -> str:
    """The index the inputs are ranked by: ``ST`` with a Saltelli design, else ``S1``."""
    return "ST" if design == "saltelli" else "S1"


def _ranks(score: np.ndarray) -> np.ndarray:
    """1 for the largest ``score`` along the last axis, 2 for the next...; NaN last, ties in input order."""
    order = np.argsort(-np.nan_to_num(score, nan=-np.inf), axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(1, score.shape[-1] + 1) + np.zeros_like(order), axis=-1)
    return rank


def _clearly_above(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``[..., i, j]``: input i's interval lies wholly above input j's (NaN: never)."""
    return low[..., :, None] > high[..., None, :]


def disagreements(point: xr.Dataset) -> list[tuple[str, str]]:
    """Where delta contradicts a clear variance-based ranking, at one configuration of :func:`sensitivity`.

    Returns
    -------
    list of (str, str)
        ``(above, below)`` pairs of inputs: ``above``'s interval of the ranking index (``ranked_by``)
        lies wholly above ``below``'s, yet delta is larger for ``below``; most influential ``above`` first.
    """
    main = str(point.attrs["ranked_by"])
    low, high = np.asarray(point[f"{main}_low"].values, float), np.asarray(point[f"{main}_high"].values, float)
    delta, names = np.asarray(point["delta"].values, float), [str(k) for k in point["input"].values]
    clear = _clearly_above(low, high) & (delta[:, None] < delta[None, :])
    order = np.argsort(np.asarray(point["rank"].values), kind="stable")
    return [(names[i], names[j]) for i in order for j in order if clear[i, j]]
