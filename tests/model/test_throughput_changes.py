"""Throughput that changes during a run (docs/model.md §2 and §4): training phases and a degradation that a
restart resets, against closed forms and small written-out references (fixed seeds, |z| < 4)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from builders import kernel_params, run_kernel
from scipy import integrate

from mcsim.cli.main import main
from mcsim.engine.simulate import simulate
from mcsim.kernels import interface as mc
from mcsim.model.stragglers import degradation_added_share
from mcsim.model.workload import workload
from mcsim.scenario.config import load_scenario, scenario_from_dict

# Three phases: the second begins off the checkpoint grid (230), the third on it (700).
PHASES = [(0.0, 0.5, 0.1), (230.0, 1.5, 0.2), (700.0, 0.9, 0.1)]
ITERATIONS, EVERY, STALL = 1050, 100, 10.0


def _z(sample: np.ndarray, expected: float) -> float:
    return (sample.mean() - expected) / (sample.std(ddof=1) / math.sqrt(len(sample)))


def _iteration_s(i: int) -> float:
    """Ideal time of iteration ``i`` (0-based): its phase's compute + comm."""
    return [c + m for start, c, m in PHASES if start <= i][-1]


def _segments() -> list[float]:
    """Work between checkpoints (every EVERY iterations, none at the end), stall included, s."""
    bounds = list(range(0, ITERATIONS, EVERY)) + [ITERATIONS]
    return [
        sum(_iteration_s(i) for i in range(a, b)) + (STALL if b < ITERATIONS else 0.0)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


@pytest.mark.parametrize("fast", [False, True])
def test_phases_without_failures_take_their_own_iteration_times(fast):
    p = kernel_params(iterations=ITERATIONS, checkpoint_every=EVERY, checkpoint_stall_s=STALL, fast=fast)
    out = run_kernel(p, [], runs=3, phases=PHASES)
    # Each iteration takes its phase's time; 10 checkpoints (100 .. 1000), none at the end and none at
    # the off-grid phase change (230).
    expected = sum(_segments())
    assert out[:, mc.OUT_WALL_S] == pytest.approx(expected, rel=1e-12)
    assert np.all(out[:, mc.OUT_CHECKPOINTS] == 10)
    assert np.all(out[:, mc.OUT_ITERATIONS_DONE] == ITERATIONS)


@pytest.mark.parametrize("fast", [False, True])
def test_phases_with_exponential_failures_match_renewal_reward(fast):
    recovery, load, mtbf_s = 40.0, 5.0, 300.0
    p = kernel_params(iterations=ITERATIONS, checkpoint_every=EVERY, checkpoint_stall_s=STALL, load_s=load, fast=fast)
    out = run_kernel(p, [(1, 1.0, mtbf_s, recovery)], runs=4000, seed=3, phases=PHASES)
    # Renewal-reward: a segment of s seconds that must run failure-free, failures at rate lambda,
    # a recovery R restarted by failures costs (e^(lambda s) - 1) e^(lambda R) / lambda (Daly 2006
    # with zero downtime); the segments between checkpoints carry their phases' iteration times, and a
    # rollback across a phase change runs the earlier phase's iterations again at their own time.
    lam, restart = 1.0 / mtbf_s, recovery + load
    expected = sum(math.expm1(lam * s) * math.exp(lam * restart) / lam for s in _segments())
    assert np.all(out[:, mc.OUT_COMPLETED] == 1.0)
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4


def _staircase_wall_s(c, m, iterations, every, stall, per_s, step_s, max_share):
    """No failures, no stragglers: each iteration takes ``c g + m`` with ``g`` the step's factor at its start."""
    t = 0.0
    for i in range(iterations):
        j = math.floor(t / step_s)
        t += c * (1.0 + min(per_s * (j + 0.5) * step_s, max_share)) + m
        if (i + 1) % every == 0 and i + 1 < iterations:
            t += stall
    return t


@pytest.mark.parametrize("fast", [False, True])
def test_degradation_without_failures_follows_its_staircase(fast):
    per_s, step_s, max_share = 0.5 / 86400.0, 600.0, 0.05  # the cap is reached in step 14
    degradation = dict(degradation_per_s=per_s, degradation_step_s=step_s, degradation_max=max_share)
    p = kernel_params(iterations=20_000, checkpoint_every=1000, checkpoint_stall_s=10.0, fast=fast, **degradation)
    out = run_kernel(p, [], runs=2)
    expected = _staircase_wall_s(0.9, 0.1, 20_000, 1000, 10.0, per_s, step_s, max_share)
    assert out[:, mc.OUT_WALL_S] == pytest.approx(expected, rel=1e-12)
    # The degradation's excess is booked with the persistent straggler time.
    busy = 20_000 * 1.0
    assert out[:, mc.OUT_STRAGGLER_PERSISTENT_S] == pytest.approx(expected - busy - 19 * 10.0, rel=1e-9)


def _expected_wall_restarting_s(tau: np.ndarray, mtbf_s: float) -> float:
    """Exact mean completion time when exponential failures (mean M) restart an attempt that runs
    iterations ``tau[0], tau[1], ...`` (each ends at ``t_k``), nothing lost but the iteration a failure
    interrupts and no recovery time.

    ``V(n)``, the mean time to complete n iterations from a restart: a failure at ``x`` during iteration
    ``k + 1`` (probability ``P_k``, mean ``x`` part ``A_k``) leaves ``n - k`` to do from a restart, so
    ``V(n) = [sum_{k<n} A_k + sum_{1<=k<n} P_k V(n - k) + e^(-t_n/M) t_n] / (1 - P_0)``.
    """
    t = np.concatenate([[0.0], np.cumsum(tau)])
    survive = np.exp(-t / mtbf_s)
    p = survive[:-1] - survive[1:]
    a = (t[:-1] + mtbf_s) * survive[:-1] - (t[1:] + mtbf_s) * survive[1:]  # integral of x f(x) over the iteration
    a_sum = np.cumsum(a)
    v = np.zeros(len(tau) + 1)
    for n in range(1, len(tau) + 1):
        later = float(np.dot(p[1:n], v[n - 1 : 0 : -1])) if n > 1 else 0.0
        v[n] = (a_sum[n - 1] + later + survive[n] * t[n]) / (1.0 - p[0])
    return float(v[-1])


def test_degradation_restarts_reset_it_exact_mean():
    """Exponential failures reset the degradation; checkpoints every iteration, no stall, no recovery.
    Expected value: the exact recursion of :func:`_expected_wall_restarting_s` over the staircase's
    iteration times from a restart (each iteration at its start's step)."""
    c, m, n, mtbf = 4.5, 0.5, 2000, 1800.0
    per_s, step_s, max_share = 4.0 / 86400.0, 300.0, 0.3
    degradation = dict(degradation_per_s=per_s, degradation_step_s=step_s, degradation_max=max_share)
    iteration = dict(iterations=n, compute_time_s=c, comm_time_s=m)
    p = kernel_params(**iteration, checkpoint_every=1, checkpoint_stall_s=0.0, load_s=0.0, **degradation)
    out = run_kernel(p, [(1, 1.0, mtbf, 0.0)], runs=2000, seed=7)
    tau, t = [], 0.0
    for _ in range(n):
        tau.append(c * (1.0 + min(per_s * (math.floor(t / step_s) + 0.5) * step_s, max_share)) + m)
        t += tau[-1]
    expected = _expected_wall_restarting_s(np.array(tau), mtbf)
    assert abs(_z(out[:, mc.OUT_WALL_S], expected)) < 4
    flat = _expected_wall_restarting_s(np.full(n, c + m), mtbf)
    assert expected > flat * 1.02  # the degradation costs >2 %: a kernel that ignored it would fail


@pytest.mark.parametrize("mtbf_s", [2 * 86400.0, np.inf])
@pytest.mark.parametrize("max_share", [0.05, 10.0])
def test_degradation_added_share_closed_form(mtbf_s, max_share):
    """The screen's first-order mean: E over t in [0, T] and X ~ Exp(M) of min(r min(t, X), D), by quadrature."""
    r, horizon = 0.1 / 86400.0, 30 * 86400.0

    def at(t: float) -> float:
        if not math.isfinite(mtbf_s):
            return min(r * t, max_share)
        inner = integrate.quad(lambda x: min(r * min(t, x), max_share) * math.exp(-x / mtbf_s) / mtbf_s, 0, t)[0]
        return inner + math.exp(-t / mtbf_s) * min(r * t, max_share)

    expected = integrate.quad(at, 0, horizon, limit=200)[0] / horizon
    assert float(degradation_added_share(r, max_share, mtbf_s, horizon)) == pytest.approx(expected, rel=1e-6)


# --- Phases in a scenario ------------------------------------------------------------------


def _raw(**phases) -> dict:
    return {
        "model": {
            "params": 7e9,
            "layers": 32,
            "hidden": 4096,
            "seq_len": 4096,
            "tokens": 2e11,
            "global_batch": 512,
        },
        "parallelism": {"gpus": 256, "tp": 4, "pp": 2},
        "phases": phases,
    }


def test_workload_of_phases_combines_each_phase_alone():
    shares, batches, lengths = (0.02, 0.9, 0.08), (128, 512, 64), (4096, 4096, 24576)
    cfg = scenario_from_dict(_raw(token_shares=list(shares), global_batch=list(batches), seq_len=list(lengths))).base
    wl = workload(cfg)
    assert wl.feasible, wl.infeasible_reason
    one = scenario_from_dict(_raw()).base
    alone = [
        workload(
            dataclasses.replace(one, model=dataclasses.replace(one.model, tokens=s * 2e11, global_batch=b, seq_len=n))
        )
        for s, b, n in zip(shares, batches, lengths, strict=True)
    ]
    counts = [math.ceil(s * 2e11 / (b * n)) for s, b, n in zip(shares, batches, lengths, strict=True)]
    assert [w.iterations for w in alone] == counts
    assert wl.iterations == sum(counts)
    assert [row[0] for row in wl.phases] == [0.0, counts[0], counts[0] + counts[1]]
    assert [row[1] for row in wl.phases] == [w.compute_time_s for w in alone]
    assert [row[2] for row in wl.phases] == [w.comm_time_s for w in alone]
    ideal = sum(n * w.iteration_time_s for n, w in zip(counts, alone, strict=True))
    assert wl.ideal_time_s == pytest.approx(ideal, rel=1e-12)
    assert wl.memory_per_gpu_gb == max(w.memory_per_gpu_gb for w in alone)


def test_scenario_with_phases_runs_and_a_longer_phase_costs_time(tmp_path):
    base = _raw(token_shares=[0.5, 0.5], global_batch=[512, 512], seq_len=[4096, 4096])
    longer = _raw(token_shares=[0.5, 0.5], global_batch=[512, 64], seq_len=[4096, 32768])
    walls = []
    for raw in (base, longer):
        sc = scenario_from_dict(raw)
        wl = workload(sc.base)
        walls.append(wl.ideal_time_s)
    # Same tokens; the second half at 8x the sequence length pays attention's quadratic cost.
    assert walls[1] > walls[0] * 1.05
    # The same two halves as one phase give the same workload as no phases at all.
    plain = workload(scenario_from_dict(_raw()).base)
    assert walls[0] == pytest.approx(plain.ideal_time_s, rel=1e-9)


@pytest.mark.parametrize(
    "phases,key,expected",
    [
        ({"token_shares": [0.5, 0.4]}, "phases.token_shares", "sum to 1"),
        ({"token_shares": [0.5, 0.5], "global_batch": [512]}, "phases.global_batch", "one value per phase"),
        ({"global_batch": [512]}, "phases.global_batch", "one value per phase (0"),
        ({"token_shares": [0.5, 0.5], "seq_len": [4096, 0]}, "phases.seq_len[1]", ">= 1"),
        ({"token_shares": "half"}, "phases.token_shares", "list of at most 64 shares"),
    ],
)
def test_bad_phases_are_refused_naming_the_key(tmp_path, capsys, phases, key, expected):
    lines = ["[phases]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in phases.items()]
    path = tmp_path / "bad.toml"
    path.write_text(
        "[model]\nparams = 7e9\nlayers = 32\nhidden = 4096\nseq_len = 4096\ntokens = 2e11\nglobal_batch = 512\n"
        "[parallelism]\ngpus = 256\ntp = 4\npp = 2\n" + "\n".join(lines) + "\n"
    )
    out = tmp_path / "out.nc"
    assert main(["run", str(path), "--runs", "2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert key in err and expected in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_phase_batch_that_does_not_divide_names_the_phase():
    raw = _raw(token_shares=[0.1, 0.9], global_batch=[100, 512])  # dp 32 x microbatch 1 does not divide 100
    wl = workload(scenario_from_dict(raw).base)
    assert not wl.feasible
    assert wl.infeasible_key == "phases.global_batch"
    assert wl.infeasible_reason.startswith("training phase 1: global_batch = 100")


def test_shipped_reference_scenario_has_one_phase():
    cfg = load_scenario("llama3-405b", runs=2).base
    assert workload(cfg).phases == ()


def test_phases_are_set_from_the_command_line_and_a_phase_too_big_is_named(tmp_path, capsys):
    # A list given to --set for a key whose value is a list sets it (it is not a sweep axis).
    out = tmp_path / "o.nc"
    base = ["run", "--runs", "2", "-o", str(out), "--set", "phases.token_shares=[0.5,0.5]"]
    assert main([*base, "--set", "phases.seq_len=[8192,16384]"]) == 2
    err = capsys.readouterr().err.strip()
    assert "training phase 2: memory per GPU" in err and len(err.splitlines()) == 1 and not out.exists()
    assert main([*base, "--set", "phases.seq_len=[8192,8192]"]) == 0
    assert out.exists()


def test_censored_runs_with_phases_are_charged_their_own_phases():
    # A run censored in a fast first phase did the iterations of that phase only: its ideal time and
    # energy are at that phase's times, not at the mean over the phases (a hostile review found ETTR
    # 1.5 and 643 W per 400-W A100 here). ETTR <= 1 and the GPUs' mean power below their TDP.
    raw = _raw(token_shares=[0.5, 0.5], global_batch=[128, 512], seq_len=[512, 4096])
    raw["hardware"] = {"gpu": "A100-80GB"}
    raw["failures"] = [{"name": "gpu", "scope": "gpu", "mtbf_hours": 2000.0}]
    raw["run"] = {"runs": 20, "max_wall_days": 0.02}
    sc = scenario_from_dict(raw)
    wl = workload(sc.base)
    assert wl.phases[1][0] * (wl.phases[0][1] + wl.phases[0][2]) > 0.02 * 86400  # censored in phase 1
    ds = simulate(sc, progress=False)
    assert (ds["completed"].values == 0).all()
    ettr = ds["ettr"].values
    assert (ettr <= 1.0).all() and (ettr[ds["n_failures"].values == 0] > 0.9).all()
    gpu_w = ds["energy_gpu"].values * 3.6e9 / (256 * ds["wall_time"].values * 3600.0)
    assert (gpu_w <= 400.0).all(), gpu_w.max()


def test_a_degradation_step_below_a_hundredth_of_a_minute_is_refused(tmp_path, capsys):
    # Steps far below the clock's resolution late in a run would never advance it (a review hung the
    # kernel at 1e-15 minutes): the key is bounded, one line, exit 2, no output.
    out = tmp_path / "o.nc"
    code = main(["run", "--runs", "2", "-o", str(out), "--set", "stragglers.degradation_step_minutes=0.001"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "stragglers.degradation_step_minutes" in err and ">= 0.01" in err and not out.exists()
