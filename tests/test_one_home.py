"""One definition of each shared concept: the sweep dimensions of a result and the display formatter."""

from __future__ import annotations

import ast
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


def _private_copies(name: str) -> list[str]:
    """Modules of mcsim that define a function called ``name`` (or ``_name``) other than io/variables.py."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == name:
                found.append(str(path.relative_to(PACKAGE)))
    return found


def test_sweep_dims_has_one_definition():
    """A second copy (which could treat ``draw`` differently) fails here."""
    assert _private_copies("sweep_dims") == ["io/variables.py"]
