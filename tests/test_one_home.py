"""One definition of each shared concept: the sweep dimensions of a result and the display formatter."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from mcsim.io.variables import SAMPLE_DIMS, sweep_dims

PACKAGE = Path(__file__).resolve().parents[1] / "mcsim"


def _result(dims: tuple[str, ...]) -> xr.Dataset:
    shape = tuple(range(2, 2 + len(dims)))
    coords = {d: np.arange(n) for d, n in zip(dims, shape, strict=True)}
    return xr.Dataset({"wall_time": (dims, np.zeros(shape))}, coords=coords)


@pytest.mark.parametrize(
    ("dims", "expected"),
    [
        (("run",), []),
        (("gpus", "run"), ["gpus"]),
        (("gpus", "checkpoint.strategy", "run"), ["gpus", "checkpoint.strategy"]),
        (("gpus", "draw", "run"), ["gpus"]),  # draw is a sample, pooled with run
        (("draw", "run"), []),
    ],
)
def test_sweep_dims_are_the_configuration_dims(dims, expected):
    assert sweep_dims(_result(dims)) == expected


def test_sweep_dims_refuses_a_dataset_without_runs():
    with pytest.raises(ValueError, match="wall_time"):
        sweep_dims(xr.Dataset({"wall_time": (("gpus",), np.zeros(2))}))
    assert SAMPLE_DIMS == ("draw", "run")


@functools.cache
def _function_names() -> tuple[tuple[str, str], ...]:
    """(module path under mcsim/, function name) of every function mcsim defines."""
    return tuple(
        (str(path.relative_to(PACKAGE)), node.name)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef)
    )


def _private_copies(name: str) -> list[str]:
    """Modules of mcsim that define a function called ``name`` or ``_name``."""
    return [path for path, function in _function_names() if function.lstrip("_") == name]


def test_sweep_dims_has_one_definition():
    """A second copy (which could treat ``draw`` differently) fails here."""
    assert _private_copies("sweep_dims") == ["io/variables.py"]


# ----------------------------------------------------------------------------- display formatting


def test_format_significant_keeps_trailing_zeros_and_groups_thousands():
    from mcsim.io.format import format_significant

    assert format_significant(1.2) == "1.20"
    assert format_significant(16) == "16.0"
    assert format_significant(168.4) == "168"
    assert format_significant(0.0012345) == "0.00123"
    assert format_significant(12345.6) == "12,346"
    assert format_significant(1234.6, 4) == "1235"
    assert format_significant(-2.0) == "-2.00"


def test_format_compact_switches_to_exponent_form_at_1e5():
    from mcsim.io.format import format_compact

    assert format_compact(0.123456) == "0.123"
    assert format_compact(99999.0, 4) == "1e+05"
    assert format_compact(123456.0) == "1.235e+05"
    assert format_compact(123456.0, 4, 4) == "1.2346e+05"
    assert format_compact(float("nan")) == "nan"
    assert format_compact(float("inf"), 4) == "nan"


def test_money_durations_sizes_and_coordinates():
    from mcsim.io.format import format_bytes, format_coordinate, format_duration, format_money, format_usd

    assert format_money(1_234_567.0) == "1.23 MUSD"
    assert format_money(2.5, "t") == "2.50 t"
    assert format_money(3.0, "") == "3.00"
    assert format_usd(1234.4) == "1,234 USD"
    assert format_usd(2_345_678.0) == "2.346 MUSD"
    assert format_usd(-150_000.0) == "-0.150 MUSD"
    assert format_duration(90.0) == "90 s"
    assert format_duration(150.0) == "2.5 min"
    assert format_duration(3 * 86400.0) == "3 days"
    assert format_duration(float("inf")) == "forever"
    assert format_bytes(999.0) == "999 B"
    assert format_bytes(12_345_678_901.0) == "12.3 GB"
    assert format_coordinate(np.float64(1.0000000000010)) == "1"
    assert format_coordinate(np.int64(64)) == "64"
    assert format_coordinate("async") == "async"


@pytest.mark.parametrize(
    "name",
    ["fmt", "sig", "money", "fmt_value", "format_coordinate", "format_duration", "format_bytes", "format_money"],
)
def test_each_display_formatter_has_one_definition(name):
    assert _private_copies(name) in ([], ["io/format.py"])
