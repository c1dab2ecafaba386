"""Shared pieces of the result figures: pyplot and the house style, units and labels, configurations.

The figure modules (:mod:`mcsim.report.scaling`, :mod:`mcsim.report.distributions`,
:mod:`mcsim.report.tradeoff`, :mod:`mcsim.report.tornado`, :mod:`mcsim.report.failures`)
draw with these: :func:`pyplot` imports matplotlib (Agg without a display) or raises
:class:`mcsim.errors.BackendUnavailable`; :func:`house_style` is the rc context every
figure is drawn in; :func:`display_units` and :func:`axis_label` convert a variable to the
units a planner reads (wall time in days, cost in MUSD, energy in MWh);
:func:`cheapest_and_dearest` and :func:`sweep_points` pick the configurations shown;
:func:`figure_title` writes a figure's title and subtitle; :func:`save_figure` writes a
figure atomically in the format its file name's suffix names.
"""

from __future__ import annotations

import itertools
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from mcsim._version import DISTRIBUTION
from mcsim.errors import BackendUnavailable
from mcsim.io.atomic import atomic_open
from mcsim.io.variables import SAMPLE_DIMS, VARIABLES, sweep_dims

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


def pyplot():
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


def house_style():
    """The rc context every figure is drawn in (:data:`_STYLE`)."""
    import matplotlib

    return matplotlib.rc_context(_STYLE)


def check_variable(ds: xr.Dataset, name: str) -> None:
    """Raise ValueError (one line, naming the per-run variables) unless ``name`` is a per-run variable of ``ds``."""
    if name not in ds or "run" not in ds[name].dims:
        per_run = sorted(str(v) for v in ds.data_vars if "run" in ds[v].dims)
        raise ValueError(f"{name!r} is not a per-run variable of this dataset; expected one of {', '.join(per_run)}")


def display_units(ds: xr.Dataset, name: str) -> tuple[float, str]:
    """Factor from the stored unit to the shown one, and the shown unit (days, MUSD, MWh)."""
    units = ds[name].attrs.get("units")
    if units is None:
        units = VARIABLES[name].units if name in VARIABLES else ""
    ladder = _DISPLAY_UNITS.get(units, ((1.0, units),))
    values = np.abs(np.asarray(ds[name].values, dtype=float))
    largest = float(np.nanmax(values)) if np.isfinite(values).any() else np.nan
    for factor, shown in ladder:
        if not np.isfinite(largest) or largest * factor >= 0.1:
            return factor, shown
    return ladder[-1]


def axis_label(ds: xr.Dataset, name: str) -> str:
    """Axis label: name and unit, e.g. 'wall time [days]'."""
    unit = display_units(ds, name)[1]
    text = _NAMES.get(name, name.replace("_", " "))
    return f"{text} [{unit}]" if unit else text


def display_name(name: str) -> str:
    """A variable's name in a sentence or a title: 'wall time', 'ETTR', 'CO$_2$'."""
    return _NAMES.get(name, name.replace("_", " "))


def sweep_points(ds: xr.Dataset, dims: Sequence[str]) -> list[dict]:
    """Every combination of the coordinates of ``dims``, in C order."""
    return [
        dict(zip(dims, values, strict=False)) for values in itertools.product(*(ds[d].values.tolist() for d in dims))
    ]


def _value_text(dim: str, value) -> str:
    """One coordinate of a configuration's label: '1,024 GPUs', 'gockpt', 'tp=4'."""
    if dim == "gpus":
        return f"{value:,} GPUs"
    if isinstance(value, str):
        return value
    return f"{dim}={value:g}" if isinstance(value, float) else f"{dim}={value}"


def config_label(point: dict, fallback: str = "") -> str:
    """Short label of a configuration: '1,024 GPUs · gockpt · 30min'."""
    return " · ".join(_value_text(d, v) for d, v in point.items()) or fallback


def runs_of(ds: xr.Dataset, point: dict, name: str) -> np.ndarray:
    """Per-run values of ``name`` at ``point``, in shown units."""
    return ds[name].sel(point).values.astype(float).ravel() * display_units(ds, name)[0]


def is_feasible(ds: xr.Dataset, point: dict) -> bool:
    """Whether the configuration ``point`` is feasible (in every draw; True without ``feasible``)."""
    return bool(ds["feasible"].sel(point).all()) if "feasible" in ds else True


def scenario_name(ds: xr.Dataset) -> str:
    """The scenario's name, for titles ('mcsim results' when the file has none)."""
    return str(ds.attrs.get("scenario_name", "mcsim results"))


def feasible_points(ds: xr.Dataset) -> list[dict]:
    """The feasible configurations, in C order of the sweep.

    Raises
    ------
    ValueError
        When there is none.
    """
    points = [p for p in sweep_points(ds, sweep_dims(ds)) if is_feasible(ds, p)]
    if not points:
        raise ValueError("no feasible configuration in the dataset")
    return points


def cheapest_and_dearest(ds: xr.Dataset, limit: int) -> tuple[list[dict], list[dict], str]:
    """Feasible configurations by mean cost; more than ``limit``: the cheapest and dearest halves.

    Returns (cheapest, dearest, note): ``dearest`` is empty when all are shown.
    """
    points = sweep_points(ds, sweep_dims(ds))
    feasible = feasible_points(ds)
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


def log_worthy(values: np.ndarray, ratio: float = 20.0) -> bool:
    """Whether the finite ``values`` are all positive and span more than a factor ``ratio`` (a log axis then)."""
    values = values[np.isfinite(values)]
    return values.size > 0 and values.min() > 0 and values.max() / values.min() > ratio


def plain_log_axis(axis) -> None:
    """Log axis ticked at 1, 2, 5 x 10^k with plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def figure_title(fig, what: str, detail: str) -> None:
    """The figure's title ``what`` and, wrapped to the figure's width, its subtitle ``detail``."""
    width = int(fig.get_figwidth() * 10)  # characters of the 12-point subtitle that fit
    fig.suptitle(f"{what}\n" + textwrap.fill(detail, width, break_on_hyphens=False), fontsize=12)


def completed_at(ds: xr.Dataset, point: dict) -> float:
    """Share of the runs of ``point`` that completed (1 when the dataset does not say)."""
    return float(ds["completed"].sel(point).values.mean()) if "completed" in ds else 1.0


def censored_text(share: float) -> str:
    """`` (80% completed)`` after the label of a configuration with censored runs, else ""."""
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
    (:func:`figure_format`). Written through :func:`mcsim.io.atomic.atomic_open`:
    a temporary file in the destination folder (created if needed), renamed
    over ``path`` only once complete.
    """
    path = Path(path)
    fmt = figure_format(path)
    with atomic_open(path) as handle:
        fig.savefig(handle, format=fmt, dpi=DPI)
    return path
