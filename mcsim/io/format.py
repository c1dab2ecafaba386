"""Display formatting of numbers, amounts, durations and sizes: one home for every printed number.

These are for people (tables, reports, figures, messages); none is meant to be read back.
A number written into a TOML file that must read back exactly is a different concept:
:func:`mcsim.scenario.toml.format_number`.

This module sits in the bottom layer (beside the variable registry) because
:mod:`mcsim.scenario.limits` and :mod:`mcsim.analysis.summary` print with it as
well as :mod:`mcsim.report`.
"""

from __future__ import annotations

import math
from typing import Any

from mcsim.io.units import readable_unit


def format_significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, trailing zeros kept; from ``10**digits`` on, whole and grouped.

    ``format_significant(1.2) == "1.20"``, ``format_significant(16) == "16.0"``,
    ``format_significant(168.4) == "168"``, ``format_significant(12345.6) == "12,346"``.
    """
    return f"{value:#.{digits}g}".rstrip(".") if abs(value) < 10**digits else f"{value:,.0f}"


def format_compact(value: float, digits: int = 3, exponent_digits: int = 3) -> str:
    """``value`` in the short ``%g`` form below 1e5, in exponent form from there; ``nan`` when not finite.

    ``format_compact(0.123456) == "0.123"``, ``format_compact(12345.0, 4) == "1.234e+04"``,
    ``format_compact(123456.0) == "1.235e+05"`` (``exponent_digits`` decimals after the point).
    """
    if not math.isfinite(value):
        return "nan"
    return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.{exponent_digits}e}"


def format_money(value: float, units: str = "USD") -> str:
    """A cost-like amount to 3 significant digits: US dollars in the unit it reads best in (USD, kUSD,
    MUSD, BUSD: :func:`mcsim.io.units.readable_unit`), other units as they are.

    ``format_money(1_234_567.0) == "1.23 MUSD"``, ``format_money(1.07) == "1.07 USD"``,
    ``format_money(2.5, "t") == "2.50 t"``.
    """
    if units == "USD":
        factor, shown = readable_unit([value], units)
        return f"{format_significant(value * factor)} {shown}"
    return f"{format_significant(value)} {units}".rstrip()


def format_usd(value: float) -> str:
    """An amount in US dollars to the dollar below 100,000 USD, in MUSD to three decimals from there.

    The plan report's form: budgets and their margins read to the dollar or to the thousand
    dollars. ``format_usd(1234.4) == "1,234 USD"``, ``format_usd(2_345_678.0) == "2.346 MUSD"``.
    """
    return f"{value / 1e6:,.3f} MUSD" if abs(value) >= 1e5 else f"{value:,.0f} USD"


def format_coordinate(value: Any) -> str:
    """A coordinate value as text, floats to 6 significant digits (1.0000000000010 -> '1')."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_duration(seconds: float) -> str:
    """``seconds`` as text in s, min, h or days (``forever`` when not finite)."""
    if not math.isfinite(seconds):
        return "forever"
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.2g} s"


def format_bytes(value: float) -> str:
    """``value`` bytes as text in decimal units, e.g. ``12.3 GB``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"
