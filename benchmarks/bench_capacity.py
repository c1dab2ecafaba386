"""The capacity-planning sweep (64 configurations x 1,000 runs), local, warm, against an older commit.

``.venv/bin/python benchmarks/bench_capacity.py [--runs N] [--rounds N] [--against COMMIT|DIR]``

Two worker processes run the same command, ``mcsim.simulate`` of
``scenarios/capacity-planning.toml`` with the local backend and no progress bar:
one imports mcsim from this source tree, the other from the tree of ``--against``
(default ``a7da51b``, the code before the run loop and the sweep were made faster; a commit is extracted once with
``git archive`` into ``benchmarks/results/tree-COMMIT``, untracked, where its
compiled kernels are cached too). Each worker first simulates 2 runs of every
configuration (compiling its kernels or loading them from its cache: the
``warm-up`` figure, never timed with the sweep), then waits; the parent asks them
in turn for one sweep each, ``--rounds`` times, alternating which goes first, so
both see the same machine load. Reported: the best and the median wall time and
CPU time (all threads of the worker) of each, their ratios, and the simulated
GPU-hours of both (the same work: equal when both trees simulate the same model).
``--against none`` times this tree alone.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent
PRE_ISSUE_12 = "a7da51b"

# Run in the worker with the tree to time as its working directory (first on sys.path).
_WORKER = r"""
import json, sys, time
import numba
import mcsim
path = mcsim.reference_scenario_path().parent / "capacity-planning.toml"
began = time.perf_counter()
mcsim.simulate(mcsim.load_scenario(path, runs=2), progress=False)
scenario = mcsim.load_scenario(path, runs=int(sys.argv[1]))
print(json.dumps(dict(warmup_s=time.perf_counter() - began, mcsim=mcsim.__file__,
                      threads=numba.get_num_threads(), configurations=len(scenario.configs))), flush=True)
for _ in sys.stdin:
    wall, cpu = time.perf_counter(), time.process_time()
    ds = mcsim.simulate(scenario, progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gpu_hours = float((ds["wall_time"] * ds["gpus"]).sum())
    print(json.dumps(dict(wall_s=wall, cpu_s=cpu, gpu_hours=gpu_hours)), flush=True)
"""


def source_tree(against: str) -> Path:
    """The folder of ``against``: itself if it is a folder, else the commit extracted once."""
    if Path(against).is_dir():
        return Path(against).resolve()
    commit = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", "--short", against], check=True, capture_output=True, text=True
    ).stdout.strip()
    tree = HERE / "results" / f"tree-{commit}"
    if not (tree / "mcsim" / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", commit], check=True, capture_output=True
        ).stdout
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
    return tree


class Worker:
    """A warm process that simulates the sweep from ``tree`` once per request."""

    def __init__(self, label: str, tree: Path, runs: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.label = label
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(runs)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.info = self._reply()
        self.times: list[dict] = []
        if not self.info["mcsim"].startswith(str(tree)):
            raise RuntimeError(f"{label}: imported {self.info['mcsim']}, not the tree {tree}")

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: the worker exited (status {self.proc.wait()})")
        return json.loads(line)

    def sweep(self) -> dict:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        result = self._reply()
        self.times.append(result)
        return result

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()

    def best(self, key: str) -> float:
        return min(t[key] for t in self.times)

    def median(self, key: str) -> float:
        return statistics.median(t[key] for t in self.times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="sweeps timed per tree (default 5)")
    parser.add_argument(
        "--against",
        default=PRE_ISSUE_12,
        help=f"commit or source folder of the baseline (default {PRE_ISSUE_12}); 'none': no baseline",
    )
    args = parser.parse_args()
    workers = [Worker("this tree", REPOSITORY, args.runs)]
    if args.against != "none":
        workers.append(Worker(f"baseline {args.against}", source_tree(args.against), args.runs))
    for w in workers:
        print(
            f"{w.label}: warm-up {w.info['warmup_s']:.1f} s, {w.info['configurations']} configurations x "
            f"{args.runs} runs, {w.info['threads']} Numba threads ({w.info['mcsim']})",
            flush=True,
        )
    try:
        for r in range(args.rounds):
            for w in workers if r % 2 == 0 else workers[::-1]:
                t = w.sweep()
                print(f"round {r + 1}: {w.label:22s} {t['wall_s']:7.2f} s wall, {t['cpu_s']:7.2f} s CPU", flush=True)
    finally:
        for w in workers:
            w.close()
    for w in workers:
        print(
            f"{w.label:22s} best {w.best('wall_s'):.2f} s wall (median {w.median('wall_s'):.2f}), "
            f"best {w.best('cpu_s'):.2f} s CPU (median {w.median('cpu_s'):.2f}); "
            f"{w.info['configurations'] * args.runs / w.best('wall_s'):,.0f} runs/s; "
            f"simulated GPU-hours {w.times[-1]['gpu_hours']:.4e}"
        )
    if len(workers) == 2:
        new, old = workers
        print(
            f"speed-up (baseline / this tree): best wall {old.best('wall_s') / new.best('wall_s'):.1f}x, "
            f"median wall {old.median('wall_s') / new.median('wall_s'):.1f}x, "
            f"best CPU {old.best('cpu_s') / new.best('cpu_s'):.1f}x"
        )


if __name__ == "__main__":
    main()
