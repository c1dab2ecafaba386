"""The sections of a result report with parameter draws: the decision under uncertainty, the input that matters.

"Decision under uncertainty" (:func:`decision_section`): the robust choice on cost
(:func:`mcsim.analysis.robustness.robustness`), P(best) and expected regret of the leading
configurations, the pooled probability of meeting the deadline, and the input that would change the
choice. "Which input matters most" (:func:`sensitivity_section`): the ranking of the inputs by their
sensitivity indices on cost at the best configuration (:func:`point_sensitivity`), beside the tornado
figure ``sensitivity.png`` (:mod:`mcsim.report.tornado`).
"""

from __future__ import annotations

import xarray as xr

from mcsim.analysis.deadline import PROBABILITY, prob_within
from mcsim.analysis.robustness import robustness
from mcsim.analysis.sensitivity import disagreements
from mcsim.io.format import format_money, format_significant
from mcsim.report import tornado
from mcsim.report.markdown import configuration_text, markdown_text, percent_text


def decision_section(
    ds: xr.Dataset, days: float | None, objective: str = "cost", probability: float = PROBABILITY
) -> list[str]:
    """ "Decision under uncertainty": the robust choice on ``objective``, its P(best) and expected
    regret, the leading configurations, the pooled probability of finishing within ``days``
    (when a deadline is given) and the input that would change the choice
    (:func:`mcsim.analysis.robustness.robustness`)."""
    found = robustness(ds, objective)
    choice, units, draws = found["choice"], found["units"], found["draws"]
    lines = [
        "## Decision under uncertainty",
        "",
        f"Over the {draws:,} parameter draws of the uncertain inputs, each configuration's {objective} in a "
        f"draw is its mean over the draw's {ds.sizes['run']:,} runs. P(best) is the share of draws in which a "
        "configuration is the best (95 % Wilson interval over draws); its regret in a draw is what it loses "
        "against that draw's best, and the expected regret is the mean over draws. The robust choice is the "
        "configuration of least expected regret.",
        "",
        f"**Robust choice on {objective}: {configuration_text(choice['configuration'])}**: best in "
        f"{percent_text(choice['p_best'], choice['p_best_ci95'])} of the draws, expected regret "
        f"{format_money(choice['expected_regret'], units)} (95 % CI up to "
        f"{format_money(choice['expected_regret_ci95'][1], units)}).",
        "",
    ]
    lines += _leaders_table(found["leaders"], units)
    if days is not None:
        lines += _deadline_lines(ds, choice["configuration"], days, probability)
    return lines + [_changing_text(found)]


def _leaders_table(leaders: list[dict], units: str) -> list[str]:
    """The leading configurations with their P(best), its interval, the share won clearly, the expected regret."""
    lines = [
        "| configuration | P(best) | 95 % interval | won beyond the runs' noise | expected regret |",
        "|---|---:|---:|---:|---:|",
    ]
    for leader in leaders:
        low, high = leader["p_best_ci95"]
        lines.append(
            f"| {configuration_text(leader['configuration'])} | {100 * leader['p_best']:.1f} % | "
            f"{100 * low:.1f} – {100 * high:.1f} % | {100 * leader['p_best_clear']:.1f} % | "
            f"{format_money(leader['expected_regret'], units)} |"
        )
    return lines + [
        "",
        '("won beyond the runs\' noise": draws won by more than 1.96 standard errors of the paired '
        "difference to the runner-up; the rest of P(best) was decided within the Monte Carlo noise.)",
        "",
    ]


def _deadline_lines(ds: xr.Dataset, configuration: dict, days: float, probability: float) -> list[str]:
    """The robust choice's pooled probability of finishing within ``days``, and its share of draws meeting it."""
    within = prob_within(ds, days, probability)
    one = within.sel(configuration) if configuration else within
    interval = (float(one["p_within_ci95_low"]), float(one["p_within_ci95_high"]))
    return [
        f"The robust choice finishes within {days:g} days with probability "
        f"{percent_text(float(one['p_within']), interval)}, pooled over draws and runs; in "
        f"{100 * float(one['draws_meeting']):.0f} % of the draws its own probability reaches {probability:g}.",
        "",
    ]


def _changing_text(found: dict) -> str:
    """One or two sentences: which input would change the robust choice, and what knowing it is worth."""
    units = found["units"]
    changing = next((item for item in found["inputs"] if item["changes"]), None)
    if changing is None:
        return (
            "**No single input changes the choice**: split at each uncertain input's median, the robust "
            "choice stays the best in both halves."
        )
    parts = [p for p in changing["groups"] if p["best"] != found["choice"]["configuration"]]
    part = max(parts, key=lambda p: p["pick_regret"])
    side = "below" if part is changing["groups"][0] else "above"
    edge = part["range"][1] if side == "below" else part["range"][0]
    low, high = part["pick_regret_ci95"]
    text = (
        f"**Which input would change it: {markdown_text(changing['input'])}.** In the draws with "
        f"{markdown_text(changing['input'])} {side} {format_significant(edge)} "
        f"{markdown_text(changing['units']) if changing['units'] not in ('', '1') else ''}".rstrip()
        + f", {configuration_text(part['best'])} is better on average; the robust choice loses "
        f"{format_money(part['pick_regret'], units)} there "
        f"(95 % CI {format_money(low, units)} to {format_money(high, units)}"
        + ("" if low > 0 else ", which includes 0: the change may be noise")
        + "). "
        f"Knowing which side of its median it falls on before choosing would save "
        f"{format_money(changing['value_of_information'], units)} on average"
    )
    others = [item["input"] for item in found["inputs"] if item is not changing and item["value_of_information"] > 0]
    return text + (f"; next: {', '.join(markdown_text(o) for o in others[:3])}." if others else ".")


def point_sensitivity(
    ds: xr.Dataset, resamples: int | None = None, progress: bool | None = None
) -> tuple[dict, xr.Dataset] | str:
    """The indices of cost at the chosen configuration (:func:`mcsim.report.tornado.point_sensitivity`), or
    why there are none."""
    try:
        return tornado.point_sensitivity(ds, "cost", resamples=resamples, progress=progress)
    except ValueError as err:
        return str(err)


def sensitivity_section(ds: xr.Dataset, found: tuple[dict, xr.Dataset] | str, figures: list[str]) -> list[str]:
    """ "Which input matters most": the ranking of the inputs at the chosen configuration, the figure.

    ``found``: :func:`mcsim.report.tornado.point_sensitivity` of cost, or why there is none.
    """
    lines = ["## Which input matters most", ""]
    if isinstance(found, str):
        return lines + [f"No ranking: {markdown_text(found)}.", ""]
    point, result = found
    output = result.attrs["output"]
    main = str(result.attrs["ranked_by"])
    names = ("ST", "S1", "delta") if main == "ST" else ("S1", "delta")
    how = (
        "total (ST) and first-order (S1) Sobol indices from the Saltelli design"
        if main == "ST"
        else f"the first-order index S1 from the given {result.attrs['design']} draws (a total index needs "
        'run.design = "saltelli")'
    )
    where = f" at {configuration_text(point)} (the best mean {output.replace('_', ' ')})" if point else ""
    lines += [
        f"How much of the spread of the mean {output.replace('_', ' ')} per draw{where} each uncertain input "
        f"explains, over {ds.sizes['draw']:,} draws: {how}, with 95 % bootstrap intervals; ranked by {main}. "
        "The moment-independent delta is a second opinion (biased upward with few draws: an input without "
        "effect still gets a few hundredths).",
        "",
        "| rank | input | drawn 5–95 % | " + " | ".join(f"{n} [95 % CI]" for n in names) + " | rank by delta |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]
    rows = tornado.ranking(ds, result, point)
    lines += [_ranking_row(row, names) for row in rows]
    at = result.sel({d: v for d, v in point.items() if d in result.dims})
    pairs = disagreements(at)
    lines += [""] + (
        [
            f"Delta disagrees with the {main} ranking: it puts {markdown_text(below)} above {markdown_text(above)}, "
            f"whose {main} interval lies wholly above."
            for above, below in pairs
        ]
        or [f"Delta agrees with the {main} ranking wherever the {main} intervals tell the inputs apart."]
    )
    if result.attrs.get("correlated_inputs"):
        lines += [
            "",
            "Correlated inputs ("
            + ", ".join(markdown_text(k) for k in result.attrs["correlated_inputs"].split())
            + "): each one's indices include the effect it carries through the others; they overlap and do "
            "not add up.",
        ]
    if "sensitivity" in figures:
        lines += ["", "![Which input matters most](sensitivity.png)"]
    return lines + [""]


def _ranking_row(row: dict, names: tuple[str, ...]) -> str:
    """One input of the ranking: rank, key, the 5–95 % range of its draws, its indices with their intervals, its
    rank by delta."""
    unit = "" if row["units"] in ("", "1") else f" {markdown_text(row['units'])}"
    cells = [f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in (row[n] for n in names)]
    return (
        f"| {row['rank']} | {markdown_text(row['input'])} | "
        f"{format_significant(row['p5'])} – {format_significant(row['p95'])}{unit} "
        f"| {' | '.join(cells)} | {row['rank_delta']}{' (disagrees)' if row['delta_disagrees'] else ''} |"
    )
