"""Logs a cluster already has: Slurm ``sacct`` job records for ``fit-failures``, ``nvidia-smi`` and
``dcgmi dmon`` power logs for ``fit-power``.

The expected values are worked out by hand from the synthetic files in ``examples/`` (their
lines are quoted next to the arithmetic), not from the code under test.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import mcsim
from mcsim.cli.main import main
from mcsim.fitting.sacct_log import expand_hostlist, read_sacct_log

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SACCT = EXAMPLES / "sacct-jobs.txt"
NVIDIA_SMI = EXAMPLES / "nvidia-smi-power.csv"
DCGMI = EXAMPLES / "dcgmi-dmon-power.txt"


# ---------------------------------------------------------------- sacct


def test_hostlists_expand_as_slurm_writes_them():
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("r[1-2]n[08-09]") == ["r1n08", "r1n09", "r2n08", "r2n09"]
    assert expand_hostlist("node7") == ["node7"]


def _sacct_lifetimes_by_hand(failure_states: set[str]) -> tuple[list[float], list[bool]]:
    """The node lifetimes of examples/sacct-jobs.txt, hours from 2024-03-01T00:00 (the earliest Start).

    Allocations (step 1001.batch, RUNNING 1008 and PENDING 1009 skipped):
      1001 COMPLETED [0, 10] gpu01 gpu02;  1002 NODE_FAIL [12, 28] gpu03;  1003 TIMEOUT [0, 6] gpu04;
      1004 CANCELLED [24, 32] gpu01 gpu04;  1005 REQUEUED [30, 33] gpu02 gpu03;
      1005 NODE_FAIL [34, 44] gpu02 gpu03;  1006 NODE_FAIL [30, 49] gpu01;  1007 COMPLETED [50, 62] all four.
    The failed node of job 1005 (two nodes) is gpu02 or gpu03 by crc32("1005") mod 2.
    """
    pick = ["gpu02", "gpu03"][zlib.crc32(b"1005") % 2]
    assert pick == "gpu02"  # worked out below for this pick
    # gpu01: union [0,10] + [24,49] (1004 and 1006 overlap 30-32) + [50,62] = 10 + 25 + 12 = 47 h;
    #        fails at 49: 10 + 25 = 35 h, then 12 h censored
    gpu01 = ([35.0, 12.0], [True, False])
    # gpu02: [0,10] + [30,33] + [34,44] + [50,62] = 35 h; fails at 44 (job 1005): 10 + 3 + 10 = 23 h, 12 censored;
    #        with REQUEUED a failure too: at 33 (10 + 3 = 13 h), at 44 (10 h more), then 12 censored
    gpu02 = ([13.0, 10.0, 12.0], [True, True, False]) if "REQUEUED" in failure_states else ([23.0, 12.0], [True, False])
    # gpu03: [12,28] + [30,33] + [34,44] + [50,62] = 41 h; fails at 28: 16 h, then 25 h censored
    gpu03 = ([16.0, 25.0], [True, False])
    # gpu04: [0,6] + [24,32] + [50,62] = 26 h, censored (TIMEOUT and CANCELLED are not failures)
    gpu04 = ([26.0], [False])
    hours = [h for node in (gpu01, gpu02, gpu03, gpu04) for h in node[0]]
    flags = [f for node in (gpu01, gpu02, gpu03, gpu04) for f in node[1]]
    return hours, flags


@pytest.mark.parametrize("states", [("NODE_FAIL",), ("NODE_FAIL", "REQUEUED")])
def test_sacct_records_become_node_lifetimes(states):
    log = read_sacct_log(SACCT, states)
    hours, flags = _sacct_lifetimes_by_hand(set(states))
    np.testing.assert_array_equal(log.durations_h, hours)
    np.testing.assert_array_equal(log.failed, flags)
    np.testing.assert_array_equal(log.entry_h, np.zeros(len(hours)))


def test_fit_failures_reads_sacct_and_the_exponential_limit_holds(capsys):
    found = mcsim.fit_failures(SACCT, scope="node", name="slurm_nodes")
    assert found.fit.n_units == 7 and found.fit.n_failures == 3
    assert found.fit.total_hours == pytest.approx(35 + 12 + 23 + 12 + 16 + 25 + 26)  # 149 node-hours
    assert 'scope = "node"' in found.table and 'name = "slurm_nodes"' in found.table
    assert main(["fit-failures", str(SACCT), "--scope", "node", "--failure-states", "NODE_FAIL,REQUEUED"]) == 0
    out = capsys.readouterr().out
    assert "failures           4" in out and "total unit-hours   149.0" in out  # 13 + 10 instead of 23


# ---------------------------------------------------------------- power logs


# examples/nvidia-smi-power.csv, two GPUs x 8 samples:
#   idle (utilization <= 5 %): 71, 69, 73, 71, 76, 70 W -> mean 430 / 6
#   busy (>= 90 %): 655, 641, 662, 668, 648, 637, 659, 663 W -> mean 5233 / 8
#   partial: 310, 295 W; power.limit 700 W in every row
IDLE_W = 430 / 6
BUSY_W = 5233 / 8
BUSY_UTILIZATION = (BUSY_W - IDLE_W) / (700 - IDLE_W)  # 0.92699...


def test_nvidia_smi_log_gives_idle_power_and_busy_utilization():
    found = mcsim.fit_power(NVIDIA_SMI)
    assert found.samples == 16 and found.tdp_w == 700.0 and found.tdp_from == "power.limit"
    assert [found.states[s]["samples"] for s in ("idle", "busy", "partial")] == [6, 8, 2]
    assert found.states["idle"]["mean_w"] == pytest.approx(IDLE_W)
    assert found.states["busy"]["mean_w"] == pytest.approx(BUSY_W)
    assert found.states["partial"]["mean_w"] == pytest.approx((310 + 295) / 2)
    assert found.settings == {
        "hardware.idle_w": 71.67,
        "hardware.tdp_w": 700.0,
        "energy.busy_utilization": round(BUSY_UTILIZATION, 4),
    }
    assert found.set_options() == (
        "--set hardware.idle_w=71.67 --set hardware.tdp_w=700.0 --set energy.busy_utilization=0.927"
    )


def test_dcgmi_log_with_the_catalog_tdp_gives_the_same_keys(capsys):
    found = mcsim.fit_power(DCGMI, gpu_type="H100-SXM")  # the catalog's H100 SXM TDP: 700 W
    assert found.tdp_from == "catalog H100-SXM" and found.tdp_w == 700.0
    assert found.settings == {"hardware.idle_w": 71.67, "energy.busy_utilization": round(BUSY_UTILIZATION, 4)}
    assert main(["fit-power", str(DCGMI), "--tdp-w", "700"]) == 0
    assert "--set hardware.idle_w=71.67 --set energy.busy_utilization=0.927" in capsys.readouterr().out


def test_the_fitted_keys_are_accepted_by_a_scenario():
    found = mcsim.fit_power(NVIDIA_SMI)
    scenario = mcsim.load_scenario("capacity-planning", found.settings)
    assert scenario.base.hardware.idle_w == 71.67 and scenario.base.energy.busy_utilization == 0.927


# ---------------------------------------------------------------- bad logs: one line, exit 2, nothing written

SACCT_HEADER = "JobID|State|Start|End|NodeList"
SACCT_OK = "1|NODE_FAIL|2024-03-01T00:00:00|2024-03-01T05:00:00|n1"
SMI_HEADER = "timestamp, power.draw [W], utilization.gpu [%]"
BAD_LOGS = {
    "sacct_missing_column": ("fit-failures", "JobID|State|Start|End\n1|COMPLETED|x|y\n", "line 1", "NodeList"),
    "sacct_bad_time": (
        "fit-failures",
        f"{SACCT_HEADER}\n1|COMPLETED|yesterday|2024-03-01T05:00:00|n1\n",
        "line 2",
        "Start",
    ),
    "sacct_end_before_start": (
        "fit-failures",
        f"{SACCT_HEADER}\n1|COMPLETED|2024-03-02T00:00:00|2024-03-01T05:00:00|n1\n",
        "line 2",
        "End: expected a time >= Start",
    ),
    "sacct_bad_hostlist": (
        "fit-failures",
        f"{SACCT_HEADER}\n{SACCT_OK}\n2|COMPLETED|2024-03-01T00:00:00|2024-03-01T05:00:00|n[3-1]\n",
        "line 3",
        "NodeList",
    ),
    "sacct_too_many_hosts": (  # a hostile product of ranges is refused before it is made
        "fit-failures",
        f"{SACCT_HEADER}\n1|COMPLETED|2024-03-01T00:00:00|2024-03-01T05:00:00|n[0-99999]x[0-99999]\n",
        "line 2",
        "more than 100,000 hosts",
    ),
    "sacct_unbalanced": (
        "fit-failures",
        f"{SACCT_HEADER}\n1|COMPLETED|2024-03-01T00:00:00|2024-03-01T05:00:00|n[1-2\n",
        "line 2",
        "NodeList",
    ),
    "sacct_field_count": ("fit-failures", f"{SACCT_HEADER}\n1|COMPLETED|2024-03-01T00:00:00\n", "line 2", "expected 5"),
    "sacct_no_failure": (
        "fit-failures",
        f"{SACCT_HEADER}\n1|COMPLETED|2024-03-01T00:00:00|2024-03-01T05:00:00|n1\n",
        "State",
        "no job ended in NODE_FAIL",
    ),
    "smi_na": ("fit-power", f"{SMI_HEADER}\n2024/03/01 12:00:00.000, [N/A], 0 %\n", "line 2", "power.draw"),
    "smi_utilization_over_100": (
        "fit-power",
        f"{SMI_HEADER}\n2024/03/01 12:00:00.000, 70 W, 140 %\n",
        "line 2",
        "utilization.gpu",
    ),
    "smi_header": (
        "fit-power",
        "timestamp, temperature.gpu\n2024/03/01, 40\n",
        "line 1",
        "power.draw and utilization.gpu",
    ),
    "smi_no_busy": ("fit-power", f"{SMI_HEADER}\n2024/03/01 12:00:00.000, 70 W, 0 %\n", "--busy-min", "no busy sample"),
    "dcgmi_fields": ("fit-power", "#Entity   POWER   GPUTL\nID\nGPU 0   70.0\n", "line 3", "expected 4 fields"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOGS))
def test_bad_log_one_line_exit_2_no_output(case, tmp_path, capsys):
    command, text, key, message = BAD_LOGS[case]
    log = tmp_path / "log.txt"
    log.write_text(text)
    extra = ["--tdp-w", "700"] if command == "fit-power" else ["-o", str(tmp_path / "table.toml")]
    assert main([command, str(log), *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"mcsim: error: {log}: {key}") and message in lines[0], lines[0]
    assert captured.out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["log.txt"]
