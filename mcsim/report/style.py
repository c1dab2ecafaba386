"""Shared pieces of the result figures: pyplot and the house style, units and labels, configurations.

The figure modules (:mod:`mcsim.report.scaling`, :mod:`mcsim.report.distributions`,
:mod:`mcsim.report.tradeoff`, :mod:`mcsim.report.tornado`, :mod:`mcsim.report.failures`)
draw with these: :func:`_pyplot` imports matplotlib (Agg without a display) or raises
:class:`mcsim.errors.BackendUnavailable`; :func:`_style` is the rc context every
figure is drawn in; :func:`_units` and :func:`_label` convert a variable to the units a
planner reads (wall time in days, cost in MUSD, energy in MWh); :func:`_select` and
:func:`_points` pick the configurations shown; :func:`save_figure` writes a figure
atomically in the format its file name's suffix names.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from mcsim._version import DISTRIBUTION
from mcsim.errors import BackendUnavailable
from mcsim.io.atomic import atomic_open
from mcsim.io.variables import SAMPLE_DIMS, sweep_dims

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

DPI = 150  # resolution of raster figures [dots per inch]

# stored unit -> the units it is shown in, preferred first: (factor from the stored unit, unit shown);
# a smaller unit is used only when values would be below 0.1 of the preferred one
_DISPLAY_UNITS = {
    "h": ((1 / 24, "days"), (1.0, "h"), (60.0, "min")),
    "USD": ((1e-6, "MUSD"), (1e-3, "kUSD"), (1.0, "USD")),
    "MWh": ((1.0, "MWh"), (1e3, "kWh")),
    "MW h": ((1.0, "MWh"), (1e3, "kWh")),  # the UDUNITS spelling stored since CF-1.10
    "t": ((1.0, "t CO$_2$e"), (1e3, "kg CO$_2$e")),
    "1": ((1.0, ""),),
}
_NAMES = {"wall_time": "wall time", "ettr": "ETTR", "co2": "CO$_2$", "n_failures": "failures"}

_STYLE: dict[RcKeyType, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "figure.titlesize": 12,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.framealpha": 0.9,
    "savefig.facecolor": "white",
    "figure.facecolor": "white",
    "axes.formatter.useoffset": False,
}


def _pyplot():
    """matplotlib.pyplot, with the Agg backend when there is no display."""
    try:
        import matplotlib
    except ImportError as err:
        raise BackendUnavailable(f"plots need matplotlib: pip install '{DISTRIBUTION}[plot]'") from err
    headless = (
        sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd"))
        and not os.environ.get("DISPLAY")
        and not os.environ.get("WAYLAND_DISPLAY")
    )
    if headless and not os.environ.get("MPLBACKEND") and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style():
    import matplotlib

    return matplotlib.rc_context(_STYLE)


def _check_variable(ds: xr.Dataset, name: str) -> None:
    if name not in ds or "run" not in ds[name].dims:
        per_run = sorted(str(v) for v in ds.data_vars if "run" in ds[v].dims)
        raise ValueError(f"{name!r} is not a per-run variable of this dataset; expected one of {', '.join(per_run)}")


def _units(ds: xr.Dataset, name: str) -> tuple[float, str]:
    """Factor from the stored unit to the shown one, and the shown unit (days, MUSD, MWh)."""
    units = ds[name].attrs.get("units")
    if units is None:
        from mcsim.io.variables import VARIABLES

        units = VARIABLES[name].units if name in VARIABLES else ""
    ladder = _DISPLAY_UNITS.get(units, ((1.0, units),))
    values = np.abs(np.asarray(ds[name].values, dtype=float))
    largest = float(np.nanmax(values)) if np.isfinite(values).any() else np.nan
    for factor, shown in ladder:
        if not np.isfinite(largest) or largest * factor >= 0.1:
            return factor, shown
    return ladder[-1]


def _label(ds: xr.Dataset, name: str) -> str:
    """Axis label: name and unit, e.g. 'wall time [days]'."""
    unit = _units(ds, name)[1]
    text = _NAMES.get(name, name.replace("_", " "))
    return f"{text} [{unit}]" if unit else text


def _name(name: str) -> str:
    return _NAMES.get(name, name.replace("_", " "))


def _points(ds: xr.Dataset, dims: Sequence[str]) -> list[dict]:
    """Every combination of the coordinates of ``dims``, in C order."""
    return [
        dict(zip(dims, values, strict=False)) for values in itertools.product(*(ds[d].values.tolist() for d in dims))
    ]


def _value_text(dim: str, value) -> str:
    if dim == "gpus":
        return f"{value:,} GPUs"
    if isinstance(value, str):
        return value
    return f"{dim}={value:g}" if isinstance(value, float) else f"{dim}={value}"


def config_label(point: dict, fallback: str = "") -> str:
    """Short label of a configuration: '1,024 GPUs · gockpt · 30min'."""
    return " · ".join(_value_text(d, v) for d, v in point.items()) or fallback


def _runs_of(ds: xr.Dataset, point: dict, name: str) -> np.ndarray:
    """Per-run values of ``name`` at ``point``, in shown units."""
    return ds[name].sel(point).values.astype(float).ravel() * _units(ds, name)[0]


def _feasible(ds: xr.Dataset, point: dict) -> bool:
    return bool(ds["feasible"].sel(point).all()) if "feasible" in ds else True


def _scenario(ds: xr.Dataset) -> str:
    return str(ds.attrs.get("scenario_name", "mcsim results"))


def _select(ds: xr.Dataset, limit: int) -> tuple[list[dict], list[dict], str]:
    """Feasible configurations by mean cost; more than ``limit``: the cheapest and dearest halves.

    Returns (cheapest, dearest, note): ``dearest`` is empty when all are shown.
    """
    dims = sweep_dims(ds)
    points = _points(ds, dims)
    feasible = [p for p in points if _feasible(ds, p)]
    if not feasible:
        raise ValueError("no feasible configuration in the dataset")
    mean_cost = ds["cost"].mean([d for d in SAMPLE_DIMS if d in ds["cost"].dims])
    feasible.sort(key=lambda p: float(mean_cost.sel(p)))
    note = []
    if len(feasible) > limit:
        half = limit // 2
        note.append(
            f"{limit} of {len(feasible)} configurations: the {half} cheapest and the {half} dearest by mean cost"
        )
        cheap, dear = feasible[:half], feasible[-half:]
    else:
        cheap, dear = feasible, []
    if len(points) > len(feasible):
        note.append(f"{len(points) - len(feasible)} infeasible not shown")
    return cheap, dear, "; ".join(note)


def _log_worthy(values: np.ndarray, ratio: float = 20.0) -> bool:
    values = values[np.isfinite(values)]
    return values.size > 0 and values.min() > 0 and values.max() / values.min() > ratio


def _plain_log_axis(axis) -> None:
    """Log axis ticked at 1, 2, 5 x 10^k with plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _title(fig, what: str, detail: str) -> None:
    import textwrap

    width = int(fig.get_figwidth() * 10)  # characters of the 12-point subtitle that fit
    fig.suptitle(f"{what}\n" + textwrap.fill(detail, width, break_on_hyphens=False), fontsize=12)


def _completed(ds: xr.Dataset, point: dict) -> float:
    """Share of the runs of ``point`` that completed (1 when the dataset does not say)."""
    return float(ds["completed"].sel(point).values.mean()) if "completed" in ds else 1.0


def _censored_text(share: float) -> str:
    return f" ({share:.0%} completed)" if share < 1.0 else ""


def figure_format(path: str | Path) -> str:
    """The image format that ``path``'s suffix names (``png`` when it has none).

    Raises
    ------
    ValueError
        The suffix names no format matplotlib can write (e.g. ``.nc``, ``.txt``).
    BackendUnavailable
        matplotlib is not installed.
    """
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as err:
        raise BackendUnavailable(f"plots need matplotlib: pip install '{DISTRIBUTION}[plot]'") from err
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise ValueError(
            f"expected a file name ending in an image format ({', '.join(sorted(formats))}), got .{suffix}"
        )
    return suffix


def save_figure(fig, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` atomically in the format its suffix names; returns the path.

    PNG (150 dpi) when the name has no suffix; any format matplotlib writes
    (png, pdf, svg, jpg, ...) by suffix; another suffix raises ``ValueError``
    (:func:`figure_format`). Written through :func:`mcsim.atomic.atomic_open`:
    a temporary file in the destination folder (created if needed), renamed
    over ``path`` only once complete.
    """
    path = Path(path)
    fmt = figure_format(path)
    with atomic_open(path) as handle:
        fig.savefig(handle, format=fmt, dpi=DPI)
    return path
