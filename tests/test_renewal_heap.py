"""The renewal heap of replaced units (mcsim/kernels/renewal.py): order and growth."""

from __future__ import annotations

import numpy as np

from mcsim.kernels.renewal import heap_pop, heap_push


def test_heap_grows_past_its_capacity_and_pops_in_time_order():
    # 300 pushes into arrays of capacity 4 force six doublings; the pops must give the entries in
    # increasing time with their classes, as sorting them does (the independent reference).
    rng = np.random.default_rng(7)
    times = rng.permutation(300).astype(float) + rng.random(300) * 0.5  # distinct times
    classes = rng.integers(0, 5, 300)
    heap_time, heap_class, size = np.empty(4), np.empty(4, np.int64), 0
    for t, c in zip(times, classes, strict=False):
        heap_time, heap_class, size = heap_push(heap_time, heap_class, size, t, c)
    assert size == 300 and heap_time.shape[0] >= 300
    popped = []
    while size:
        t, c, size = heap_pop(heap_time, heap_class, size)
        popped.append((t, c))
    assert popped == sorted(zip(times.tolist(), classes.tolist(), strict=False))
