"""Runs per CPU-second of the run loop on the reference's four regimes, one thread, best of 5.

``.venv/bin/python benchmarks/bench_rates.py``

Fast mode at 16,384 GPUs (sync and async checkpoints), fast mode at 1,024 GPUs and exact mode at
16,384 GPUs, each the mean of its best of five timed calls. To compare two versions of the kernel,
run it in a checkout of each, back to back on the same machine (``git worktree add /tmp/before REV``,
then ``PYTHONPATH=/tmp/before python /tmp/before/benchmarks/bench_rates.py`` if the older tree lacks
this script, copy it there): the figures in docs/model.md §4 of the run loop without reference counting
and of fast mode's short blocks were taken that way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernel import SMALL_CLUSTER, _params, _rate  # noqa: E402

from mcsim.kernels import interface as mc  # noqa: E402

CASES = (
    ("fast, 16,384 GPUs, sync", ["checkpoint.strategy=sync"], "fast", 600),
    ("fast, 16,384 GPUs, async", [], "fast", 600),
    ("fast, 1,024 GPUs", SMALL_CLUSTER, "fast", 200),
    ("exact, 16,384 GPUs, async", [], "exact", 4),
)


def main() -> None:
    numba.set_num_threads(1)
    for name, overrides, mode, runs in CASES:
        params, classes, _ = _params(overrides, mode)
        best = max(_rate(mc, params, classes, runs)[0] for _ in range(5))
        print(f"{name:28s} {best:10.4g} runs per CPU-second")


if __name__ == "__main__":
    main()
