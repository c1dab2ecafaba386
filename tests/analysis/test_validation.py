"""Reference scenarios and `mcsim validate` (run at reduced runs; it must pass)."""

from __future__ import annotations

import pytest

import mcsim
from mcsim.analysis.validation import PUBLISHED
from mcsim.cli.main import main
from mcsim.model.workload import workload

SCENARIOS = mcsim.reference_scenario_path().parent


def test_validate_passes_at_reduced_runs(capsys):
    assert main(["validate", "--runs", "200"]) == 0
    out = capsys.readouterr().out
    known = [f for f in PUBLISHED if f.known_outside]
    within = len(PUBLISHED) - len(known)
    assert f"{within} of {len(PUBLISHED)} within" in out and f"({len(known)} of them known" in out
    assert out.count("OUTSIDE (known)") == len(known) == out.count("OUTSIDE")
    for figure in PUBLISHED:
        assert figure.quantity in out
    for figure in known:  # still outside: a change that brings one within must drop its reason
        assert f"known outside: {figure.quantity}: {figure.known_outside}" in out


def test_every_published_figure_is_sourced_and_classified():
    for figure in PUBLISHED:
        assert figure.source and figure.kind in ("consistency", "prediction", "derived", "bound")
        assert figure.low <= figure.high and figure.criterion in ("mean", "interval")
        if figure.criterion == "interval":  # the published value itself is scored
            assert figure.low == figure.high
        if figure.known_outside:  # only a figure the model predicts may be a known miss
            assert figure.kind == "prediction"


def test_an_unknown_miss_fails_validate(monkeypatch, capsys):
    # A row outside without a recorded reason fails `mcsim validate` (exit 1): the MegaScale effective
    # training time rate scored against an impossible range (its iteration time is a known miss).
    import dataclasses

    from mcsim.analysis import validation

    rows = tuple(
        dataclasses.replace(f, low=2.0, high=3.0) if f.quantity.startswith("effective training time rate") else f
        for f in PUBLISHED
        if f.scenario == "megascale-175b.toml"
    )
    monkeypatch.setattr(validation, "PUBLISHED", rows)
    assert main(["validate", "--runs", "20"]) == 1
    out = capsys.readouterr().out
    assert out.count("OUTSIDE (known)") == 1 and out.count("OUTSIDE") == 2  # the new miss and the known one


def test_llama3_reference_mfu_in_published_range():
    """Llama 3 report Table 4: 38-43 % BF16 MFU, measured, so with the slowest rank pacing each iteration: the
    ideal MFU of the software profile's efficiency (not calibrated to it) over the mean straggler factor."""
    from mcsim.model.stragglers import factor_law

    cfg = mcsim.load_scenario(SCENARIOS / "llama3-405b.toml").base
    wl = workload(cfg)
    assert wl.feasible
    slowest = factor_law(cfg.parallelism.gpus, cfg.stragglers.sigma).mean
    assert 0.38 <= wl.mfu_ideal / slowest <= 0.43


def test_bloom_reference_throughput_in_published_range():
    cfg = mcsim.load_scenario(SCENARIOS / "bloom-176b.toml").base
    wl = workload(cfg)
    assert wl.feasible and cfg.parallelism.gpus == 384 and cfg.nodes == 48 and cfg.hardware.spare_nodes == 4
    # "~150 TFLOP/s per GPU" (BigScience), counted with the recomputation: hardware FLOPs
    hardware_tflops = wl.hardware_flops / (cfg.parallelism.gpus * wl.iteration_time_s) / 1e12
    assert hardware_tflops == pytest.approx(150.0, rel=0.05)
    # 366B tokens in 2048 x 2048-token batches; a checkpoint every 100 iterations (~3 h)
    assert wl.iterations == 87262
    assert cfg.checkpoint.interval.kind == "iterations" and cfg.checkpoint.interval.value == 100


@pytest.mark.parametrize(
    "name",
    [
        "bloom-176b",
        "llama3-405b",
        "capacity-planning",
        "capacity-planning-uncertain",
        "dvfs-opt350m-1gpu",
        "dvfs-opt350m-dp4",
        "dvfs-opt350m-pp2",
        "rsc1-8k",
    ],
)
def test_shipped_scenarios_load_and_have_feasible_configurations(name):
    scenario = mcsim.load_scenario(SCENARIOS / f"{name}.toml")
    assert any(workload(cfg).feasible for cfg in scenario.configs)


def test_uncertain_capacity_scenario_is_the_certain_one_with_draws():
    # docs/capacity-planning.md: the same model, hardware and failure classes, three sizes,
    # five uncertain inputs whose drawn medians are the certain scenario's point values
    certain = mcsim.load_scenario(SCENARIOS / "capacity-planning.toml")
    uncertain = mcsim.load_scenario(SCENARIOS / "capacity-planning-uncertain.toml")
    assert uncertain.base.model == certain.base.model and uncertain.base.failures == certain.base.failures
    assert uncertain.base.run.draws == 256 and [len(a.values) for a in uncertain.axes] == [3]
    keys = {e.key: e for e in uncertain.uncertain}
    assert set(keys) == {
        "failures.gpu.mtbf_hours",
        "stragglers.sigma",
        "compute.efficiency",
        "failures.gpu.recovery_minutes",
        "checkpoint.storage_gbps",
    }
    assert float(keys["failures.gpu.mtbf_hours"].ppf(0.5)) == pytest.approx(certain.base.failures[0].mtbf_hours)
    assert float(keys["failures.gpu.recovery_minutes"].ppf(0.5)) == pytest.approx(10.0)


def test_model_card_rows_carry_the_cards_figures_and_say_what_they_borrow():
    # Llama 3 model card (meta-llama/llama3 MODEL_CARD.md): 8B 1.3M, 70B 6.4M H100 GPU-hours; Llama 3.1 model card
    # (meta-llama/llama-models models/llama3_1/MODEL_CARD.md): 8B 1.46M, 70B 7.0M, 405B 30.84M.
    cards = {"Llama 3 8B": 1.3e6, "Llama 3 70B": 6.4e6, "Llama 3.1 8B": 1.46e6, "Llama 3.1 70B": 7.0e6,
             "Llama 3.1 405B": 30.84e6}  # fmt: skip
    rows = {f.quantity.split(" training")[0]: f for f in PUBLISHED if "GPU-hours (model card" in f.quantity}
    assert set(rows) == set(cards)
    for name, hours in cards.items():
        row = rows[name]
        assert row.low == pytest.approx(0.85 * hours) and row.high == pytest.approx(1.15 * hours)
        assert row.kind == "prediction" and "MODEL_CARD.md" in row.source
        settings = dict(row.overrides)
        assert settings["compute.step_model"] == "operators"  # stated, not the default's
        assert {key for key, _ in row.borrowed} == {"compute.efficiency", "failures"}
    assert dict(rows["Llama 3.1 405B"].overrides)["parallelism.gpus"] == 16384  # Llama 3 report Table 4
    assert dict(rows["Llama 3.1 405B"].overrides)["model.layers"] == 126  # Llama 3 report Table 3
    assert dict(rows["Llama 3 70B"].overrides)["model.ffn_hidden"] == 28672  # Table 3


def test_validate_says_what_the_answers_borrow(capsys):
    from mcsim.analysis.validation import Comparison, borrowed_lines

    lines = borrowed_lines([Comparison(f, 1.0, 0.5, 2.0) for f in PUBLISHED])
    assert any(line.startswith("borrowed: compute.efficiency:") and "[byterobust-dense]" in line for line in lines)
    assert any("Megatron-Core" in line and "Llama 3.1 405B training GPU-hours" in line for line in lines)
