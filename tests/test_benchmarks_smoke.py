"""A quick smoke run of the benchmark suite (speed is measured there, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).parents[1] / "benchmarks" / "run.py"


def test_benchmark_suite_quick_run_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    # Run from tmp_path so the source tree's mcsim/ does not shadow the installed package.
    proc = subprocess.run([sys.executable, str(SUITE), "--quick", "-o", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    names = {case["case"] for case in results["cases"]}
    for expected in ("llama3-405b fast", "llama3-405b exact", "1024 GPUs fast", "floor", "numpy baseline",
                     "simpy baseline", "cold start (empty Numba cache)", "warm cache"):
        assert expected in names
    assert all(value > 0 for value in results["ratios"].values())
    assert "exact / floor" in proc.stdout and "machine:" in proc.stdout
