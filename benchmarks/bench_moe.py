"""A mixture-of-experts run against a dense one of the same GPU count, in the kernel: ``benchmarks/bench_moe.py``.

Issue 41 holds an MoE run of 1,000 runs to at most 1.5x the kernel time of the dense run of the
same GPU count. The MoE run is the shipped ``deepseek-v3-pretraining`` (2,048 H800); its dense
twin is ``llama3-405b`` on the same 2,048 GPUs (PP 16 as DeepSeek-V3's layout, full recomputation
as its scenario) with its tokens set so that its ideal training time equals DeepSeek-V3's: the two
runs then meet about as many failures, and what the kernel does per run differs only by what the
model hands it (iteration time, the straggler sigma with ``expert_imbalance_sigma``, the
checkpoint plan).

Both configurations are warmed up first (compile time excluded) and timed alternately, best of
``--repeats``, with one Numba thread, on CPU time (the machine is shared); the script prints each
one's kernel seconds per run, its failures per run and iterations per run, and the ratio
MoE / dense of kernel seconds per run (target <= 1.5).
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from mcsim.engine.simulate import simulate_config
from mcsim.kernels import interface as mc
from mcsim.model.workload import workload
from mcsim.scenario.config import Config, load_scenario


def configurations(mode: str) -> dict[str, Config]:
    """The MoE run and its dense twin (same GPUs, same ideal training time)."""
    moe = load_scenario("deepseek-v3-pretraining", [f"run.mode={mode!r}"]).base
    moe_wl = workload(moe)
    dense_overrides = [
        f"parallelism.gpus={moe.parallelism.gpus}",
        "parallelism.pp=16",
        "model.recompute='full'",
        f"run.mode={mode!r}",
    ]
    probe = load_scenario("llama3-405b", dense_overrides).base
    probe_wl = workload(probe)
    tokens_per_iteration = probe.model.global_batch * probe.model.seq_len
    ideal_s = moe_wl.iterations * moe_wl.iteration_time_s
    tokens = round(ideal_s / probe_wl.iteration_time_s) * tokens_per_iteration
    dense = load_scenario("llama3-405b", dense_overrides + [f"model.tokens={tokens:.6g}"]).base
    for name, cfg in (("moe", moe), ("dense", dense)):
        if not workload(cfg).feasible:
            raise SystemExit(f"bench_moe: the {name} configuration is infeasible: {workload(cfg).infeasible_reason}")
    return {"MoE deepseek-v3-pretraining": moe, "dense twin llama3-405b": dense}


def cpu_seconds(cfg: Config, runs: int, mode: str) -> tuple[float, np.ndarray]:
    """CPU seconds of ``runs`` runs of ``cfg`` in the kernel, and its output rows."""
    start = time.process_time()
    out, _, _ = simulate_config(cfg, runs, 0, mode)
    return time.process_time() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mode", default="fast", choices=("fast", "exact"))
    args = parser.parse_args()
    numba.set_num_threads(1)
    cases = configurations(args.mode)
    best = {name: np.inf for name in cases}
    rows: dict[str, np.ndarray] = {}
    for cfg in cases.values():
        cpu_seconds(cfg, 2, args.mode)  # compile and warm up
    for _ in range(args.repeats):
        for name, cfg in cases.items():
            seconds, rows[name] = cpu_seconds(cfg, args.runs, args.mode)
            best[name] = min(best[name], seconds)
    print(f"{args.runs} runs, {args.mode} mode, 1 Numba thread, best of {args.repeats} (CPU s)")
    for name, cfg in cases.items():
        failures, iterations = rows[name][:, mc.OUT_FAILURES].mean(), rows[name][:, mc.OUT_ITERATIONS_DONE].mean()
        print(
            f"{name:32s} {cfg.parallelism.gpus} GPUs  {best[name] / args.runs * 1e3:8.3f} ms/run  "
            f"failures/run {failures:7.1f}  iterations/run {iterations:9.0f}"
        )
    moe, dense = best.values()
    print(f"MoE / dense, kernel seconds per run: {moe / dense:.3f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
