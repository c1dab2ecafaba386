"""``simulate()`` is one straight line: the engine's stages entered in pipeline order, none returned to.

Traced in a subprocess with :func:`sys.setprofile` while ``simulate()`` runs a tiny swept scenario with
uncertain draws (draw tables). The compiled kernel is invisible to a profiler (and ``NUMBA_DISABLE_JIT``
cannot load the kernels' cache), so its entry points in :mod:`mcsim.kernels.interface` are wrapped by a
Python function that the trace sees before it calls the kernel.

Definitions
-----------
* A frame belongs to a **stage** by the module its code lives in (:data:`STAGES`: the stage's index;
  the draws are the input layer's, the preparation the model's, the rest the engine's);
  ``mcsim.engine.simulate`` (the driver that hands each stage's value to the next),
  ``mcsim.model.run_estimate`` (a pure estimate of run time), ``mcsim.engine.options`` (the
  execution options) and ``mcsim.engine.backends`` (the backend, acquired before the time check
  because its parallelism enters the estimate; it runs what stage 5 hands it) are no stage.
* A stage is **entered** when a frame of one of its modules starts (functions and methods alike; the
  trace starts after every module is imported, so a module's own top level never counts).
* A **return** to an earlier stage is a call, from a frame of a later stage's module, of a module-level
  function of an earlier stage's module (``co_qualname`` without a dot). Methods of the values one
  stage hands to the next (``Task.runs``, ``KernelInputs.simulate_rows``, the row simulators the
  backends call) act on that value and are not returns.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from builders import SMALL_SCENARIO
from child_python import run_python

ROOT = Path(__file__).resolve().parents[2]

# Stage of each module of the pipeline (path under mcsim/), in pipeline order (ARCHITECTURE.md).
STAGES = {
    "scenario/draws": 1,
    "model/preparation": 2,
    "engine/tasks": 3,
    "engine/optimize": 4,
    "engine/execution": 5,
    "engine/threads": 5,
    "engine/resume": 5,
    "engine/outputs": 6,
    "model/run_outputs": 6,
    "engine/dataset": 7,
}
REQUIRED = {1, 2, 3, 5, 6, 7}  # no interval is optimised here: stage 4 is skipped

_TRACER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import mcsim
import importlib

STAGES = json.loads(sys.argv[1])
for module in STAGES:  # every stage's module imported before the trace
    importlib.import_module("mcsim." + module.replace("/", "."))
from mcsim.scenario.config import scenario_from_dict

scenario = scenario_from_dict(json.loads(sys.argv[2]))
package = mcsim.__path__[0] + "/"
first, returns, kernel, derived = [], [], [], []
KERNEL_FILE = "<mcsim kernel entry point>"
for name in ("simulate_runs", "simulate_runs_table"):
    namespace = {"compiled": getattr(mcsim.kernels.interface, name)}
    exec(compile(f"def {name}(*args):\n    return compiled(*args)\n", KERNEL_FILE, "exec"), namespace)
    namespace[name].signatures = namespace["compiled"].signatures  # what kernels.interface.compiled asks
    setattr(mcsim.kernels.interface, name, namespace[name])


def stage_of(code):
    name = code.co_filename
    if name.startswith(package):
        return STAGES.get(name[len(package):-3])
    return None


def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if code.co_filename == KERNEL_FILE:
        if not kernel:
            kernel.append(len(first))  # how many stages were entered before the kernel
        return
    stage = stage_of(code)
    if stage is None:
        return
    if code.co_name in ("run_outputs", "account_runs_into") and not derived:
        derived.append(bool(kernel))  # whether the kernel had run when the first outputs were derived
    if stage not in first:
        first.append(stage)
    caller = stage_of(frame.f_back.f_code) if frame.f_back is not None else None
    if caller is not None and caller > stage and "." not in code.co_qualname and code.co_name != "<module>":
        returns.append(f"{frame.f_back.f_code.co_qualname} (stage {caller}) -> {code.co_qualname} (stage {stage})")


sys.setprofile(profile)

ds = mcsim.simulate(scenario, progress=False, chunk_runs=3)
sys.setprofile(None)
print(json.dumps({"first": first, "returns": sorted(set(returns)), "kernel": kernel, "derived": derived,
                  "draws": int(ds.sizes.get("draw", 0)), "feasible": bool(ds["feasible"].all())}))
"""


def _tiny_scenario() -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["model"]["tokens"] = 2e7  # 19 iterations
    raw["run"].update(runs=4, draws=2, mode="fast", design="lhs")
    raw["sweep"] = {"checkpoint.strategy": ["sync", "async"]}
    raw["uncertain"] = {
        "compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6},
        "failures.gpu.mtbf_hours": {"dist": "uniform", "low": 1.0, "high": 4.0},  # failures in 4 runs
    }
    return raw


def _trace() -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = run_python(_TRACER, json.dumps(STAGES), json.dumps(_tiny_scenario()), env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_simulate_enters_the_stages_in_pipeline_order_and_never_returns():
    trace = _trace()
    assert trace["draws"] == 2 and trace["feasible"]  # a swept scenario with draws, every run simulated
    first = trace["first"]
    assert REQUIRED <= set(first), f"stages entered {first}, expected at least {sorted(REQUIRED)}"
    assert first == sorted(first), f"stages first entered in the order {first}"
    assert trace["returns"] == [], "calls back into an earlier stage:\n" + "\n".join(trace["returns"])
    # The kernel itself ran, after the execution stage was entered and before the outputs were derived
    # (stage 6's arrays are allocated before the runs and filled as each configuration completes).
    assert trace["kernel"], "the kernel was never entered"
    assert 5 in first[: trace["kernel"][0]], (first, trace["kernel"])
    assert trace["derived"] == [True], "outputs derived before the kernel ran"
