"""Units of the output variables: conversions between the units of one quantity, and the unit a table reads best in.

The result files store each variable in one unit (:mod:`mcsim.io.variables`: hours, MW h, USD,
tonnes), written in its ``units`` attribute. A table for people shows a column in the unit of its
quantity in which its values read as plain numbers (:func:`readable_unit`: 3.2 d, not 76.8 h;
1.07 USD, not 1.07e-06 MUSD); an analysis converts with :func:`conversion_factor`
(``ds.mcsim.to("wall_time", "d")`` carries the new unit in its ``units`` attribute, where a plain
``ds.wall_time / 24`` keeps xarray's copy of ``h``).

The units known are those of the quantities mcsim writes (docs/units.md lists them); no units
library is imported: the conversions are factors between the units of one family, checked by
the tests against their definitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

# Each family: unit -> its size in the family's base unit (seconds, kW h, USD, kg), and the units a
# table may show, smallest first. Spellings: the file's (UDUNITS: "MW h", "d") and the usual ones.
_FAMILIES: tuple[dict[str, float], ...] = (
    {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0},
    {"kWh": 1.0, "kW h": 1.0, "MWh": 1e3, "MW h": 1e3, "GWh": 1e6, "GW h": 1e6},
    {"USD": 1.0, "kUSD": 1e3, "MUSD": 1e6, "BUSD": 1e9},
    {"kg": 1.0, "t": 1e3, "kt": 1e6},
)
# the units a table shows for each family, smallest first (one spelling each)
_SHOWN: tuple[tuple[str, ...], ...] = (
    ("s", "min", "h", "d"),
    ("kWh", "MWh", "GWh"),
    ("USD", "kUSD", "MUSD", "BUSD"),
    ("kg", "t", "kt"),
)


def _family(unit: str) -> int | None:
    """The index of ``unit``'s family in :data:`_FAMILIES`, or None when it is none of them."""
    return next((k for k, family in enumerate(_FAMILIES) if unit in family), None)


def known_units(unit: str) -> tuple[str, ...]:
    """The units ``unit`` converts to (its family's spellings), or ``()`` for a unit of no family."""
    family = _family(unit)
    return () if family is None else tuple(_FAMILIES[family])


def conversion_factor(unit: str, to: str) -> float:
    """The factor that turns a value in ``unit`` into one in ``to`` (``conversion_factor("h", "d") == 1/24``).

    Raises
    ------
    ValueError
        ``unit`` and ``to`` are not units of one quantity that mcsim knows (one line naming both,
        and the units ``unit`` converts to).
    """
    if unit == to:
        return 1.0
    family = _family(unit)
    if family is None or to not in _FAMILIES[family]:
        known = ", ".join(known_units(unit)) or f"none: {unit!r} is not a unit mcsim converts"
        raise ValueError(f"cannot convert {unit!r} to {to!r}; expected one of {known}")
    sizes = _FAMILIES[family]
    return sizes[unit] / sizes[to]


def readable_unit(values: Iterable[float] | np.ndarray, unit: str) -> tuple[float, str]:
    """The unit a column of ``values`` (in ``unit``) reads best in, and the factor to it.

    The largest unit of the family in which the median of the finite nonzero magnitudes is at
    least 1 (the smallest unit when none is); a unit of no family, or a column with no finite
    nonzero value, stays as it is (factor 1). The summary table, the plan's table and the
    accessor's table read their columns through it.

    Returns
    -------
    (float, str)
        The factor from ``unit`` and the unit shown, e.g. ``(1e-6, "MUSD")`` for costs of millions of USD.
    """
    family = _family(unit)
    array = np.abs(np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float))
    array = array[np.isfinite(array) & (array > 0)]
    if family is None or array.size == 0:
        return 1.0, unit
    typical = float(np.median(array))
    shown = _SHOWN[family]
    for candidate in reversed(shown):
        factor = conversion_factor(unit, candidate)
        if typical * factor >= 1.0:
            return factor, candidate
    return conversion_factor(unit, shown[0]), shown[0]


def format_readable(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, with thousands separators and without an exponent
    where a number reads without one (``1,234,567``, ``23.86``, ``0.0123``; below 1e-4: ``1.2e-05``).

    ``nan`` / ``inf`` / ``-inf`` for values that are not finite.
    """
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    if abs(rounded) >= 1e-4:
        return f"{rounded:.{digits}g}"
    return f"{value:.{max(digits - 1, 0)}e}"
