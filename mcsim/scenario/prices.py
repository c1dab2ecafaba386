"""The hourly price of a GPU type under a scenario's ``[cost]`` table, and the checks on it.

A rented GPU of type T costs, in USD per GPU-hour (docs/model.md §5), the first of:

1. ``cost.gpu_hour_usd_by_type[T]``, the scenario's price for that type;
2. ``cost.gpu_hour_usd``, one price the scenario gives for every type;
3. the catalog's published price of T at the rate ``cost.price`` (``on_demand`` or
   ``reserved``; :data:`mcsim.scenario.catalog.GPU_PRICES`).

A type with none of the three cannot be rented: :func:`check_type_prices` refuses it. A
scenario or plan that compares several GPU types while one explicit ``gpu_hour_usd``
prices two or more of them is refused as well: its cost ranking would only restate that
one price (issue 22).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.catalog import catalog_price
from mcsim.scenario.schema import CostSection

__all__ = ["gpu_hour_usd", "check_type_prices"]


def gpu_hour_usd(cost: CostSection, gpu: str) -> Any:
    """The rental price of one GPU of type ``gpu``, USD/(GPU h).

    Parameters
    ----------
    cost : CostSection
        The scenario's ``[cost]`` table. ``gpu_hour_usd`` may be an array over parameter
        draws (uncertain inputs); it is then returned as it is.
    gpu : str
        Catalog name of the GPU type.

    Returns
    -------
    float, ndarray or None
        The price, or None when neither the scenario nor the catalog gives one.
    """
    by_type = dict(cost.gpu_hour_usd_by_type)
    if gpu in by_type:
        return by_type[gpu]
    if cost.gpu_hour_usd is not None:
        return cost.gpu_hour_usd
    return catalog_price(gpu, cost.price)


def check_type_prices(
    cost: CostSection, gpu_types: Sequence[str], source: str, *, flat_varied: bool = False, compared: str = ""
) -> None:
    """Refuse GPU types without a price, and one explicit price across compared types.

    Parameters
    ----------
    cost : CostSection
        The scenario's ``[cost]`` table (only the ``rental`` model is checked: ``owned``
        takes its capital cost from ``gpu_capex_usd``).
    gpu_types : sequence of str
        The GPU types the scenario or plan prices (distinct catalog names).
    source : str
        The file, for the error message.
    flat_varied : bool
        Whether ``cost.gpu_hour_usd`` is swept or uncertain (so set, though not in the table).
    compared : str
        What compares the types (``search.gpu_types``, ``the sweep over hardware.gpu``), for
        the message; empty when only one type is priced.

    Raises
    ------
    ScenarioError
        Naming ``cost.gpu_hour_usd_by_type`` (a type without a price) or ``cost.gpu_hour_usd``.
    """
    if cost.model != "rental":
        return
    named = dict(cost.gpu_hour_usd_by_type)
    flat = cost.gpu_hour_usd is not None or flat_varied
    for gpu in gpu_types:
        if gpu not in named and not flat and catalog_price(gpu, cost.price) is None:
            raise ScenarioError(
                source,
                "cost.gpu_hour_usd_by_type",
                f"the catalog has no published {cost.price} price for {gpu} (docs/model.md §5); give one, e.g. "
                f"cost.gpu_hour_usd_by_type = {{ {gpu} = ... }} (USD/(GPU h))",
            )
    by_flat = [gpu for gpu in gpu_types if gpu not in named]
    if flat and len(by_flat) > 1:
        raise ScenarioError(
            source,
            "cost.gpu_hour_usd",
            f"one price for every GPU type, but {compared or 'the scenario'} compares {', '.join(by_flat)}: "
            "the cost ranking would only restate that price; remove cost.gpu_hour_usd (each type then "
            f'costs its catalog rate, cost.price = "{cost.price}") or give each type its price in '
            "cost.gpu_hour_usd_by_type",
        )
