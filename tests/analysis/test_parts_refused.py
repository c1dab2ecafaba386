"""One part of a sharded run is refused by every answer on configurations (hostile finding of issue 42).

A part holds only its own configurations: the best, the Pareto front, the cheapest
within a deadline, the completed share and the summary of one part would be answers on a few
configurations presented as the sweep's. Each failed before its fix, also on a lazily opened part.
"""

from __future__ import annotations

import copy

import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.analysis.ranking import best, pareto_front
from mcsim.io.netcdf import open_results, write_results
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.shard import Shard

ANSWERS = {
    "best": lambda ds: best(ds),
    "pareto": lambda ds: pareto_front(ds),
    "cheapest_within": lambda ds: ds.mcsim.cheapest_within(1000.0),
    "completed_share": lambda ds: ds.mcsim.completed_share(),
    "summarize": lambda ds: mcsim.summarize(ds),
}


@pytest.fixture(scope="module")
def part_file(tmp_path_factory):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=6, mode="fast")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    part = mcsim.simulate(scenario_from_dict(raw), progress=False, shard=Shard(0, 2))
    return write_results(part, tmp_path_factory.mktemp("part") / "p0.nc")


@pytest.mark.parametrize("chunks", [None, {"run": 6}], ids=["eager", "lazy"])
@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_answers_refuse_a_single_part(answer, chunks, part_file):
    ds = open_results(part_file, chunks=chunks)
    with pytest.raises(ValueError, match="part 0/2 of a sharded run"):
        ANSWERS[answer](ds)


def test_the_combined_parts_are_answered(part_file, tmp_path):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=6, mode="fast")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    other = write_results(
        mcsim.simulate(scenario_from_dict(raw), progress=False, shard=Shard(1, 2)), tmp_path / "p1.nc"
    )
    whole = mcsim.combine([part_file, other])
    assert best(whole)["configuration"]["gpus"] in (32, 64)
    assert float(whole.mcsim.completed_share().min()) == 1.0
