"""Python run in a child process for the tests (not a test module): a snippet under a fresh interpreter, and
the simulator's outputs of a scenario under a given number of Numba threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_python(code: str, *args: str, python: str = sys.executable, **options) -> subprocess.CompletedProcess:
    """``python -c code args...``, its stdout and stderr captured as text; ``options`` go to subprocess.run
    (env, cwd, timeout, check)."""
    return subprocess.run([python, "-c", code, *args], capture_output=True, text=True, **options)


# A scenario (JSON, the first argument) simulated in exact and in fast mode, 300 runs on seed 7: the number of
# Numba threads, then the outputs' bytes in hex.
_THREAD_SCRIPT = """
import json, sys, numpy as np, numba
from mcsim.scenario.config import scenario_from_dict
from mcsim.engine.simulate import simulate_config
raw = json.loads(sys.argv[1])
cfg = scenario_from_dict(raw).base
out = np.vstack([simulate_config(cfg, 300, 7, mode)[0] for mode in ("exact", "fast")])
sys.stdout.write(str(numba.get_num_threads()) + " " + out.tobytes().hex())
"""


def outputs_by_thread_count(raw: dict, cwd: Path, counts: tuple[str, ...] = ("1", "2")) -> dict[str, str]:
    """The outputs (their bytes in hex) of scenario ``raw``, exact and fast mode, simulated in a child process
    with each of ``counts`` Numba threads (NUMBA_NUM_THREADS); checks that each child ran with that many."""
    results = {}
    for threads in counts:
        env = dict(os.environ, NUMBA_NUM_THREADS=threads)
        proc = run_python(_THREAD_SCRIPT, json.dumps(raw), env=env, check=True, cwd=cwd)
        n, data = proc.stdout.split()
        assert n == threads
        results[threads] = data
    return results
