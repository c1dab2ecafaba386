"""The renewal heap of replaced units (mcsim/kernels/renewal.py) and the run's workspace: order, a
full heap, and runs that outgrow their first arrays (the run loop allocates nothing: the entry point
grows them and runs the run again)."""

from __future__ import annotations

import naive_run
import numpy as np
import pytest
from builders import failure_classes, kernel_params

from mcsim.kernels import interface as mc
from mcsim.kernels import workspace
from mcsim.kernels.renewal import heap_pop, heap_push


@pytest.mark.plain_python
def test_heap_pops_in_time_order_and_refuses_a_push_when_full():
    # 300 pushes into arrays of capacity 4: a push into a full heap returns -1 and changes nothing;
    # the caller then copies the entries into arrays twice as long (as the kernel's entry point grows
    # its workspace) and pushes again. The pops must give the entries in increasing time with their
    # classes, as sorting them does (the independent reference).
    rng = np.random.default_rng(7)
    times = rng.permutation(300).astype(float) + rng.random(300) * 0.5  # distinct times
    classes = rng.integers(0, 5, 300)
    heap_time, heap_class, size, refused = np.empty(4), np.empty(4, np.int64), 0, 0
    for t, c in zip(times, classes, strict=False):
        pushed = heap_push(heap_time, heap_class, size, t, c)
        if pushed < 0:
            refused += 1
            heap_time = np.concatenate([heap_time, np.empty(len(heap_time))])
            heap_class = np.concatenate([heap_class, np.empty(len(heap_class), np.int64)])
            pushed = heap_push(heap_time, heap_class, size, t, c)
        size = pushed
    assert size == 300 and refused == 7  # 4 -> 8 -> ... -> 512
    popped = []
    while size:
        t, c, size = heap_pop(heap_time, heap_class, size)
        popped.append((t, c))
    assert popped == sorted(zip(times.tolist(), classes.tolist(), strict=False))


def test_runs_that_outgrow_the_repair_heap_equal_the_twin():
    # 600 GPUs failing every 100 s on average over a ~20,000-s run, each failure taking a node to repair
    # for 10,000 s with 100 spares: about 100 nodes in repair at once, more than REPAIR_HEAP_START, so
    # the kernel runs the first of these runs again in grown arrays. Each must equal the twin's run.
    params = kernel_params(iterations=20_000, spare_nodes=100, fast=True, checkpoint_every=20, checkpoint_stall_s=1.0)
    classes = failure_classes([(600, 1.0, 600 * 100.0, 30.0, 1, 1, 10_000.0)])
    out = np.zeros((4, mc.N_OUT))
    mc.simulate_runs(params, classes, mc.no_phases(), 3, 0, out)
    assert 10_000.0 / 100.0 > 1.5 * workspace.REPAIR_HEAP_START  # nodes in repair at once, on average
    assert out[:, mc.OUT_SPARE_WAIT_S].max() > 0  # more than the 100 spares in repair: that heap grew
    for r in range(4):
        np.testing.assert_allclose(naive_run.simulate_run(params, classes, 3, r), out[r], rtol=1e-12, atol=1e-9)


def test_a_run_that_outgrows_the_failure_heap_is_the_same_run():
    # 10^7 units failing once a second in all over a 100,000-iteration run (every iteration a checkpoint,
    # nothing else lost): about 100,000 failures, each leaving its replacement pending (one in 200 fails
    # again within the run), more than FAILURE_HEAP_MAX entries, so run 1 alone grows the heap (and
    # runs again) while after run 0 it finds the grown heap.
    units = 10_000_000
    params = kernel_params(
        iterations=100_000, checkpoint_every=1, checkpoint_stall_s=0.0, load_s=0.0, compute_time_s=1.0, comm_time_s=0.0
    )
    classes = failure_classes([(units, 1.0, float(units), 0.0)])
    both, alone = np.zeros((2, mc.N_OUT)), np.zeros((1, mc.N_OUT))
    mc.simulate_runs(params, classes, mc.no_phases(), 5, 0, both)
    mc.simulate_runs(params, classes, mc.no_phases(), 5, 1, alone)
    assert both[:, mc.OUT_FAILURES].min() > 1.2 * workspace.FAILURE_HEAP_MAX
    np.testing.assert_array_equal(both[1], alone[0])
