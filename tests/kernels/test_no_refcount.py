"""The run loop holds no reference-counted value (the counting was most of fast mode's time): its
machine code calls none of Numba's NRT functions, so a later change that brings reference counting
back fails here."""

from __future__ import annotations

import numba
import numpy as np
from builders import failure_classes, kernel_params

from mcsim.kernels import interface as mc
from mcsim.kernels import montecarlo, workspace
from mcsim.kernels.accelerate import _COMMON, _UNMANAGED


def _llvm_of(run_loop, params, classes, phases) -> str:
    """The LLVM IR of ``run_loop`` compiled afresh (the cached kernels cannot be inspected) for the
    argument types of a real call, with everything it calls linked in."""
    args = (
        params,
        classes,
        phases,
        1,
        0,
        np.zeros(mc.N_OUT),
        workspace.allocate_workspace.py_func(classes.units, phases.size),
    )
    signature = tuple(numba.typeof(a) for a in args)
    run_loop.compile(signature)
    return run_loop.overloads[signature].library.get_llvm_str()


def test_run_loop_calls_no_reference_counting():
    params = kernel_params(fast=True, spare_nodes=2)
    classes = failure_classes([(64, 0.8, 1e6, 60.0, 1, 1, 3600.0)])
    phases = np.array([[0.0, 0.9, 0.1], [500.0, 1.2, 0.1]])
    fresh = numba.jit(**_UNMANAGED)(montecarlo._simulate_run.py_func)
    assert montecarlo._simulate_run.targetoptions.get("_nrt") is False
    llvm = _llvm_of(fresh, params, classes, phases)
    assert "NRT_" not in llvm
    # The count can fail: a kernel compiled with reference counting (the package's common options) that holds
    # an array calls NRT. (The whole loop compiled so calls it hundreds of times; compiling it a second time
    # took 85 s of the suite's CPU, so a small kernel stands in.)
    assert "NRT_" in _llvm_of_small(numba.jit(**_COMMON)(_holds_an_array))


def _holds_an_array(n):
    values = np.zeros(n)
    return values.sum()


def _llvm_of_small(kernel) -> str:
    signature = (numba.int64,)
    kernel.compile(signature)
    return kernel.overloads[signature].library.get_llvm_str()
