"""The report of a result file: ``README.md`` and the figures beside it.

:func:`write_report` writes ``README.md`` and the figures that apply (``scaling.png`` when there is
a ``gpus`` dimension or a single sweep dimension, ``cdf.png``, ``pareto.png``, ``breakdown.png``)
into a folder, each file atomically. :func:`report_markdown` is the README: what was simulated
(:mod:`mcsim.report.markdown`), the best configurations, the Pareto front and the cheapest within a
deadline (:mod:`mcsim.report.picks`), then the figures.

A result with parameter draws (``run.draws``) is summarised over draws and runs together (the
predictive distribution; CIs of means from the spread of the draw means), and gets the sections
"Decision under uncertainty" and "Which input matters most" (:mod:`mcsim.report.uncertainty`) with
the tornado figure ``sensitivity.png`` (:mod:`mcsim.report.tornado`). Its other figures are drawn
from the draws and runs pooled per configuration (:func:`pooled_over_draws`).
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.analysis.configurations import check_days, check_probability
from mcsim.analysis.deadline import PROBABILITY
from mcsim.analysis.ranking import best
from mcsim.io.atomic import write_atomic
from mcsim.io.variables import sweep_dims
from mcsim.report import plots, tornado
from mcsim.report.markdown import inert, markdown_text, what_section
from mcsim.report.picks import PICKS, deadline_section, pareto_section, picks_section
from mcsim.report.uncertainty import decision_section, point_sensitivity, sensitivity_section

# (name of the figure's file without .png, title, caption)
FIGURES = (
    (
        "scaling",
        "Scaling",
        "Mean wall time, energy, cost and ETTR against the number of GPUs (or the one swept dimension), with the "
        "5–95 % range over runs; an x on the axis marks an infeasible configuration, a hollow marker one with runs "
        "censored at the wall-time limit.",
    ),
    (
        "cdf",
        "Distribution of wall time",
        "Empirical distribution function of the wall time over runs, per configuration.",
    ),
    (
        "pareto",
        "Trade-off of wall time and cost",
        "Every feasible configuration at its mean, bars from the 5th to the 95th percentile; the Pareto front in red.",
    ),
    (
        "breakdown",
        "Where wall time and energy go",
        "Mean wall time and energy split into their parts, and the parts other than compute as shares.",
    ),
)


def pooled_over_draws(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each configuration's draws and runs as one ``run`` dimension (D x R runs).

    Per-run variables are reshaped (draw-major); per-configuration variables along
    ``draw`` are reduced: ``feasible`` to feasible in every draw, numbers to their mean
    over draws, text to the first draw's; the inputs' drawn values are left out. A result
    without draws is returned as it is. For figures, which show the predictive
    distribution of each configuration.
    """
    if "draw" not in ds.dims:
        return ds
    draws, runs = ds.sizes["draw"], ds.sizes["run"]
    variables: dict[Hashable, xr.Variable | xr.DataArray] = {}
    for name, var in ds.data_vars.items():
        if "draw" not in var.dims:
            variables[name] = var
            continue
        others = [d for d in var.dims if d not in ("draw", "run")]
        if not others and "run" not in var.dims:
            continue  # an input's drawn values
        if "run" in var.dims:
            values = var.transpose(*others, "draw", "run").values
            variables[name] = xr.Variable(
                (*others, "run"), values.reshape(values.shape[:-2] + (draws * runs,)), var.attrs
            )
        else:
            variables[name] = _over_draws(var)
    coords = {d: ds[d] for d in sweep_dims(ds)} | {"run": np.arange(draws * runs)}
    return xr.Dataset(variables, coords=coords, attrs=dict(ds.attrs))


def _over_draws(var: xr.DataArray) -> xr.Variable:
    """A per-configuration variable reduced over ``draw``: feasible in every draw, the mean of floats, the
    first draw's value of anything else."""
    if var.dtype == bool:
        return var.all("draw").variable
    if var.dtype.kind == "f":
        return var.mean("draw").variable.astype(var.dtype)
    return var.isel(draw=0).variable


def _intro(ds: xr.Dataset) -> str:
    """The paragraph under the title: what the statistics are over, and how configurations are compared."""
    runs = ds.sizes["run"]
    if "draw" in ds.dims:
        return (
            f"Monte Carlo results over {ds.sizes['draw']:,} parameter draws of the uncertain inputs × "
            f"{runs:,} runs per draw, per configuration. Means carry the 95 % confidence interval of the "
            "mean from the spread of the draw means (the draws are the independent units); ranges are the "
            "5th and 95th percentiles over draws and runs (the predictive interval: input uncertainty and "
            "chance). Draw d has the same input values and random streams in every configuration, so "
            "comparisons pair (draw, run)."
        )
    return (
        f"Monte Carlo results over {runs:,} runs per configuration. Means carry the 95 % confidence "
        "interval of the mean (normal approximation); ranges are the 5th and 95th percentiles over runs. "
        "Runs share their random streams across configurations (common random numbers)."
    )


def report_markdown(
    ds: xr.Dataset,
    figures: list[str],
    source: str | None = None,
    sensitivity: tuple[dict, xr.Dataset] | str | None = None,
    deadline: float | None = None,
    probability: float = PROBABILITY,
) -> str:
    """The report's Markdown; ``figures`` are the names (without .png) of the figures beside it.

    With parameter draws, ``sensitivity`` is :func:`mcsim.report.tornado.point_sensitivity` of cost
    (computed when not given) for the section "Which input matters most". ``deadline``
    [days] and ``probability`` (in (0, 1)) are the question of the section "Cheapest
    configuration within a deadline"; without a deadline it says how to ask it.
    """
    if deadline is not None:
        deadline = check_days(deadline)
    probability = check_probability(probability)
    name = ds.attrs.get("scenario_name", "mcsim results")
    lines = [f"# mcsim report: {markdown_text(name)}", "", _intro(ds), ""]
    lines += what_section(ds, source) + [""]
    lines += ["## Best configurations", ""] + _best_sections(ds, deadline, probability)
    if "draw" in ds.dims:
        lines += sensitivity_section(ds, point_sensitivity(ds) if sensitivity is None else sensitivity, figures)
    lines += ["## Figures", ""]
    for key, title, caption in FIGURES:
        if key in figures:
            lines += [f"### {title}", "", f"![{title}]({key}.png)", "", caption, ""]
    if "scaling" not in figures:
        lines += ["(No scaling figure: the file has no `gpus` sweep dimension nor a single sweep dimension.)", ""]
    return "\n".join(lines).rstrip() + "\n"


def _best_sections(ds: xr.Dataset, deadline: float | None, probability: float) -> list[str]:
    """The picks, the Pareto front, the deadline and (with draws) the decision under uncertainty; or why
    no configuration can be ranked."""
    try:
        records = {objective: best(ds, objective) for _, objective, _ in PICKS}
    except ValueError as err:
        return [f"**No configuration can be ranked**: {inert(str(err))}.", ""]
    lines = picks_section(ds, records)
    lines += pareto_section(ds) + [""]
    lines += deadline_section(ds, deadline, probability) + [""]
    if "draw" in ds.dims:
        lines += decision_section(ds, deadline, probability=probability) + [""]
    return lines


def write_report(
    ds: xr.Dataset,
    folder: str | Path,
    source: str | None = None,
    *,
    deadline: float | None = None,
    probability: float = PROBABILITY,
    resamples: int | None = None,
    progress: bool | None = None,
) -> list[Path]:
    """Write ``README.md`` and the figures into ``folder`` (created if needed); returns the paths.

    Every figure and the text are made before anything is written, so an error
    (matplotlib missing, no feasible configuration, a deadline out of range) leaves the
    folder untouched. ``deadline`` [days] and ``probability``: see :func:`report_markdown`;
    ``resamples`` and ``progress``: those of the sensitivity indices
    (:func:`mcsim.analysis.sensitivity.sensitivity`), with parameter draws.
    """
    if deadline is not None:
        deadline = check_days(deadline)
    probability = check_probability(probability)
    made: dict = {}
    try:
        found = _draw_figures(ds, made, resamples, progress)
        text = report_markdown(ds, list(made), source, found, deadline, probability)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = [plots.save_figure(fig, folder / f"{key}.png") for key, fig in made.items()]
        write_atomic(folder / "README.md", text)
        return written + [folder / "README.md"]
    finally:
        if made:
            import matplotlib.pyplot as plt

            for fig in made.values():
                plt.close(fig)


def _draw_figures(
    ds: xr.Dataset, made: dict, resamples: int | None, progress: bool | None
) -> tuple[dict, xr.Dataset] | str | None:
    """Draw the report's figures into ``made`` (name: figure; the caller closes them); returns the
    sensitivity indices of cost at the chosen configuration with parameter draws (or why there are none),
    else None."""
    shown = pooled_over_draws(ds)  # figures: each configuration's draws and runs together
    try:
        x = plots.scaling_dimension(shown)
    except ValueError:
        x = None
    if x is not None:
        made["scaling"] = plots.plot_scaling(shown, x)
    made["cdf"] = plots.plot_cdf(shown, "wall_time")
    made["pareto"] = plots.plot_pareto(shown, "wall_time", "cost")
    made["breakdown"] = plots.plot_breakdown(shown)
    found = point_sensitivity(ds, resamples, progress) if "draw" in ds.dims else None
    if isinstance(found, tuple):
        made["sensitivity"] = tornado.plot_sensitivity(ds, "cost", *found)
    return found
