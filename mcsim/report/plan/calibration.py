"""The plan report's calibration section: the screen's error per family, measured by the pilot.

The plan's pilot (:mod:`mcsim.planning.calibration`; docs/model.md §9, "Calibration") simulates tens of
runs of one candidate per family (GPU type, checkpoint strategy, recomputation, size band) before the
selection; :func:`calibration_section` lists, per family, the screen's signed error against them with its
standard error, and the margin the plan screened the family's candidates with.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from mcsim.planning.calibration import bound_multiplier, error_bounds

ERROR_NAMES = {"objective": "objective", "deadline": "deadline quantile", "budget": "mean cost"}


_FAMILY_DIMS = {
    "family_gpu_type": ("family",),
    "family_strategy": ("family",),
    "family_recompute": ("family",),
    "family_gpus_low": ("family",),
    "family_gpus_high": ("family",),
    "family_pilot_candidate": ("family",),
    "family_pilot_error": ("family", "error_kind"),
    "family_pilot_error_se": ("family", "error_kind"),
    "family_margin": ("family",),
}


def check_calibration(ds: xr.Dataset) -> None:
    """Raise ValueError (one line) when a plan file's pilot variables are not as the planner writes them
    (a damaged or edited file): all or none of them, their dimensions, the error kinds, whole-number pilot
    candidates (-1 or a candidate index), real errors (finite or NaN) with non-negative standard errors, and
    a whole number of pilot runs (0 only when no family was piloted)."""
    if not any(name in ds.variables for name in _FAMILY_DIMS):
        return
    _check_family_variables(ds)
    pilot = ds["family_pilot_candidate"].values
    n = ds.sizes.get("candidate", 0)
    if pilot.dtype.kind not in "iu" or not np.all((pilot == -1) | ((pilot >= 0) & (pilot < n))):
        _damaged("family_pilot_candidate", f"whole numbers: -1 or a candidate index in [0, {n})")
    _check_errors(ds)
    runs = ds.attrs.get("pilot_runs")
    if not isinstance(runs, (int, np.integer)) or runs < 0 or (runs == 0) != bool(np.all(pilot == -1)):
        _damaged("pilot_runs", "a whole number of runs >= 0 (attribute), 0 exactly when no family was piloted")


def _check_family_variables(ds: xr.Dataset) -> None:
    """Every pilot variable on its dimensions, and error kinds among :data:`ERROR_NAMES`."""
    for name, dims in _FAMILY_DIMS.items():
        if name not in ds.variables or ds[name].dims != dims:
            _damaged(name, f"a variable of dimensions {dims} (the calibration pilot's)")
    if "error_kind" not in ds.variables or set(map(str, ds["error_kind"].values)) - set(ERROR_NAMES):
        _damaged("error_kind", f"names among {', '.join(ERROR_NAMES)}")


def _check_errors(ds: xr.Dataset) -> None:
    """Errors, their standard errors and the margins: real numbers (a margin may be infinite), none negative
    but the errors."""
    for name in ("family_pilot_error", "family_pilot_error_se", "family_margin"):
        values = ds[name].values
        if values.dtype.kind != "f" or (np.isinf(values).any() and name != "family_margin"):  # a margin may be inf
            _damaged(name, "real numbers (finite, or NaN where not measured)")
    if np.any(ds["family_pilot_error_se"].values < 0) or np.any(ds["family_margin"].values < 0):
        _damaged("family_pilot_error_se", "standard errors and margins >= 0")


def _damaged(name: str, expected: str) -> None:
    raise ValueError(f"{name}: expected {expected}; the file is damaged or was edited")


def family_text(ds: xr.Dataset, f: int) -> str:
    """``H100-SXM, async, selective, 512 GPUs`` (``256-384 GPUs`` for a size band of several sizes)."""
    low, high = int(ds["family_gpus_low"][f]), int(ds["family_gpus_high"][f])
    size = f"{low} GPUs" if low == high else f"{low}-{high} GPUs"
    return (
        f"{ds['family_gpu_type'].values[f]}, {ds['family_strategy'].values[f]}, "
        f"{ds['family_recompute'].values[f]}, {size}"
    )


def _pilot_bounds(ds: xr.Dataset) -> np.ndarray:
    """Per family, the pilot's error bound (NaN: not measured; all NaN without a pilot or before it)."""
    if "family_pilot_error" not in ds.variables or int(ds.attrs.get("pilot_runs", 0)) == 0:
        return np.full(ds.sizes.get("family", 0), np.nan)
    error, se = ds["family_pilot_error"].values, ds["family_pilot_error_se"].values
    return error_bounds(error, se, int(ds.attrs["pilot_runs"]))


def pilot_bound(ds: xr.Dataset) -> float:
    """The pilot's largest error bound over the families (NaN: none measured)."""
    bounds = _pilot_bounds(ds)
    return float(np.nanmax(bounds)) if np.isfinite(bounds).any() else np.nan


def pilot_claim(ds: xr.Dataset) -> str:
    """``; the calibration pilot: 6 families, 30 runs each, largest error bound 1.2 % (family)``, or "" without
    a pilot."""
    if "family_pilot_error" not in ds.variables or int(ds.attrs.get("pilot_runs", 0)) == 0:
        return ""
    bounds = _pilot_bounds(ds)
    piloted = int(np.sum(ds["family_pilot_candidate"].values >= 0))
    text = f"; the calibration pilot: {piloted} families, {int(ds.attrs['pilot_runs'])} runs each"
    if not np.isfinite(bounds).any():
        return text + ", no error measured"
    f = int(np.nanargmax(bounds))
    return text + f", largest error bound {100 * bounds[f]:.2g} % ({family_text(ds, f)})"


def _error_cell(error: float, se: float) -> str:
    return f"{100 * error:+.2f} ± {100 * se:.2f} %" if np.isfinite(error) else ""


def calibration_section(ds: xr.Dataset, rows: int = 12) -> list[str]:
    """The section as Markdown lines; none for a plan file written before the pilot.

    At most ``rows`` families are listed, those with the largest error bound first.
    """
    if "family_pilot_error" not in ds.variables:
        return []
    runs = int(ds.attrs.get("pilot_runs", 0))
    lines = ["## Calibration pilot: the screen's error per family", ""]
    if runs == 0:
        return lines + [
            "No pilot (plan.pilot_runs = 0): every family was screened with the margin measured on the "
            "simulated candidates.",
            "",
        ]
    kinds = [str(k) for k in ds["error_kind"].values]
    error, se = ds["family_pilot_error"].values, ds["family_pilot_error_se"].values
    shown_kinds = [j for j in range(len(kinds)) if np.isfinite(error[:, j]).any()]
    piloted = np.flatnonzero(ds["family_pilot_candidate"].values >= 0)
    largest = np.nan_to_num(error_bounds(error, se, runs)[piloted], nan=-1.0)
    order = piloted[np.argsort(-largest, kind="stable")]
    lines += [
        f"{runs} runs of one candidate of each of {piloted.size} of {ds.sizes['family']} families, before the "
        "selection (the family's best-ranked candidate; simulated / screen estimate - 1, with its standard error). "
        f"A family's margin is the plan's margin widened to its error bound, |error| + {bound_multiplier(runs):.3g} "
        "se (Student's t, one-sided 97.7 %), or to the largest error measured on its simulated candidates; a "
        "family without a measurement takes the largest measured anywhere.",
        "",
    ]
    if not shown_kinds:
        return lines + [
            "No error was measured: every piloted candidate had runs cut off at run.max_wall_days (or screen "
            "estimates of 0); the families' margins come from the simulated candidates.",
            "",
        ]
    lines += [
        "| family | " + " | ".join(ERROR_NAMES[kinds[j]] for j in shown_kinds) + " | margin |",
        "|---|" + "---|" * len(shown_kinds) + "---|",
    ]
    for f in order[:rows]:
        cells = [_error_cell(float(error[f, j]), float(se[f, j])) for j in shown_kinds]
        lines.append(
            f"| {family_text(ds, int(f))} | {' | '.join(cells)} | {100 * float(ds['family_margin'][f]):.3g} % |"
        )
    if order.size > rows:
        lines.append("")
        lines.append(f"{order.size - rows} more piloted families, with smaller errors (variable family_pilot_error).")
    return lines + [""]
