"""Speed of the Pareto front: ``.venv/bin/python benchmarks/bench_pareto.py [--n 10000]``.

Times :func:`mcsim.pareto_front` on a synthetic result set of N configurations x 20
runs (two objectives: wall time and cost; three: and energy), and the naive
all-pairs reference of the test suite (``tests/naive.py``) at a tenth of the size for
comparison. Objectives are drawn so that a realistic share of configurations is on
the front: time falls with size while cost grows, plus noise. Prints one line per case.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.analysis.ranking import pareto_front

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from naive import pareto_front_naive  # noqa: E402


def synthetic(n: int, runs: int = 20, seed: int = 0) -> xr.Dataset:
    """N configurations along a ``config`` dimension with wall time, cost and energy per run."""
    rng = np.random.default_rng(seed)
    size = rng.uniform(1, 100, n)
    wall = 100 / size * rng.lognormal(0, 0.3, n)
    cost = size * rng.lognormal(0, 0.3, n)
    energy = cost * rng.lognormal(0, 0.2, n)
    noise = rng.lognormal(0, 0.05, (n, runs))
    data = {
        name: (("config", "run"), base[:, None] * noise)
        for name, base in (("wall_time", wall), ("cost", cost), ("energy", energy))
    }
    ds = xr.Dataset(data, coords={"config": np.arange(n), "run": np.arange(runs)})
    ds["feasible"] = ("config", np.ones(n, bool))
    ds["completed"] = (("config", "run"), np.ones((n, runs), bool))
    return ds


def _time(function, repeat: int = 3) -> float:
    function()  # warm up
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="configurations (default 10,000)")
    args = parser.parse_args()
    ds = synthetic(args.n)
    for objectives in (("wall_time", "cost"), ("wall_time", "cost", "energy")):
        seconds = _time(lambda objectives=objectives: pareto_front(ds, objectives))  # bound now, not at call
        size = int(pareto_front(ds, objectives).sum())
        print(
            f"pareto_front {len(objectives)} objectives, {args.n:,} configurations: {seconds:.4f} s "
            f"({size} on the front)"
        )
    small = args.n // 10
    values = np.stack([ds[name].mean("run").values[:small] for name in ("wall_time", "cost", "energy")], axis=1)
    seconds = _time(lambda: pareto_front_naive(values), repeat=1)
    print(f"naive all-pairs reference, 3 objectives, {small:,} configurations: {seconds:.3f} s")


if __name__ == "__main__":
    main()
