"""The kernels run as plain Python (``NUMBA_DISABLE_JIT=1``) give the compiled kernels' rows, bit for bit.

CI runs the tests marked ``plain_python`` a second time with Numba's JIT disabled (.ci/run, "kernels as
plain Python"), so that coverage sees the kernels' bodies, which it cannot see in machine code. That run
is only worth its coverage if the plain-Python kernels are the compiled program: the same arithmetic
(``uint64`` streams that wrap, floats in the same order), the same branches. The test here checks it on
the twins' grids (tests/twin_cases.py, exact mode and the fast phase cases; tests/twin_fast_cases.py, fast
mode), two runs each, and a draw table: it runs them in this process and in a child process with the JIT
the other way round, and compares every output bit. In the plain-Python process the workspace's first
heaps are tiny, so that runs outgrow them and run again in grown arrays, which must not change a bit
either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
from builders import failure_classes
from twin_cases import CASES, PHASE_CASES, case_params, phase_table
from twin_fast_cases import FAST_CASES, fast_case_params

from mcsim.kernels import interface as mc
from mcsim.kernels import workspace

pytestmark = pytest.mark.plain_python

RUNS = 2  # per case: the plain-Python kernels are about 1000 times slower than the compiled ones
HERE = Path(__file__).resolve().parent
TESTS = HERE.parent


def _table_rows() -> np.ndarray:
    """One run per row of a draw table (simulate_runs_table): two parameter sets, exact and fast."""
    case = next(c for c in PHASE_CASES if c.name == "in_memory-phases-degradation-kinds")
    fc = failure_classes(case.classes)
    table = mc.params_table([case_params(case, False), case_params(case, True)])
    classes = mc.classes_table([fc, fc])
    phases = mc.phases_table([phase_table(case), phase_table(case)])
    row_param = np.array([0, 1, 1, 0], dtype=np.int64)
    row_stream_run = np.array([0, 0, 1, 1], dtype=np.int64)
    out = np.zeros((4, mc.N_OUT))
    mc.simulate_runs_table(table, classes, phases, row_param, row_stream_run, 31, out)
    return out


def kernel_rows() -> np.ndarray:
    """The kernels' rows of every case (in this process's mode), one after the other."""
    grids = [(case_params(c, False), c, 1000 + CASES.index(c)) for c in CASES]
    grids += [(case_params(c, True), c, 1000 + CASES.index(c)) for c in PHASE_CASES]
    grids += [(fast_case_params(c), c, 2000 + FAST_CASES.index(c)) for c in FAST_CASES]
    sizes = (workspace.FAILURE_HEAP_MAX, workspace.REPAIR_HEAP_START)
    if numba.config.DISABLE_JIT:  # plain Python reads them at each call: runs outgrow them
        workspace.FAILURE_HEAP_MAX, workspace.REPAIR_HEAP_START = 2, 1
    try:
        rows = []
        for params, case, seed in grids:
            out = np.zeros((RUNS, mc.N_OUT))
            table = mc.no_phases() if not case.phases else phase_table(case)
            mc.simulate_runs(params, failure_classes(case.classes), table, seed, 0, out)
            rows.append(out)
        rows.append(_table_rows())
    finally:
        workspace.FAILURE_HEAP_MAX, workspace.REPAIR_HEAP_START = sizes
    return np.concatenate(rows)


def _other_mode_rows(tmp_path: Path) -> np.ndarray:
    """:func:`kernel_rows` in a child process with the JIT disabled if it is enabled here, and enabled if
    it is disabled."""
    path = tmp_path / "rows.npy"
    script = (
        f"import sys; sys.path[:0] = [{str(HERE)!r}, {str(TESTS)!r}]; import numpy as np, test_plain_python as t; "
        "np.save(sys.argv[1], t.kernel_rows())"
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="0" if numba.config.DISABLE_JIT else "1")
    env.pop("COV_CORE_SOURCE", None)  # pytest-cov's child-process measurement: this child is not measured
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env, cwd=tmp_path)
    return np.load(path)


def test_plain_python_kernels_give_the_compiled_rows(tmp_path):
    here = kernel_rows()
    other = _other_mode_rows(tmp_path)
    assert here.shape == other.shape == (RUNS * (len(CASES) + len(PHASE_CASES) + len(FAST_CASES)) + 4, mc.N_OUT)
    differs = here.view(np.uint64) != other.view(np.uint64)  # every bit, NaN and the sign of zero included
    rows, columns = np.nonzero(differs)
    assert not differs.any(), f"rows {rows[:5]} columns {columns[:5]}: {here[differs][:5]} != {other[differs][:5]}"
    assert here[:, mc.OUT_FAILURES].sum() > 0 and (here[:, mc.OUT_COMPLETED] == 0.0).any()


def test_entry_points_need_no_compiling_as_plain_python():
    if not numba.config.DISABLE_JIT:
        pytest.skip("the kernels are compiled here")
    assert mc.compiled() is True and mc.compiled(table=True) is True
