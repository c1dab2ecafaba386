"""Start-up of ``mcsim run`` as a whole process, cold and warm, against an older commit.

``.venv/bin/python benchmarks/bench_startup.py [--runs N] [--rounds N] [--against COMMIT|DIR]``

The command timed is ``python -m mcsim.cli run --runs N --quiet --no-resume -o OUT.nc``
on the shipped reference scenario (default 1,000 runs), run from this source tree
and from the tree of ``--against`` (default ``23de031``, the code before this
start-up work; a commit is extracted once with ``git archive``, see
``bench_capacity.py``). Reported per tree, as wall time and CPU time of the child
process (user + system, every thread):

* ``cold``: an empty ``NUMBA_CACHE_DIR``, so every kernel is compiled (once per tree);
* ``warm``: the same cache folder again, ``--rounds`` times, the trees alternating;
* ``import``: ``python -c "import mcsim.cli.main"`` alone (warm).

The machine is shared: compare the two trees' figures from the same run, and read
CPU time rather than wall time when the load is high.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capacity import REPOSITORY, source_tree  # noqa: E402

BEFORE = "23de031"


def _timed(cmd: list[str], tree: Path, cache: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd`` run from ``tree`` with Numba's cache in ``cache``."""
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} in {tree}: exit {proc.returncode}\n{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="warm runs and imports per tree (default 3)")
    parser.add_argument("--against", default=BEFORE, help=f"baseline commit or folder (default {BEFORE}); 'none'")
    args = parser.parse_args()
    trees = {"this tree": REPOSITORY}
    if args.against != "none":
        trees[f"baseline {args.against}"] = source_tree(args.against)
    with tempfile.TemporaryDirectory() as work:
        out = str(Path(work) / "r.nc")
        run = [
            sys.executable,
            "-m",
            "mcsim.cli.main",
            "run",
            "--runs",
            str(args.runs),
            "--quiet",
            "--no-resume",
            "-o",
            out,
        ]
        imp = [sys.executable, "-c", "import mcsim.cli.main"]
        caches = {label: str(Path(work) / f"cache-{i}") for i, label in enumerate(trees)}
        results: dict[str, dict[str, list[tuple[float, float]]]] = {label: {} for label in trees}
        for label, tree in trees.items():
            results[label]["cold"] = [_timed(run, tree, caches[label])]
            print(
                f"{label:22s} cold: {results[label]['cold'][0][0]:6.1f} s wall, "
                f"{results[label]['cold'][0][1]:6.1f} s CPU",
                flush=True,
            )
        for r in range(args.rounds):
            for label, tree in list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]:
                for case, cmd in (("warm", run), ("import", imp)):
                    results[label].setdefault(case, []).append(_timed(cmd, tree, caches[label]))
    for label, cases in results.items():
        line = [f"{label:22s}"]
        for case, times in cases.items():
            wall = statistics.median(t[0] for t in times)
            cpu = statistics.median(t[1] for t in times)
            line.append(f"{case} {wall:.2f} s wall / {cpu:.2f} s CPU")
        print("; ".join(line) + (" (medians)" if args.rounds > 1 else ""))
    if len(trees) == 2:
        new, old = (results[label] for label in trees)
        for case in ("cold", "warm", "import"):
            ratio_wall = statistics.median(t[0] for t in old[case]) / statistics.median(t[0] for t in new[case])
            ratio_cpu = statistics.median(t[1] for t in old[case]) / statistics.median(t[1] for t in new[case])
            print(f"{case}: baseline / this tree = {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU")


if __name__ == "__main__":
    main()
