"""``mcsim calibrate``: a user's measured iteration times, and the efficiency that fits them.

A user gives a few measured iteration times of their own (a CSV file of layouts and seconds
or MFU, :mod:`mcsim.analysis.calibration_data`) and a scenario; :func:`calibrate` fits
``compute.efficiency`` of the operator step-time model (docs/model.md §2b; the
``compute.step_model = "operators"`` it needs is set too), with the fitting of the
published step-time validation (:func:`mcsim.analysis.steptime_validation.best_on_grid`,
:func:`~mcsim.analysis.steptime_validation.leave_one_out_points`: least squares in log
time on a grid), and reports each row's leave-one-out error (its time predicted by the
value fitted to the other rows) and how many pairs of layouts the model orders as measured.

One more numeric scenario key may be fitted with it, only where the user names it (``key``)
and only where the data resolve it. The criterion (docs/calibration.md): at
least :data:`MIN_ROWS_FOR_KEY` rows, and the key's 95 % profile interval, the values whose
least squared log error (the efficiency refitted at each) exceeds the best by at most
``3.84 s^2`` (chi-square, one degree of freedom; ``s^2`` the residual variance
``S_min / (n - 2)``, at least the measurement's repeatability squared), spans at most
:data:`RESOLVED_SHARE` of the range searched. Otherwise the key is refused
(:class:`mcsim.errors.ScenarioError`) and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcsim.analysis.calibration_data import Measurement, read_measurements
from mcsim.analysis.steptime_validation import (
    REPEATABILITY,
    best_on_grid,
    config_iteration_times,
    leave_one_out_points,
    pairs_in_order,
)
from mcsim.errors import ScenarioError
from mcsim.io.atomic import atomic_path
from mcsim.model.feasibility import Checked, objection
from mcsim.model.workload import layouts_of, workload_arrays
from mcsim.scenario.config import Config, Scenario, load_scenario
from mcsim.scenario.consistency import active_parameters
from mcsim.scenario.overrides import Override, with_keys_set
from mcsim.scenario.provenance import flat_provenance
from mcsim.scenario.schema import key_meta
from mcsim.scenario.toml import dumps_toml, toml_value

# compute.efficiency searched from 0.05 to 1 by 0.001 (wider than the validation's grid: a user's
# software may reach far less of the peak than the published runs).
CALIBRATION_GRID = np.round(np.arange(0.05, 1.0005, 0.001), 3)
KEY_POINTS = 21  # values of the second key searched, evenly spaced over its range
MIN_ROWS = 2  # a leave-one-out prediction needs one other row
MIN_ROWS_FOR_KEY = 4  # two knobs fitted to the others leave at least one degree of freedom
RESOLVED_SHARE = 0.5  # the key's 95 % interval may span at most this share of the range searched
CHI2_95 = 3.841  # the 95 % quantile of chi-square with one degree of freedom
# Set in every configuration calibrated: the model the efficiency belongs to, and no memory limit (the
# measured layouts ran; memory is not what is fitted).
_OPERATORS = ("compute.step_model", "operators")
_NO_MEMORY_LIMIT = ("hardware.memory_gb", 1e6)


@dataclass(frozen=True)
class CalibratedRow:
    """A measured row and its leave-one-out prediction."""

    line: int  # in the CSV file
    layout: str
    measured_s: float  # iteration time, s (from MFU where the row gives MFU)
    predicted_s: float  # with the values fitted to the other rows, s
    efficiency: float  # fitted to the other rows
    key_value: float | None  # the second key's value fitted to the other rows, or None

    @property
    def error(self) -> float:
        """Predicted over measured time, minus 1."""
        return self.predicted_s / self.measured_s - 1.0


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found: the fitted keys, each row's leave-one-out error, the ranking agreement.

    Attributes
    ----------
    measurements, scenario : str
        The CSV file and the scenario file.
    efficiency : float
        ``compute.efficiency`` fitted to every row (operator step model).
    key : str or None
        The second key fitted, or None.
    key_value : float or None
        Its value fitted to every row.
    key_interval : (float, float) or None
        Its 95 % profile interval (module docstring).
    rows : tuple of CalibratedRow
        Each row's leave-one-out prediction.
    ordered, ordered_resolved : (int, int)
        (pairs of layouts the leave-one-out predictions order as measured, pairs), by time per token;
        of every pair, and of the pairs measured more than ``repeatability`` apart.
    repeatability : float
        The share below which two measured times are taken as not ordered.
    raw : dict
        The scenario's tables with the fitted keys set (what :meth:`to_toml` writes).
    """

    measurements: str
    scenario: str
    efficiency: float
    key: str | None
    key_value: float | None
    key_interval: tuple[float, float] | None
    rows: tuple[CalibratedRow, ...]
    ordered: tuple[int, int]
    ordered_resolved: tuple[int, int]
    repeatability: float
    raw: dict

    @property
    def settings(self) -> dict[str, Any]:
        """The calibrated scenario keys and their values."""
        found: dict[str, Any] = {_OPERATORS[0]: _OPERATORS[1], "compute.efficiency": self.efficiency}
        if self.key is not None:
            found[self.key] = self.key_value
        return found

    def set_options(self) -> str:
        """The calibrated keys as ``--set KEY=VALUE`` options of ``mcsim run`` and ``mcsim plan``."""
        return " ".join(
            f"--set {key}={value if isinstance(value, str) else toml_value(value)}"
            for key, value in self.settings.items()
        )

    def to_toml(self) -> str:
        """The scenario with the calibrated keys set, as a scenario file's text."""
        return dumps_toml(self.raw)

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_toml` to ``path`` atomically, never over an existing file (FileExistsError)."""
        with atomic_path(path, previous=None) as tmp:
            tmp.write_text(self.to_toml(), encoding="utf-8")
        return Path(path)

    def table(self) -> str:
        """The rows, their leave-one-out errors, the ranking agreement and the calibrated keys, as text."""
        return calibration_table(self)


def calibrate(
    measurements: str | Path,
    scenario: str | Path | None = None,
    overrides: Iterable[str | Override] | Mapping[str, Any] = (),
    key: str | None = None,
    key_range: tuple[float, float] | None = None,
    repeatability: float = REPEATABILITY,
) -> Calibration:
    """Fit ``compute.efficiency`` (and ``key``, where the data resolve it) to measured iteration times.

    Parameters
    ----------
    measurements : str or Path
        CSV file of measured layouts and seconds or MFU (:mod:`mcsim.analysis.calibration_data`).
    scenario : str or Path, optional
        Scenario file or shipped name (default: the shipped reference); its model, machine and
        software are what the rows were measured on; each row sets its layout.
    overrides : as :func:`mcsim.load_scenario` takes them
        Changes to the scenario (``--set``).
    key : str, optional
        A numeric scenario key to fit beside the efficiency (``parallelism.overlap_dp``); refused
        when the data do not resolve it (module docstring).
    key_range : (float, float), optional
        The range of ``key`` searched; default its bounds in the schema where they lie within
        [0, 1] (a share), otherwise required.
    repeatability : float
        Measured times closer than this share are not taken as ordered; also the least residual
        scatter assumed in the key's criterion (default: BigScience's repeated layout, 2.8 %).

    Raises
    ------
    ScenarioError
        On a bad file, key or range, a row the model cannot evaluate, too few rows, or a key the
        data do not resolve; the message names the file, the line or the key, and what was expected.
    """
    source = str(measurements)
    rows = read_measurements(measurements)
    if len(rows) < MIN_ROWS:
        raise ScenarioError(source, "rows", f"expected at least {MIN_ROWS} measured layouts, got {len(rows)}")
    if not (0.0 <= repeatability < 1.0):
        raise ScenarioError(source, "repeatability", f"expected a share in [0, 1), got {repeatability:g}")
    base_overrides = [*_override_pairs(overrides), _OPERATORS]
    base = load_scenario(scenario, overrides=base_overrides)
    _check_no_sweep(base, rows, source)
    values = _key_values(source, key, key_range, rows, len(rows))
    curves, measured, per_token = _curves(source, scenario, base_overrides, rows, key, values)
    return _fit(source, base, rows, curves, measured, per_token, key, values, repeatability)


def _override_pairs(overrides: Iterable[str | Override] | Mapping[str, Any]) -> list[str | Override]:
    return list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)


def _check_no_sweep(base: Scenario, rows: tuple[Measurement, ...], source: str) -> None:
    """Refuse a scenario that sweeps a key the rows do not set: a calibration is of one configuration."""
    given = {k for k, _ in rows[0].settings}
    for axis in base.axes:
        if axis.key not in given:
            raise ScenarioError(
                base.source,
                axis.key,
                f"swept; {source} is calibrated on one configuration: give it one value (--set {axis.key}=...)",
            )


def _key_values(
    source: str, key: str | None, key_range: tuple[float, float] | None, rows: tuple[Measurement, ...], n: int
) -> np.ndarray:
    """The values of the second key searched (one NaN, standing for none, without a key)."""
    if key is None:
        return np.array([np.nan])
    where = f"--fit {key}"
    meta = key_meta(key)
    if meta is None or meta["kind"] not in (float, int) or meta["many"]:
        raise ScenarioError(source, where, "expected a numeric scenario key (section.key), e.g. parallelism.overlap_dp")
    if key in ("compute.efficiency", "compute.step_model") or any(key == k for k, _ in rows[0].settings):
        raise ScenarioError(source, where, "fitted already or set by the measurements; expected another key")
    if n < MIN_ROWS_FOR_KEY:
        raise ScenarioError(source, where, f"two keys need at least {MIN_ROWS_FOR_KEY} measured layouts, got {n}")
    low, high = key_range if key_range is not None else _share_bounds(source, where, meta)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ScenarioError(source, f"{where} range", f"expected LOW < HIGH, both finite, got {low:g}:{high:g}")
    if meta["kind"] is int:
        return np.unique(np.round(np.linspace(math.ceil(low), math.floor(high), KEY_POINTS)))
    return np.linspace(low, high, KEY_POINTS)


def _share_bounds(source: str, where: str, meta: dict) -> tuple[float, float]:
    """A key's schema bounds where they lie within [0, 1] (a share); otherwise a range must be given."""
    low = meta["ge"] if meta["ge"] is not None else meta["gt"]
    high = meta["le"] if meta["le"] is not None else meta["lt"]
    if low is None or high is None or low < 0 or high > 1 or meta["gt"] is not None or meta["lt"] is not None:
        raise ScenarioError(source, where, "not a share in [0, 1]: give the range to search (--range LOW:HIGH)")
    return float(low), float(high)


def _row_config(
    source: str, scenario: str | Path | None, base_overrides: list, row: Measurement, extra: list[Override]
) -> Config:
    """The configuration of a measured row (the row's keys and ``extra`` set); the row's mistakes name its line."""
    try:
        return load_scenario(scenario, overrides=[*base_overrides, _NO_MEMORY_LIMIT, *row.settings, *extra]).base
    except ScenarioError as err:
        raise ScenarioError(source, f"line {row.line}, {err.key}", err.message) from None


def _curves(
    source: str,
    scenario: str | Path | None,
    base_overrides: list,
    rows: tuple[Measurement, ...],
    key: str | None,
    values: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model times, shape (rows, key values x efficiencies); measured times, s; tokens per iteration)."""
    curves, measured, tokens = [], [], []
    for row in rows:
        per_value = []
        for value in values:
            extra = [] if key is None else [(key, _plain(key, value))]
            cfg = _row_config(source, scenario, base_overrides, row, extra)
            try:
                per_value.append(config_iteration_times(cfg, CALIBRATION_GRID))
            except ValueError:
                raise _infeasible(source, row, cfg) from None
        _check_dp(source, row, cfg)
        measured.append(row.seconds if row.seconds is not None else _seconds_of_mfu(cfg, row.mfu or 1.0))
        tokens.append(cfg.model.global_batch * cfg.model.seq_len)
        curves.append(np.concatenate(per_value))
    return np.array(curves), np.array(measured), np.array(tokens, dtype=float)


def _infeasible(source: str, row: Measurement, cfg: Config) -> ScenarioError:
    """The error of a row whose layout the model refuses: the key and the reason the workload model gives."""
    arrays = workload_arrays(cfg, layouts_of([cfg]))
    checked = Checked(cfg, int(arrays.code[0]), 0, 0.0, float(arrays.memory_per_gpu_gb[0]))
    found = objection(checked, [checked])
    key, reason = (found.key, found.reason) if found is not None else ("layout", f"code {checked.code}")
    return ScenarioError(source, f"line {row.line}, {key}", f"the model cannot run this layout: {reason}")


def _check_dp(source: str, row: Measurement, cfg: Config) -> None:
    par = cfg.parallelism
    if row.dp is not None and par.tp * par.pp * par.cp * row.dp != par.gpus:
        raise ScenarioError(
            source,
            f"line {row.line}, column 'dp'",
            f"expected gpus = tp x pp x cp x dp, got {par.gpus} != {par.tp} x {par.pp} x {par.cp} x {row.dp}",
        )


def _seconds_of_mfu(cfg: Config, mfu: float) -> float:
    """The iteration time of a measured MFU: PaLM's model FLOPs (6 N + 12 L h s per token; N the active
    parameters of a mixture of experts) over GPUs x peak x MFU."""
    m = cfg.model
    flops = (6.0 * active_parameters(m) + 12.0 * m.layers * m.hidden * m.seq_len) * m.global_batch * m.seq_len
    return flops / (cfg.parallelism.gpus * cfg.gpu.peak_tflops * 1e12 * mfu)


def _fit(
    source: str,
    base: Scenario,
    rows: tuple[Measurement, ...],
    curves: np.ndarray,
    measured: np.ndarray,
    per_token: np.ndarray,
    key: str | None,
    values: np.ndarray,
    repeatability: float,
) -> Calibration:
    """The fit to every row, the leave-one-out predictions and the ranking agreement."""
    log_errors = np.log(curves / measured[:, None])
    best = best_on_grid(log_errors)
    interval = None if key is None else _key_interval(source, key, log_errors, values, repeatability)
    loo = leave_one_out_points(log_errors, np.zeros(len(rows), dtype=int))
    efficiencies = CALIBRATION_GRID.size
    predicted = curves[np.arange(len(rows)), loo]
    calibrated = [
        CalibratedRow(
            row.line,
            row.label,
            float(measured[i]),
            float(predicted[i]),
            float(CALIBRATION_GRID[loo[i] % efficiencies]),
            None if key is None else float(values[loo[i] // efficiencies]),
        )
        for i, row in enumerate(rows)
    ]
    groups = np.zeros(len(rows), dtype=int)
    efficiency = float(CALIBRATION_GRID[best % efficiencies])
    key_value = None if key is None else _plain(key, values[best // efficiencies])
    settings = [_OPERATORS, ("compute.efficiency", efficiency)] + ([] if key is None else [(key, key_value)])
    return Calibration(
        measurements=source,
        scenario=base.source,
        efficiency=efficiency,
        key=key,
        key_value=key_value,
        key_interval=interval,
        rows=tuple(calibrated),
        ordered=pairs_in_order(measured / per_token, predicted / per_token, groups),
        ordered_resolved=pairs_in_order(measured / per_token, predicted / per_token, groups, repeatability),
        repeatability=repeatability,
        raw=_measured_here(with_keys_set(base.raw, settings, base.source), {key for key, _ in settings}),
    )


def _measured_here(raw: dict, keys: set[str]) -> dict:
    """``raw`` without the ``[provenance]`` entries of the calibrated ``keys``: they are measured now, not borrowed."""
    table = raw.get("provenance")
    if not isinstance(table, dict):
        return raw
    kept = {key: text for key, text in flat_provenance(table) if key not in keys}
    return {name: value for name, value in raw.items() if name != "provenance"} | ({"provenance": kept} if kept else {})


def _plain(key: str, value: float) -> float:
    meta = key_meta(key)
    return int(value) if meta is not None and meta["kind"] is int else float(value)


def _key_interval(
    source: str, key: str, log_errors: np.ndarray, values: np.ndarray, repeatability: float
) -> tuple[float, float]:
    """The key's 95 % profile interval; refused (ScenarioError) when it spans more than RESOLVED_SHARE of the range."""
    n = log_errors.shape[0]
    profile = (log_errors**2).sum(axis=0).reshape(values.size, -1).min(axis=1)  # efficiency refitted per value
    variance = max(profile.min() / (n - 2), repeatability**2)
    inside = values[profile - profile.min() <= CHI2_95 * variance]
    low, high = float(inside.min()), float(inside.max())
    if high - low > RESOLVED_SHARE * (values[-1] - values[0]):
        raise ScenarioError(
            source,
            f"--fit {key}",
            f"the measurements do not resolve it: every value from {low:.4g} to {high:.4g} fits them within "
            f"their scatter (95 % profile interval), more than {RESOLVED_SHARE:.0%} of the range searched "
            f"[{values[0]:.4g}, {values[-1]:.4g}]; measure layouts that differ in what {key} affects, or fit "
            "compute.efficiency alone",
        )
    return low, high


def calibration_table(found: Calibration) -> str:
    """:meth:`Calibration.table`: one row a line, then the errors, the ranking and the calibrated keys."""
    knobs = "compute.efficiency" + (f" and {found.key}" if found.key else "")
    lines = [
        f"{knobs} of the operator step model fitted to {len(found.rows)} measured iteration times "
        f"({found.measurements}; scenario {found.scenario}); each row predicted from the others (leave-one-out)",
        f"{'line':>5}  {'layout':<40} {'measured s':>11} {'predicted s':>12} {'error':>7} {'efficiency':>10}"
        + (f"  {found.key}" if found.key else ""),
    ]
    for row in found.rows:
        lines.append(
            f"{row.line:>5}  {row.layout[:40]:<40} {row.measured_s:>11.4g} {row.predicted_s:>12.4g} "
            f"{row.error:>+7.1%} {row.efficiency:>10.3f}" + ("" if row.key_value is None else f"  {row.key_value:.4g}")
        )
    errors = np.abs([row.error for row in found.rows])
    (right, total), (resolved_right, resolved) = found.ordered, found.ordered_resolved
    lines += [
        f"leave-one-out |error|: median {np.median(errors):.1%}, worst {errors.max():.1%}",
        f"layout ranking (time per token): {right} of {total} pairs ordered as measured "
        f"({resolved_right} of {resolved} pairs measured more than {found.repeatability:.1%} apart)",
        f"fitted to every row: compute.efficiency = {found.efficiency:.3f}"
        + ("" if found.key is None else f", {found.key} = {found.key_value:.4g} (95 % interval {_interval(found)})"),
    ]
    if found.efficiency in (CALIBRATION_GRID[0], CALIBRATION_GRID[-1]):
        lines.append(
            f"note: the efficiency is at the end of the range searched ({CALIBRATION_GRID[0]:g} to "
            f"{CALIBRATION_GRID[-1]:g}): the model does not reach the measured times there; check the scenario"
        )
    lines.append(f"calibrated keys: {found.set_options()}")
    return "\n".join(lines)


def _interval(found: Calibration) -> str:
    assert found.key_interval is not None, "a fitted key has an interval"
    return f"{found.key_interval[0]:.4g} to {found.key_interval[1]:.4g}"
