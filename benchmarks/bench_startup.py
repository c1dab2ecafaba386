"""Start-up of mcsim as a user meets it: the import, the first run (compiling), the warm process.

``.venv/bin/python benchmarks/bench_startup.py [--runs N] [--rounds N] [--against COMMIT|DIR|none] [--json]``

Every figure is the CPU time (user + system, every thread) of a child process, the median of
``--rounds`` (the machine is shared: CPU time moves less than wall time with the load), measured from
this source tree and from the tree of ``--against`` (default ``5a92b87``, the code before issue 44;
a commit is extracted once with ``git archive``, see ``bench_capacity.py``), the trees alternating:

* ``import mcsim``, ``mcsim --help``: against ``python -c "import xarray"`` in the same rounds (ratios);
* ``cold``: ``mcsim run`` of the reference scenario (``--runs``, default 1,000) with an empty
  ``NUMBA_CACHE_DIR``: every kernel compiled; ``compile``: per kernel entry point and compiled
  specialisation, the CPU seconds of its compilation (Numba's ``numba:compile`` events, each one
  including the helpers compiled inside it), in a separate cold process of 20 runs (this tree only);
* ``warm``: the same run with that cache, against ``python -c "import xarray, numba"`` (a ratio) and against
  the ``stack floor`` (:data:`_STACK_FLOOR`): a process that does only what any warm run on this stack must do,
  with nothing of mcsim: import xarray and Numba, call one kernel loaded from Numba's cache (the first call
  loads Numba's CPU target, whose registries import ``scipy.linalg`` for the BLAS check), build a Dataset of
  61 variables of ``--runs`` values (the run file's count; xarray imports ``dask.array`` to look for chunked
  arrays) and write it with netCDF4.

``--json`` prints the results as one JSON line at the end (``benchmarks/run.py`` reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capacity import REPOSITORY, source_tree  # noqa: E402

BEFORE = "5a92b87"

# A cold first simulation of the reference scenario (20 runs) that records each compilation's CPU seconds.
_COMPILE_EVENTS = """
import json, sys, time
from numba.core import event
import mcsim

class Compiles(event.Listener):
    def __init__(self):
        self.started, self.rows = {}, []

    def on_start(self, ev):  # the start and end events of a compilation are two objects: keyed by what is compiled
        self.started[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.process_time()

    def on_end(self, ev):
        key = id(ev.data["dispatcher"]), str(ev.data["args"])
        seconds = time.process_time() - self.started.pop(key, time.process_time())
        self.rows.append((ev.data["dispatcher"].py_func.__qualname__, str(ev.data["args"]), seconds))

listener = Compiles()
event.register("numba:compile", listener)
mcsim.simulate(mcsim.load_scenario(overrides=["run.runs=20"]), progress=False)
print(json.dumps(listener.rows))
"""
ENTRY_POINTS = ("simulate_runs", "simulate_runs_table", "account_runs")

# What every warm run on this stack does, without mcsim (a file: Numba caches only functions defined in one).
_STACK_FLOOR = """
import sys
import numba
import numpy as np
import xarray as xr

@numba.njit(cache=True, nogil=True)
def column_sums(values):
    total = np.zeros(values.shape[1])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            total[j] += values[i, j]
    return total

values = np.random.default_rng(0).random((int(sys.argv[1]), 61))
column_sums(values)
xr.Dataset({f"v{j}": (("run",), values[:, j], {"units": "s"}) for j in range(61)}).to_netcdf("floor.nc")
"""


def _cpu(cmd: list[str], tree: Path, cache: str, cwd: str) -> tuple[float, str]:
    """CPU seconds of ``cmd`` run from ``tree`` with Numba's cache in ``cache``, and its stdout."""
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} from {tree}: exit {proc.returncode}\n{proc.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def compile_times(tree: Path, work: str) -> list[dict]:
    """Per compiled specialisation: ``function``, ``signature``, ``cpu_s`` (its helpers included), largest first."""
    with tempfile.TemporaryDirectory(dir=work) as cache:
        _, out = _cpu([sys.executable, "-c", _COMPILE_EVENTS], tree, cache, work)
    rows = [dict(function=f, signature=s, cpu_s=c) for f, s, c in json.loads(out.splitlines()[-1])]
    return sorted(rows, key=lambda row: -row["cpu_s"])


def import_profile(tree: Path, work: str, top: int = 8) -> list[tuple[str, float]]:
    """The modules imported directly by ``import mcsim`` (and its modules') that took longest, with their cumulative
    seconds (``python -X importtime``), largest first."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mcsim"], cwd=work, env=env, capture_output=True, text=True
    )
    rows = []
    for line in proc.stderr.splitlines()[1:]:
        fields = line.split("|")
        if len(fields) == 3 and fields[1].strip().isdigit():
            name = fields[2].rstrip()
            rows.append((name.strip(), int(fields[1]) / 1e6, len(name) - len(name.lstrip())))
    outside = [(name, seconds) for name, seconds, depth in rows if not name.startswith("mcsim") and depth <= 5]
    return sorted(outside, key=lambda row: -row[1])[:top]


def measure(trees: dict[str, Path], runs: int, rounds: int, compile_events: bool = True) -> dict:
    """Every figure of the module docstring, per tree (medians of ``rounds``), and the references; without
    ``compile_events`` no compile time per entry point (a second cold process: ``benchmarks/run.py --quick``)."""
    py = sys.executable
    with tempfile.TemporaryDirectory() as work:
        run = [py, "-m", "mcsim", "run", "--runs", str(runs), "--quiet", "--no-resume", "-o", "r.nc"]
        cases = {
            "import mcsim": [py, "-c", "import mcsim"],
            "mcsim --help": [py, "-m", "mcsim", "--help"],
            "warm": run,
        }
        floor = Path(work) / "stack_floor.py"
        floor.write_text(_STACK_FLOOR)
        references = {
            "import xarray": [py, "-c", "import xarray"],
            "import xarray, numba": [py, "-c", "import xarray, numba"],
            "stack floor": [py, str(floor), str(runs)],
        }
        caches = {label: str(Path(work) / f"cache-{i}") for i, label in enumerate(trees)}
        _cpu(references["stack floor"], REPOSITORY, caches[next(iter(trees))], work)  # its kernel compiled and cached
        results: dict = {label: {"cold": _cpu(run, tree, caches[label], work)[0]} for label, tree in trees.items()}
        samples: dict = {label: {case: [] for case in cases} for label in trees}
        reference_samples: dict = {case: [] for case in references}
        for r in range(rounds):
            for label, tree in list(trees.items())[:: 1 if r % 2 == 0 else -1]:
                for case, cmd in cases.items():
                    samples[label][case].append(_cpu(cmd, tree, caches[label], work)[0])
            for case, cmd in references.items():
                reference_samples[case].append(_cpu(cmd, REPOSITORY, caches[next(iter(trees))], work)[0])
        reference = {case: statistics.median(s) for case, s in reference_samples.items()}
        for label in trees:
            results[label].update({case: statistics.median(s) for case, s in samples[label].items()})
        # This tree's only: a cold process more.
        results[next(iter(trees))]["compile"] = compile_times(REPOSITORY, work) if compile_events else []
        for label, tree in trees.items():
            results[label]["import profile"] = import_profile(tree, work)
    return dict(
        runs=runs,
        rounds=rounds,
        references=reference,
        trees=results,
        machine=dict(
            platform=platform.platform(), processor=platform.processor() or platform.machine(), cpus=os.cpu_count()
        ),
    )


def ratios(tree: dict, references: dict) -> dict[str, float]:
    """The issue's ratios of one tree's figures: imports against xarray's, the warm run against xarray's and Numba's."""
    return {
        "import mcsim / import xarray": tree["import mcsim"] / references["import xarray"],
        "mcsim --help / import xarray": tree["mcsim --help"] / references["import xarray"],
        "warm run / import xarray, numba": tree["warm"] / references["import xarray, numba"],
        "warm run / stack floor": tree["warm"] / references["stack floor"],
        "stack floor / import xarray, numba": references["stack floor"] / references["import xarray, numba"],
    }


def report_lines(results: dict) -> list[str]:
    """The results as text: per tree, its CPU seconds, ratios and the compile time of the entry points."""
    ref = results["references"]
    lines = [
        f"machine: {results['machine']['processor']}, {results['machine']['cpus']} CPUs; CPU seconds (user + system), "
        f"medians of {results['rounds']}; import xarray {ref['import xarray']:.2f} s, "
        f"import xarray, numba {ref['import xarray, numba']:.2f} s, stack floor {ref['stack floor']:.2f} s"
    ]
    for label, tree in results["trees"].items():
        lines.append(
            f"{label:22s} cold run {tree['cold']:.1f} s; warm run ({results['runs']} runs) {tree['warm']:.2f} s; "
            f"import mcsim {tree['import mcsim']:.2f} s; mcsim --help {tree['mcsim --help']:.2f} s"
        )
        lines.append("    " + "; ".join(f"{k} = {v:.2f}" for k, v in ratios(tree, ref).items()))
        profile = tree.get("import profile", [])
        lines.append(
            "    import mcsim, slowest imports (-X importtime, wall): "
            + ", ".join(f"{n} {t:.2f} s" for n, t in profile)
        )
        entries = [row for row in tree.get("compile", []) if row["function"] in ENTRY_POINTS]
        for row in entries + [row for row in tree.get("compile", []) if row not in entries][:3]:
            lines.append(f"    compile {row['cpu_s']:6.2f} s  {row['function']} {row['signature'][:90]}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the warm cases (default 3)")
    parser.add_argument("--against", default=BEFORE, help=f"baseline commit or folder (default {BEFORE}); 'none'")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line at the end")
    args = parser.parse_args()
    trees = {"this tree": REPOSITORY}
    if args.against != "none":
        trees[f"baseline {args.against}"] = source_tree(args.against)
    results = measure(trees, args.runs, args.rounds)
    print("\n".join(report_lines(results)), flush=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
