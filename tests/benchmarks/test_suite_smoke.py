"""A quick smoke run of the benchmark suite (speed is measured there, never asserted here)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUITE = Path(__file__).parents[2] / "benchmarks" / "run.py"


@pytest.mark.slow
def test_benchmark_suite_quick_run_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    # Run from tmp_path so the source tree's mcsim/ does not shadow the installed package.
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(SUITE), "--quick", "-o", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    names = {case["case"] for case in results["cases"]}
    for expected in (
        "llama3-405b fast",
        "llama3-405b exact",
        "1024 GPUs fast",
        "floor",
        "numpy baseline",
        "simpy baseline",
        "cold start (empty Numba cache)",
        "warm cache",
        "sweep 480",
        "warm plan and run",
    ):
        assert expected in names
    # Every ratio a finite number; the time ratios positive. The peak memory above the process's baseline
    # may be 0 in a quick run (a high-water mark the warm-up already reached): a clean-clone CI run had 0.
    ratios = results["ratios"]
    assert all(math.isfinite(value) for value in ratios.values())
    assert all(value > 0 for name, value in ratios.items() if not name.startswith("sweep peak memory"))
    assert ratios["sweep peak memory / dataset (target <= 1.5)"] >= 0
    assert "exact / floor" in proc.stdout and "machine:" in proc.stdout
    # progress: one line as each case starts and one as it ends, on stderr
    started = [line for line in proc.stderr.splitlines() if line.endswith(": started")]
    done = [line for line in proc.stderr.splitlines() if re.search(r": done in [0-9.]+ s$", line)]
    # one measurement each, but the start-up one gives three cases (cold start, warm cache, start-up)
    assert len(started) == len(done) == len(results["cases"]) - 2
    # the stated total is the suite's wall time (the subprocess also imports and writes the JSON)
    assert 0 < results["total_seconds"] <= elapsed
    assert f"total wall time: {results['total_seconds']:.0f} s" in proc.stdout


def test_default_run_skips_the_slow_tests():
    """`pytest` (the README's command) skips tests marked slow; `-m slow` and `--runslow` select them."""
    target = f"{Path(__file__).resolve()}::test_benchmark_suite_quick_run_writes_json"
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", target]
    default = subprocess.run(base, cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=300)
    assert default.returncode == 0 and "1 skipped" in default.stdout, default.stdout[-2000:]
    assert "slow: run with --runslow or -m slow" in default.stdout
    for selection in (["-m", "slow"], ["--runslow"]):
        # --setup-plan evaluates skip marks without running the test
        planned = subprocess.run(
            base + selection + ["--setup-plan"],
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert planned.returncode == 0 and "skipped" not in planned.stdout, planned.stdout[-2000:]
        assert "test_benchmark_suite_quick_run_writes_json" in planned.stdout
