"""The planner's memory headroom (docs/model.md §9, ``constraints.memory_headroom``): no candidate whose
modelled memory leaves less than the headroom of its GPU's memory free is kept, in the screen or the
selection, and the default is the memory model's measured worst under-count."""

from __future__ import annotations

import numpy as np
import pytest
from plans import small_plan

from mcsim.planning.candidates import enumerate_candidates
from mcsim.planning.plan_file import DEFAULT_MEMORY_HEADROOM, plan_from_dict
from mcsim.planning.screen import KEPT, screen

MEMORY_REJECTION = 5


def _screened(headroom: float | None, memory_gib: float):
    constraints = {} if headroom is None else {"memory_headroom": headroom}
    raw = small_plan(constraints=constraints, hardware={"memory_gb": memory_gib})
    plan = plan_from_dict(raw, "p.toml")
    return plan, screen(plan, enumerate_candidates(plan))


def test_default_is_the_measured_under_count():
    """0.08: the memory model read 0.92 of BigScience's measured memory at worst (docs/validation.md)."""
    plan, _ = _screened(None, 80.0)
    assert plan.constraints.memory_headroom == DEFAULT_MEMORY_HEADROOM == pytest.approx(0.08)


@pytest.mark.parametrize("headroom", [0.0, 0.08, 0.3])
def test_screen_keeps_only_what_leaves_the_headroom_free(headroom):
    # Capacity chosen inside the candidates' memory range, so that the headroom decides some of them.
    _, probe = _screened(0.0, 1e6)
    need = probe.memory_per_gpu_gb[np.isfinite(probe.memory_per_gpu_gb)]
    capacity_gib = float(np.median(need)) * 1e9 / 2**30
    _, scr = _screened(headroom, capacity_gib)
    usable_gb = capacity_gib * 2**30 / 1e9 * (1 - headroom)  # catalog GB are GiB
    finite = np.isfinite(scr.memory_per_gpu_gb)
    over = finite & (scr.memory_per_gpu_gb > usable_gb)
    assert over.any() and (finite & ~over).any()
    assert np.all(scr.rejection[over] == MEMORY_REJECTION)
    # Nothing over the line survives to the finalists (the selection simulates only those).
    assert not over[scr.finalists].any()
    kept = scr.rejection == KEPT
    assert np.all(scr.memory_per_gpu_gb[kept] <= usable_gb)


def test_more_headroom_never_keeps_more():
    counts = [int(np.sum(_screened(h, 80.0)[1].rejection == MEMORY_REJECTION)) for h in (0.0, 0.08, 0.5, 0.9)]
    assert counts == sorted(counts)
