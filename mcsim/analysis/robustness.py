"""Which configuration is the robust choice, and which uncertain input would change it.

:func:`robustness` takes a result with parameter draws and one objective and returns
a record: the configuration of least expected regret (the robust choice), its P(best),
the leading configurations, and for each uncertain input what happens to the decision
when the draws are split by the input's value (below or above its median, or into
terciles): which configuration wins in each part, and how much the robust choice loses
there against that part's winner. Definitions: docs/model.md, "Decisions under
uncertainty"; estimators: :mod:`mcsim.analysis.decisions`.
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import configuration_array, eligible
from mcsim.analysis.decisions import draw_means, mean_interval
from mcsim.analysis.ranking import decision_table
from mcsim.analysis.sensitivity import uncertain_inputs
from mcsim.io.variables import objective_direction, sweep_dims

LEADERS = 5  # configurations listed with their P(best), highest first


def split_groups(values: np.ndarray, groups: int) -> np.ndarray:
    """Group index 0 .. groups - 1 of each draw by the rank of its input value (equal-count parts).

    Ties in the value are broken by draw order, so the parts have sizes that differ by
    at most one draw.
    """
    ranks = np.argsort(np.argsort(np.asarray(values, dtype=float), kind="stable"), kind="stable")
    return (ranks * groups) // len(ranks)


def _plain(value: Any) -> Any:
    """A coordinate value as a Python scalar (text decoded by ``xarray.open_dataset`` is already one)."""
    return value.item() if isinstance(value, np.generic) else value


def _configurations(ds: xr.Dataset) -> list[dict]:
    dims = sweep_dims(ds)
    return [
        {d: _plain(ds[d].values[i]) for d, i in zip(dims, index, strict=False)}
        for index in np.ndindex(*(ds.sizes[d] for d in dims))
    ]


def _input_split(
    key: str, values: np.ndarray, means: np.ndarray, pick: int, groups: int, configs: list[dict], units: str
) -> dict:
    """What the decision is in each part of the draws split by one input (means: configs x draws, signed)."""
    parts: list[dict[str, Any]] = []
    index = split_groups(values, groups)
    weighted = 0.0
    for g in range(groups):
        in_part = index == g
        sub = means[:, in_part]
        part_means = draw_means(sub[:, None, :])[:, 0]  # mean over the part's draws, NaN rows kept NaN
        winner = int(np.nanargmin(part_means))
        loss, low, high = mean_interval(sub[pick] - sub[winner])
        weighted += float(loss) * in_part.sum() / len(values)
        parts.append(
            {
                "range": (float(values[in_part].min()), float(values[in_part].max())),
                "draws": int(in_part.sum()),
                "best": configs[winner],
                "pick_regret": float(loss),
                "pick_regret_ci95": (float(low), float(high)),
            }
        )
    changes = any(part["best"] != configs[pick] for part in parts)
    clear = any(part["pick_regret_ci95"][0] > 0 for part in parts)
    return {
        "input": key,
        "units": units,
        "groups": parts,
        "changes": changes,
        "clear": bool(changes and clear),
        "value_of_information": float(weighted),
    }


def robustness(ds: xr.Dataset, objective: str = "cost", groups: int = 2) -> dict:
    """The robust choice on ``objective`` and which uncertain input would change it.

    Parameters
    ----------
    ds : xarray.Dataset
        A result with parameter draws (dims sweep..., ``draw``, ``run``).
    objective : str
        A per-run variable with a direction (``cost``, ``wall_time``, ``energy``, ``ettr``...).
    groups : int
        Parts the draws are split into by each input's value: 2 (below / above the
        median) or more (3: terciles), each with as many draws (within one).

    Returns
    -------
    dict
        ``objective``, ``units``, ``direction``, ``draws``;
        ``choice``: the configuration of least expected regret (:func:`mcsim.analysis.ranking.decision_table`),
        with its ``p_best``, ``p_best_ci95``, ``p_best_clear``, ``expected_regret`` and
        ``expected_regret_ci95`` (objective units);
        ``leaders``: up to 5 configurations with P(best) > 0, highest first, each a dict
        of ``configuration``, ``p_best``, ``p_best_ci95``, ``expected_regret``;
        ``inputs``: one dict per uncertain input, most decisive first: ``input``,
        ``units``, ``groups`` (per part: value ``range``, ``draws``, the ``best``
        configuration on the part's mean, ``pick_regret``: the mean over the part's
        draws of the choice's objective minus the part winner's, with its paired
        ``pick_regret_ci95`` over draws), ``changes`` (another configuration wins some
        part), ``clear`` (it changes and in some part the choice's loss has an interval
        above 0) and ``value_of_information``: the mean of ``pick_regret`` over the
        parts weighted by their draws, i.e. the expected amount saved by learning which
        part the input falls in before choosing (objective units; 0 when the choice wins
        every part). Inputs are ranked by it;
        ``changing_input``: the first input that ``changes`` the choice, or None.

    Raises
    ------
    ValueError
        No parameter draws, ``groups`` < 2 or more than the draws, an objective without
        a direction, or nothing to rank.
    """
    keys = uncertain_inputs(ds)
    _check_groups(groups, ds.sizes["draw"])
    table = decision_table(ds, objective)
    sign = -1.0 if objective_direction(objective) == "higher" else 1.0
    configs = _configurations(ds)
    flat = {name: table[name].values.ravel() for name in table.data_vars}
    pick = int(np.nanargmin(flat["expected_regret"]))
    # m(c, d), minimising, NaN where c cannot be ranked
    means = draw_means(sign * configuration_array(ds, ds[objective].where(eligible(ds))))
    inputs = _input_splits(ds, keys, means, pick, int(groups), configs)
    return {
        "objective": objective,
        "units": _units(ds, objective),
        "direction": "higher" if sign < 0 else "lower",
        "draws": int(table.attrs["draws"]),
        "choice": _decision_record(flat, configs, pick),
        "leaders": [_decision_record(flat, configs, c) for c in _leaders(flat["p_best"])],
        "inputs": inputs,
        "changing_input": next((item["input"] for item in inputs if item["changes"]), None),
    }


def _input_splits(
    ds: xr.Dataset, keys: list[str], means: np.ndarray, pick: int, groups: int, configs: list[dict]
) -> list[dict]:
    """:func:`_input_split` of every uncertain input, the most decisive (largest value of information) first."""
    inputs = [
        _input_split(key, np.asarray(ds[key].values, dtype=float), means, pick, groups, configs, _units(ds, key))
        for key in keys
    ]
    inputs.sort(key=lambda item: -item["value_of_information"])
    return inputs


def _check_groups(groups: int, draws: int) -> None:
    """Raise ValueError (one line) unless ``groups`` is a whole number from 2 to ``draws``."""
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or not 2 <= groups <= draws:
        raise ValueError(f"groups: expected a whole number from 2 to the number of draws ({draws}), got {groups!r}")


def _units(ds: xr.Dataset, name: str) -> str:
    """The units of the variable ``name`` ("" when it has none)."""
    return ds[name].attrs.get("units", "")


def _leaders(p_best: np.ndarray) -> list[int]:
    """The configurations with P(best) > 0, highest first, at most :data:`LEADERS`."""
    order = np.argsort(-np.nan_to_num(p_best, nan=-1.0), kind="stable")
    return [c for c in order if p_best[c] > 0][:LEADERS]


def _decision_record(flat: Mapping[Hashable, np.ndarray], configs: list[dict], c: int) -> dict:
    """Configuration ``c`` with its P(best), its interval, its share won clearly, and its expected regret
    with its interval (``flat``: :func:`mcsim.analysis.ranking.decision_table` over the flat sweep)."""
    return {
        "configuration": configs[c],
        "p_best": float(flat["p_best"][c]),
        "p_best_ci95": (float(flat["p_best_ci95_low"][c]), float(flat["p_best_ci95_high"][c])),
        "p_best_clear": float(flat["p_best_clear"][c]),
        "expected_regret": float(flat["expected_regret"][c]),
        "expected_regret_ci95": (
            float(flat["expected_regret_ci95_low"][c]),
            float(flat["expected_regret_ci95_high"][c]),
        ),
    }
