"""Which uncertain input matters most: Sobol indices of a result with parameter draws.

For each configuration the output of each draw is its mean over the draw's runs;
the indices say how much of the variance of that mean, across draws, each
uncertain input explains (SALib: Herman & Usher, JOSS 2017; Iwanaga et al.,
SESMO 2022):

* ``run.design = "saltelli"``: first-order ``S1`` and total ``ST`` Sobol
  indices from the Saltelli design (Saltelli et al. 2010, Comput. Phys. Commun.
  181: 259-270; SALib ``analyze.sobol``), each with a bootstrap confidence
  interval. The draws of one base point share their random streams
  (:func:`mcsim.uncertain.draw_offset`), so an input without effect has ``ST``
  exactly 0.
* any other design (given data): the first-order index ``S1`` and the
  moment-independent ``delta`` (Borgonovo 2007, Reliab. Eng. Syst. Saf. 92:
  771-784; SALib ``analyze.delta``), with bootstrap intervals. A total index
  needs the Saltelli design: ``ST`` is NaN.

Inputs are ranked (1 = most influential) by ``ST`` when there is one, else by ``delta``.

Correlated inputs (a joint ``mvlognormal`` group, :func:`mcsim.uncertain.parse_joint`):
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
import warnings
from collections.abc import Hashable

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from mcsim.io.variables import PER_RUN

INDICES = ("S1", "ST", "delta")
CONF_LEVEL = 0.95
RESAMPLES = 500


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


def _indices(x: np.ndarray, y: np.ndarray, names: list[str], design: str, seed: int) -> dict[str, np.ndarray]:
    """Index estimates and CI half-widths, one per input, for one configuration's draw means ``y``."""
    k = len(names)
    nan = np.full(k, np.nan)
    out = {name: nan.copy() for name in INDICES} | {f"{name}_conf": nan.copy() for name in INDICES}
    if not np.all(np.isfinite(y)) or np.ptp(y) == 0.0:
        if np.all(np.isfinite(y)):  # constant output: no input explains anything
            for name in INDICES:
                out[name], out[f"{name}_conf"] = np.zeros(k), np.zeros(k)
        return out
    bounds = [[float(np.min(x[:, i])), float(np.max(x[:, i])) or 1.0] for i in range(k)]
    problem = {"num_vars": k, "names": names, "bounds": bounds}
    seed += 1  # SALib leaves its generator unseeded for seed 0
    # One BLAS thread: SALib's estimators run many small linear-algebra calls, for which a
    # multi-threaded OpenBLAS spends ~14x longer synchronising than computing (issue 22: 438 s
    # against 31 s, identical output); the results do not depend on the thread count.
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")
        if design == "saltelli":
            from SALib.analyze import sobol

            result = sobol.analyze(
                problem, y, calc_second_order=False, num_resamples=RESAMPLES, conf_level=CONF_LEVEL, seed=seed
            )
            keys = ("S1", "ST")
        else:
            from SALib.analyze import delta

            # SALib >= 1.5 prints bin notices, and turns warnings back on ("once") to show others
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                result = delta.analyze(problem, x, y, num_resamples=RESAMPLES, conf_level=CONF_LEVEL, seed=seed)
            keys = ("S1", "delta")
    for name in keys:
        found = name if name in result else f"{name}_raw"  # SALib >= 1.5 names the plain delta delta_raw
        out[name] = np.asarray(result[found], dtype=float)
        out[f"{name}_conf"] = np.asarray(result[f"{found}_conf"], dtype=float)
    return out


def sensitivity(ds: xr.Dataset, output: str = "cost", seed: int = 0) -> xr.Dataset:
    """Sobol sensitivity indices of ``output``'s mean per draw, per configuration.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` with parameter draws (dims sweep..., ``draw``, ``run``).
    output : str
        A per-run variable (``cost``, ``wall_time``, ...).
    seed : int
        Seed of the bootstrap resampling.

    Returns
    -------
    xarray.Dataset
        Dims (``input``, sweep dims...): ``S1``, ``ST``, ``delta`` (dimensionless shares
        of variance; ``delta`` in [0, 1]), each with ``*_low`` / ``*_high`` bounds of its
        95 % bootstrap interval, and ``rank`` (1 = most influential). Attributes:
        ``method`` (``sobol`` or ``delta``), ``output``.

    Raises
    ------
    ValueError
        No parameter draws, or ``output`` is not a per-run variable.
    """
    if output not in PER_RUN or output not in ds:
        raise ValueError(f"expected a per-run variable ({', '.join(PER_RUN)}), got {output!r}")
    keys = uncertain_inputs(ds)
    design = str(ds.attrs.get("design", "sobol"))
    correlated = correlated_inputs(ds)
    if correlated and design == "saltelli":
        raise ValueError(
            f"{', '.join(correlated)} are correlated: Sobol indices from a Saltelli design need independent inputs"
        )
    x = np.column_stack([np.asarray(ds[key].values, dtype=float) for key in keys])
    with warnings.catch_warnings():  # infeasible configurations: all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        means = ds[output].astype(float).mean("run")
    sweep_dims = [d for d in means.dims if d != "draw"]
    means = means.transpose(*sweep_dims, "draw")
    shape = tuple(ds.sizes[d] for d in sweep_dims)
    arrays = {name: np.full(shape + (len(keys),), np.nan) for name in (*INDICES, *(f"{n}_conf" for n in INDICES))}
    for index in np.ndindex(*shape):
        found = _indices(x, means.values[index], keys, design, seed)
        for name, values in found.items():
            arrays[name][index] = values
    data = {}
    for name in INDICES:
        value, conf = arrays[name], arrays[f"{name}_conf"]
        data[name] = (
            value,
            "first-order Sobol index"
            if name == "S1"
            else "total Sobol index"
            if name == "ST"
            else "delta moment-independent measure",
        )
        data[f"{name}_low"] = (value - conf, f"{CONF_LEVEL:.0%} bootstrap interval of {name}: lower bound")
        data[f"{name}_high"] = (value + conf, f"{CONF_LEVEL:.0%} bootstrap interval of {name}: upper bound")
    score = arrays["ST"] if design == "saltelli" else arrays["delta"]
    order = np.argsort(-np.nan_to_num(score, nan=-np.inf), axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(1, len(keys) + 1) + np.zeros_like(order), axis=-1)
    data["rank"] = (rank, "rank of the input, 1 = most influential (by ST, or delta without a Saltelli design)")
    dims = (*sweep_dims, "input")
    variables = {
        name: xr.Variable(dims, value, {"units": "1", "long_name": text}) for name, (value, text) in data.items()
    }
    coords: dict[Hashable, xr.DataArray | list[str]] = {d: ds[d] for d in sweep_dims if d in ds.coords}
    coords["input"] = keys
    result = xr.Dataset(variables, coords=coords).transpose("input", *sweep_dims)
    result.attrs = {
        "method": "sobol" if design == "saltelli" else "delta",
        "output": output,
        "draws": ds.sizes["draw"],
        "design": design,
        "correlated_inputs": " ".join(correlated),
    }
    return result
