"""The run loop holds no reference-counted value (the counting was most of fast mode's time): its
machine code calls none of Numba's NRT functions, so a later change that brings reference counting
back fails here."""

from __future__ import annotations

import numba
import numpy as np
from builders import failure_classes, kernel_params

from mcsim.kernels import interface as mc
from mcsim.kernels import montecarlo, workspace
from mcsim.kernels.accelerate import _COMMON


def _linked_llvm(kernel, signature: tuple) -> str:
    """The LLVM IR of ``kernel`` compiled for ``signature``, with everything it calls linked in.

    It is the module Numba keeps beside the machine code to link into callers (``_get_module_for_linking``,
    private to Numba's code libraries), which a process that loaded the kernel from the cache holds too:
    ``get_llvm_str`` is disabled for cached code, and compiling the run loop afresh took a minute or more
    of the suite's CPU. The machine code was generated from this module."""
    kernel.compile(signature)
    return str(kernel.overloads[signature].library._get_module_for_linking())


def _arguments(params, classes, phases, out: np.ndarray) -> tuple:
    return (params, classes, phases, 1, 0, out)


def test_run_loop_calls_no_reference_counting():
    params = kernel_params(fast=True, spare_nodes=2)
    classes = failure_classes([(64, 0.8, 1e6, 60.0, 1, 1, 3600.0)])
    phases = np.array([[0.0, 0.9, 0.1], [500.0, 1.2, 0.1]])
    ws = workspace.allocate_workspace.py_func(classes.units, phases.size)
    run_loop = (*_arguments(params, classes, phases, np.zeros(mc.N_OUT)), ws)
    assert montecarlo._simulate_run.targetoptions.get("_nrt") is False
    assert "NRT_" not in _linked_llvm(montecarlo._simulate_run, tuple(numba.typeof(a) for a in run_loop))
    # The check can fail: the entry point that calls the loop is compiled with reference counting (it
    # allocates the workspace), and its module, read the same way, calls NRT.
    entry = _arguments(params, classes, phases, np.zeros((2, mc.N_OUT)))
    assert "NRT_" in _linked_llvm(montecarlo.simulate_runs, tuple(numba.typeof(a) for a in entry))
    # ... as does a small kernel compiled afresh with the package's common options that holds an array.
    assert "NRT_" in _linked_llvm(numba.jit(**_COMMON)(_holds_an_array), (numba.int64,))


def _holds_an_array(n):
    values = np.zeros(n)
    return values.sum()
