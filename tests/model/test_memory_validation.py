"""The memory model against BigScience's published memory per GPU (docs/validation.md, "Memory").

Expected values are the published figures, typed here from the source
(bigscience-workshop/bigscience, train/tr11-176B-ml/chronicles-prequel.md), independently of
mcsim/analysis/memory_validation.py's table; closed forms for the in-flight counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mcsim.analysis import memory_validation as mv
from mcsim.model import memory
from mcsim.planning.plan_file import DEFAULT_MEMORY_HEADROOM

# (source, layers, hidden, TP, PP, DP, microbatch): GB as published (nvidia-smi MiB / 1024), None: OOM.
PUBLISHED = {
    ("bigscience2022", 72, 14336, 8, 6, 8, 4): (55.0,),
    ("bigscience2022", 72, 14336, 8, 6, 8, 6): (66.0,),
    ("bigscience2022", 72, 14336, 8, 12, 4, 4): (49.0,),
    ("bigscience2022", 72, 14336, 8, 8, 6, 4): (52.0,),
    ("bigscience2022", 72, 14336, 8, 4, 12, 2): (53.0,),
    ("bigscience2022", 72, 14336, 8, 4, 12, 4): (59.0,),
    ("bigscience2022", 72, 14336, 8, 2, 24, 1): (65.0,),
    ("bigscience2022", 72, 14336, 8, 2, 24, 2): (76.0,),
    ("bigscience2022", 72, 14336, 4, 12, 8, 4): (60.0,),
    ("bigscience2022", 72, 14336, 4, 12, 8, 2): (44.0, 38.0),
    ("bigscience2022", 72, 14336, 4, 6, 16, 4): (75.0,),
    ("bigscience2022", 72, 14336, 4, 6, 16, 2): (57.0,),
    ("bigscience2022", 72, 14336, 2, 12, 16, 2): (63.0,),
    ("bigscience2022", 72, 14336, 2, 24, 8, 1): (44.0,),
    ("bigscience2022", 72, 14336, 2, 24, 8, 2): (53.0,),
    ("bigscience2022", 96, 12288, 1, 48, 8, 1): (58.0,),
    ("bigscience2022", 72, 14336, 8, 1, 48, 1): None,
    ("bigscience2022", 72, 14336, 2, 6, 32, 2): None,
    ("bigscience2022", 72, 14336, 2, 6, 32, 1): None,
    ("bigscience2022_0221", 72, 14336, 8, 12, 4, 1): (29.0,),
    ("bigscience2022_0221", 72, 14336, 8, 12, 4, 2): (37.0,),
    ("bigscience2022_0221", 72, 14336, 8, 12, 4, 4): (49.0,),
    ("bigscience2022_0221", 72, 14336, 8, 12, 4, 8): (69.0,),
    ("bigscience2022_0221", 72, 14336, 8, 6, 8, 1): (38.0,),
    ("bigscience2022_0221", 72, 14336, 8, 6, 8, 2): (44.0,),
    ("bigscience2022_0221", 72, 14336, 8, 6, 8, 4): (56.0,),
    ("bigscience2022_0217", 8, 14400, 8, 1, 1, 1): (68.0,),
    ("bigscience2022_0217", 80, 14400, 8, 10, 1, 1): (75.0,),
    ("bigscience2022_0217", 80, 14400, 8, 10, 2, 1): (53.0,),
}


@pytest.fixture(scope="module")
def results():
    return mv.leave_one_out()


def test_cases_are_the_published_tables():
    got = {(c.source, c.layers, c.hidden, c.tp, c.pp, c.dp, c.microbatch): c.measured for c in mv.MEMORY_CASES}
    assert got == PUBLISHED


def test_every_measured_layout_within_ten_percent(results):
    """Model / measured within +-10 % leave-one-out (a layout measured twice: of either reading)."""
    for r in results:
        readings = PUBLISHED[(r.case.source, r.case.layers, r.case.hidden, r.case.tp, r.case.pp, r.case.dp,
                              r.case.microbatch)]  # fmt: skip
        if readings is None:
            continue
        ratios = [r.model_gb / (gb * 2**30 / 1e9) for gb in readings]
        assert min(abs(x - 1) for x in ratios) <= 0.10, r.case.name


def test_out_of_memory_layouts_refused_and_no_run_refused(results):
    capacity = 80 * 2**30 / 1e9  # the A100 80GB's 81,920 MiB
    for r in results:
        ran = PUBLISHED[(r.case.source, r.case.layers, r.case.hidden, r.case.tp, r.case.pp, r.case.dp,
                         r.case.microbatch)] is not None  # fmt: skip
        assert (r.model_gb <= capacity) == ran, r.case.name
    assert mv.memory_passes(results)


def test_the_band_and_the_headroom_are_the_validations(results):
    """MEMORY_MODEL_OVER_MEASURED spans the leave-one-out ratios, rounded outward; the planner's default
    headroom is its lower end's under-count."""
    low, high = mv.memory_band(results)
    band = memory.MEMORY_MODEL_OVER_MEASURED
    assert band[0] <= low < band[0] + 0.01 and band[1] - 0.01 < high <= band[1]
    assert DEFAULT_MEMORY_HEADROOM == pytest.approx(1 - band[0])


def test_the_shipped_reserve_is_the_fit_on_every_layout(results):
    """ALLOCATOR_RESERVE["blocking-1f1b"] is the reserve fitted on all measured layouts (each leave-one-out fit
    is within 0.02 of it)."""
    reserves = np.array([r.reserve for r in results])
    assert np.all(np.abs(reserves - memory.ALLOCATOR_RESERVE[mv.ENGINE]) <= 0.02)
    assert abs(float(np.median(reserves)) - memory.ALLOCATOR_RESERVE[mv.ENGINE]) <= 0.005


def test_a_layout_never_predicts_itself():
    """Moving one layout's measurement moves the other layouts' fits, never its own."""
    cases = mv.MEMORY_CASES[:6]
    moved = (mv.MemoryCase(**{**cases[0].__dict__, "measured": (200.0,)}),) + cases[1:]
    before, after = mv.leave_one_out(cases), mv.leave_one_out(moved)
    assert after[0].reserve == before[0].reserve
    assert all(a.reserve > b.reserve for a, b in zip(after[1:], before[1:], strict=True))


def test_documented_table_is_the_commands(results):
    docs = (Path(__file__).parents[2] / "docs" / "validation.md").read_text()
    assert [line for line in mv.memory_table(results).splitlines() if line not in docs] == []


@pytest.mark.parametrize(
    ("p", "m", "v", "expected"),
    [
        (4, 16, 1, 4 * 2),  # 8 layers on 4 stages: stage 0 holds p = 4 microbatches of its 2 layers
        (4, 2, 1, 2 * 2),  # fewer microbatches than stages: m of them
        (4, 16, 2, 2 * (4 + 3 / 2)),  # interleaved: (2 (p - 1) + (v - 1) p + 1) / v = 11/2 chunks of 2 layers
    ],
)
def test_in_flight_layers_follow_the_schedules(p, m, v, expected):
    """Korthikanti et al. (arXiv 2205.05198) §4.2.3: the first stage of the interleaved schedule holds
    L / p (p + (p - 1) / v) layers' activations, L / p x p under plain 1F1B."""
    got = memory.peak_stage_microbatch_layers(8, np.array([p]), np.array([m]), np.array([v]))[0]
    assert got == pytest.approx(expected)
    if v == 2:
        assert got == pytest.approx(8 / p * (p + (p - 1) / v))


def test_deepspeed_pipe_buffers():
    """DeepSpeed's TrainSchedule.num_pipe_buffers at stage 0: max(2, min(p, m)); none without a pipeline."""
    got = memory.pipe_buffers(np.array([1, 2, 6, 6]), np.array([64, 64, 3, 64]))
    assert got.tolist() == [0, 2, 3, 6]


def test_state_bytes_are_megatrons_table():
    """Megatron-LM's distributed-optimizer guide: bf16 params / fp32 grads 18 and 6 + 12/d; fp16 / fp16 20 and
    4 + 16/d."""
    d = np.array([8.0])
    assert memory.model_state_bytes_per_param(0, d)[0] == 18
    assert memory.model_state_bytes_per_param(1, d)[0] == pytest.approx(6 + 12 / 8)
    assert memory.model_state_bytes_per_param(0, d, "blocking-1f1b")[0] == 20
    assert memory.model_state_bytes_per_param(1, d, "blocking-1f1b")[0] == pytest.approx(4 + 16 / 8)


def test_validate_memory_cli():
    done = subprocess.run(
        [sys.executable, "-m", "mcsim", "validate", "--memory"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + len(PUBLISHED) + 1  # header, layouts, summary
    assert "26 within +-10%); 3 of 3 out-of-memory layouts refused, 0 that ran refused" in done.stdout


def test_report_states_the_recommendations_memory_with_its_band():
    """measured = model / ratio: model 60 GB with the band (0.92, 1.08) reads 55.6 to 65.2 GB; an A100 80GB
    holds 85.9 GB (80 GiB)."""
    import xarray as xr

    from mcsim.report.plan.steptime import memory_lines

    operators = '[compute]\nstep_model = "operators"\n'

    def plan(gb, toml=operators):
        return xr.Dataset(
            {"screen_memory_per_gpu": ("candidate", [10.0, gb]), "gpu_type": ("candidate", ["A100-80GB"] * 2)},
            attrs={"scenario_toml": toml},
        ).assign(recommended=1)

    low, high = memory.MEMORY_MODEL_OVER_MEASURED
    roomy, tight = memory_lines(plan(60.0)), memory_lines(plan(80.0))
    assert roomy[0] == "## Memory"
    assert f"{60 / high:.1f} to {60 / low:.1f} GB." in roomy[2] and "more than" not in roomy[2]
    assert f"{80 / high:.1f} to {80 / low:.1f} GB" in tight[2] and "more than the GPU's 85.9 GB (80 GiB)" in tight[2]
    assert "more than" not in memory_lines(plan(80.0, operators + "[hardware]\nmemory_gb = 200\n"))[2]
    assert "the GPU's 53.7 GB (50 GiB)" in memory_lines(plan(50.0, operators + "[hardware]\nmemory_gb = 50\n"))[2]
    # the aggregate model (named: the default is the operators model since issue 40) gets no range
    aggregate = '[compute]\nstep_model = "aggregate"\n'
    assert memory_lines(plan(60.0, aggregate)) == [] and memory_lines(plan(float("nan"))) == []
    assert memory_lines(plan(60.0, ""))[0] == "## Memory"  # no step_model: the default, operators
