"""What the keys of one configuration must satisfy together: the rules between keys that the schema's
per-key declarations (:mod:`mcsim.scenario.schema`) cannot state.

:func:`check_configuration` checks a validated configuration's sections, its GPU (the catalog entry
with the ``[hardware]`` figures) and its failure classes, in a fixed order; the first rule broken is
a :class:`~mcsim.errors.ScenarioError` naming the key (``failures.<class>.<key>`` for a class, as
sweep keys and ``--set`` name it) and what was expected.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from mcsim.errors import ScenarioError
from mcsim.scenario.catalog import GpuSpec
from mcsim.scenario.interruptions import FLEET_KINDS, FailureClass, SchedulerSection
from mcsim.scenario.schema import (
    CheckpointSection,
    ComputeSection,
    ModelSection,
    ParallelismSection,
    PhasesSection,
)
from mcsim.scenario.toml import format_number

# A failure class's name: it names the class in sweep keys, --set and [uncertain] keys.
FAILURE_NAME = re.compile(r"[A-Za-z0-9_-]+")
# The [model] keys of a mixture of experts other than ``experts``, with their dense defaults, and the
# [parallelism] keys that split experts or hide their all-to-alls (docs/model.md, "Mixture of experts").
MOE_MODEL_KEYS = (
    "experts_per_token",
    "shared_experts",
    "expert_ffn_hidden",
    "first_dense_layers",
    "moe_layer_interval",
    "router_balancing",
    "expert_imbalance",
    "expert_imbalance_sigma",
    "expert_capacity_factor",
)
MOE_PARALLEL_KEYS = ("ep", "expert_tp", "overlap_ep")
# How far model.params of a mixture of experts may be from the count its shape gives
# (:func:`parameter_counts`): the shape leaves out biases and approximates attention variants such as
# DeepSeek's multi-head latent attention (0.17 % of DeepSeek-V3's 671B, docs/model.md); a wrong
# expert count or width is off by far more.
PARAMS_SHAPE_TOLERANCE = 0.10


class ParameterCounts(NamedTuple):
    """A model's parameters as its shape counts them (``[model]``; docs/model.md, "Mixture of experts")."""

    shape_total: float  # tables + every layer
    tables: float  # embedding and output layer (one table when tied)
    dense_layer: float  # a layer with the dense MLP: attention, two norms, MLP
    moe_layer_shared: float  # a MoE layer without its routed experts: attention, norms, router, shared experts
    one_expert: float  # one routed expert's MLP
    moe_layers: int  # MoE layers of the model
    routed: float  # every routed expert of the model: moe_layers x experts x one_expert


def is_moe_layer(index: int, model: ModelSection) -> bool:
    """Whether layer ``index`` (0-based) is a MoE layer: past the first_dense_layers, every
    moe_layer_interval-th, starting with the first after them."""
    first = model.first_dense_layers
    return model.experts > 0 and index >= first and (index - first) % model.moe_layer_interval == 0


def parameter_counts(model: ModelSection) -> ParameterCounts:
    """The :class:`ParameterCounts` of ``model``'s shape.

    Attention ``h (h + 2 h kv/a) + h^2`` (grouped-query), two norms ``4h``, an MLP of width F
    ``h F (3 gated, 2 not)``, the router ``h E``; biases left out, as in the operator model.
    """
    h = float(model.hidden)
    heads = model.heads or max(1, model.hidden // 128)
    kv_width = h * (model.kv_heads or heads) / heads
    attention_norms = h * (h + 2.0 * kv_width) + h * h + 4.0 * h
    mlp = 3.0 if model.gated_mlp else 2.0
    dense_layer = attention_norms + h * float(model.ffn_hidden or 4 * model.hidden) * mlp
    one_expert = h * float(model.expert_ffn_hidden) * mlp
    moe_shared = attention_norms + h * model.experts + model.shared_experts * one_expert
    after_dense = model.layers - model.first_dense_layers
    moe_layers = -(-after_dense // model.moe_layer_interval) if model.experts and after_dense > 0 else 0
    tables = float(model.vocab) * h * (1.0 if model.tied_embeddings else 2.0)
    routed = moe_layers * model.experts * one_expert
    total = tables + (model.layers - moe_layers) * dense_layer + moe_layers * moe_shared + routed
    return ParameterCounts(total, tables, dense_layer, moe_shared, one_expert, moe_layers, routed)


def active_parameters(model: ModelSection) -> float:
    """Parameters one token uses: model.params less the routed experts it is not sent to,
    ``N - R (1 - k/E)`` with R the routed experts' parameters (N for a dense model)."""
    if model.experts == 0:
        return float(model.params)
    routed = parameter_counts(model).routed
    return float(model.params) - routed * (1.0 - model.experts_per_token / model.experts)


def check_configuration(
    sections: Mapping[str, Any], gpu: GpuSpec, failures: tuple[FailureClass, ...], where: str
) -> None:
    """Refuse a configuration whose keys contradict each other.

    Parameters
    ----------
    sections : mapping of str to section
        The validated sections, by table name (:data:`mcsim.scenario.schema.SECTIONS`).
    gpu : GpuSpec
        The GPU: the catalog entry with the ``[hardware]`` figures that are set.
    failures : tuple of FailureClass
        The validated failure classes.
    where : str
        The file (and the sweep point or draw), for the message.
    """
    _check_failure_names(failures, where)
    if gpu.freq_min_mhz > gpu.freq_max_mhz:
        raise ScenarioError(
            where,
            "hardware.freq_min_mhz",
            f"expected <= freq_max_mhz = {format_number(gpu.freq_max_mhz)}, got {format_number(gpu.freq_min_mhz)}",
        )
    _check_model(sections["model"], sections["compute"], where)
    _check_experts(sections["model"], sections["parallelism"], where)
    if gpu.idle_w > gpu.tdp_w:
        raise ScenarioError(
            where, "hardware.idle_w", f"expected <= tdp_w = {format_number(gpu.tdp_w)}, got {format_number(gpu.idle_w)}"
        )
    _check_phases(sections["phases"], where)
    restart = sections["restart"]
    if (restart.abandoned_minutes > 0 or restart.abandoned_sigma > 0) and restart.abandoned_share == 0:
        raise ScenarioError(
            where, "restart.abandoned_share", "expected > 0 where abandoned_minutes or abandoned_sigma is set (or 0)"
        )
    for fclass in failures:
        _check_failure_class(fclass, where)
    check_scheduler(sections["scheduler"], sections["checkpoint"], where)


def _check_failure_names(failures: tuple[FailureClass, ...], where: str) -> None:
    """Each class has a name of letters, digits, ``_`` and ``-``, distinct from the others'."""
    names = [f.name for f in failures]
    for i, fname in enumerate(names):
        if not FAILURE_NAME.fullmatch(fname):
            raise ScenarioError(where, f"failures[{i}].name", f"expected letters, digits, _ or -, got {fname!r}")
        if names.index(fname) != i:
            raise ScenarioError(where, f"failures[{i}].name", f"duplicate failure class name {fname!r}")


def _check_model(model: ModelSection, compute: ComputeSection, where: str) -> None:
    """Key/value heads divide the attention heads; the operators model's parameters outnumber the
    embedding and output tables; FP8 only in the operators model."""
    heads = model.heads or max(1, model.hidden // 128)
    if model.kv_heads and (model.kv_heads > heads or heads % model.kv_heads):
        raise ScenarioError(
            where,
            "model.kv_heads",
            f"expected a divisor of the {heads} attention heads (0: heads), got {model.kv_heads}",
        )
    tables = float(model.vocab) * float(model.hidden) * (1.0 if model.tied_embeddings else 2.0)
    if compute.step_model == "operators" and model.vocab > 0 and model.params <= tables:
        raise ScenarioError(
            where,
            "model.params",
            f"expected more than the {format_number(tables)} parameters of the embedding and output tables "
            f"(vocab x hidden, {'tied' if model.tied_embeddings else 'x 2 untied'}), got {format_number(model.params)}",
        )
    if compute.fp8 and compute.step_model != "operators":
        raise ScenarioError(
            where, "compute.fp8", 'expected false unless compute.step_model = "operators" (FP8 is modelled there only)'
        )


def _check_experts(model: ModelSection, par: ParallelismSection, where: str) -> None:
    """A dense model leaves the MoE keys at their defaults; a mixture of experts has a top-k within its
    experts, an expert width, an ep that divides the experts, and a model.params its shape agrees with."""
    if model.experts == 0:
        for table, section, keys in (("model", model, MOE_MODEL_KEYS), ("parallelism", par, MOE_PARALLEL_KEYS)):
            defaults = {f.name: f.default for f in dataclasses.fields(section)}
            for key in keys:
                if getattr(section, key) != defaults[key]:
                    raise ScenarioError(
                        where,
                        f"{table}.{key}",
                        f"expected {_default_text(defaults[key])} (its default) where model.experts = 0 "
                        "(a dense model)",
                    )
        return
    capacity, imbalance = model.expert_capacity_factor, model.expert_imbalance
    top_k = 1 <= model.experts_per_token <= model.experts
    # An expert gets each token at most once: its load is at most E / k times the mean (all T tokens of T k / E).
    most = model.experts / model.experts_per_token if top_k else math.inf
    rules = (
        ("model.experts_per_token", top_k, f"1 to experts = {model.experts}"),
        ("model.expert_ffn_hidden", model.expert_ffn_hidden > 0, "> 0 where model.experts > 0"),
        (
            "model.first_dense_layers",
            model.first_dense_layers < model.layers,
            f"< model.layers = {model.layers} (a mixture of experts has at least one MoE layer)",
        ),
        (
            "model.expert_imbalance",
            imbalance == 0 or 1 <= imbalance <= most,
            f">= 1 (0: default) and <= experts / experts_per_token = {format_number(most)} (the busiest expert "
            "gets each token at most once)",
        ),
        ("model.expert_capacity_factor", capacity == 0 or capacity >= 1, ">= 1 (0: no token dropping)"),
        ("parallelism.ep", model.experts % par.ep == 0, f"a divisor of model.experts = {model.experts}"),
    )
    for key, holds, expected in rules:
        if not holds:
            raise ScenarioError(where, key, f"expected {expected}, got {format_number(_value_of(key, model, par))}")
    counts = parameter_counts(model)
    if abs(model.params - counts.shape_total) > PARAMS_SHAPE_TOLERANCE * counts.shape_total:
        raise ScenarioError(
            where,
            "model.params",
            f"expected within {PARAMS_SHAPE_TOLERANCE:.0%} of the {format_number(counts.shape_total)} parameters "
            f"the shape counts ({counts.moe_layers} MoE layers of {model.experts} experts of "
            f"{format_number(counts.one_expert)}), got {format_number(model.params)}",
        )


def _default_text(value: Any) -> str:
    """A key's default as the message shows it: a number as :func:`format_number` writes it, text quoted."""
    return repr(value) if isinstance(value, str) else format_number(value)


def _value_of(key: str, model: ModelSection, par: ParallelismSection) -> float:
    section, name = key.split(".")
    return float(getattr(model if section == "model" else par, name))


def _check_phases(phases: PhasesSection, where: str) -> None:
    """The phases' lists agree: as many batches and sequence lengths (when given) as shares, summing to 1."""
    shares = phases.token_shares
    for key in ("global_batch", "seq_len"):
        given = len(getattr(phases, key))
        if given and given != len(shares):
            raise ScenarioError(
                where,
                f"phases.{key}",
                f"expected one value per phase ({len(shares)}, as phases.token_shares), got {given}",
            )
    if shares and abs(math.fsum(shares) - 1.0) > 1e-6:
        raise ScenarioError(
            where,
            "phases.token_shares",
            f"expected shares that sum to 1, got a sum of {format_number(math.fsum(shares))}",
        )


def _check_failure_class(fclass: FailureClass, where: str) -> None:
    """The keys of a failure class that only some scopes or kinds use (docs/model.md §3)."""
    prefix = f"failures.{fclass.name}"
    if fclass.domain_nodes > 1 and fclass.scope != "node":
        raise ScenarioError(
            where,
            f"{prefix}.domain_nodes",
            f"expected 1 for scope {fclass.scope!r}; domains are groups of nodes (scope node)",
        )
    if fclass.kind == "planned" and fclass.scope != "cluster":
        raise ScenarioError(
            where, f"{prefix}.scope", "expected 'cluster' for kind 'planned' (a planned stop stops the whole job)"
        )
    if fclass.kind == "hang" and fclass.detection_minutes == 0:
        raise ScenarioError(
            where,
            f"{prefix}.detection_minutes",
            "expected > 0 for kind 'hang' (the watchdog timeout; Megatron-LM's --distributed-timeout-minutes "
            "defaults to 10)",
        )
    if fclass.detection_minutes > 0 and fclass.kind != "hang":
        raise ScenarioError(where, f"{prefix}.detection_minutes", f"expected 0 for kind {fclass.kind!r} (hangs only)")
    if fclass.rollback_checkpoints > 0 and fclass.kind != "instability":
        raise ScenarioError(
            where, f"{prefix}.rollback_checkpoints", f"expected 0 for kind {fclass.kind!r} (instabilities only)"
        )
    if fclass.manual_hours > 0 and fclass.manual_share == 0:
        raise ScenarioError(
            where, f"{prefix}.manual_share", "expected > 0 where manual_hours is set (or manual_hours 0)"
        )
    _check_bad_replacements(fclass, where, prefix)


def _check_bad_replacements(fclass: FailureClass, where: str, prefix: str) -> None:
    """Bad replacements: GPUs and nodes replaced after a hardware failure (fail-stop or hang), with a life."""
    share, hours = fclass.bad_replacement_share, fclass.bad_replacement_hours
    if share > 0 and (fclass.scope == "cluster" or fclass.kind not in FLEET_KINDS):
        raise ScenarioError(
            where,
            f"{prefix}.bad_replacement_share",
            f"expected 0 for scope {fclass.scope!r}, kind {fclass.kind!r} (GPUs and nodes are replaced after "
            "fail-stop failures and hangs)",
        )
    if share > 0 and hours == 0:
        raise ScenarioError(where, f"{prefix}.bad_replacement_hours", "expected > 0 where bad_replacement_share is")
    if hours > 0 and share == 0:
        raise ScenarioError(
            where, f"{prefix}.bad_replacement_share", "expected > 0 where bad_replacement_hours is set (or hours 0)"
        )


def check_scheduler(scheduler: SchedulerSection, checkpoint: CheckpointSection, where: str) -> None:
    """``[scheduler]`` (docs/model.md §3 "The batch system"): a time limit longer than one checkpoint cycle
    where the interval is in minutes (an interval in iterations or from a rule is checked once the
    iteration time is known, :func:`mcsim.model.checkpointing.checkpoint_plan`'s caller), the queue
    law's overrides with a queue, the release time with its share."""
    interval = checkpoint.interval
    limit_min = scheduler.time_limit_hours * 60.0
    if limit_min > 0 and interval.kind == "minutes" and limit_min <= interval.value:
        raise ScenarioError(
            where,
            "scheduler.time_limit_hours",
            f"expected longer than one checkpoint cycle (checkpoint.interval = {format_number(interval.value)} "
            f"minutes and its write), got {format_number(scheduler.time_limit_hours)}",
        )
    for key in ("queue_wait_minutes", "queue_wait_sigma"):
        if scheduler.queue == "none" and getattr(scheduler, key) is not None:
            raise ScenarioError(where, f"scheduler.{key}", 'used only with queue = "reservation" or "shared"')
    share, hours = scheduler.release_share, scheduler.release_hours
    if share > 0 and hours == 0:
        raise ScenarioError(where, "scheduler.release_hours", "expected > 0 where release_share is")
    if (hours > 0 or scheduler.release_sigma > 0) and share == 0:
        raise ScenarioError(
            where, "scheduler.release_share", "expected > 0 where release_hours or release_sigma is set (or 0)"
        )
