"""Checkpoint strategies: one record per strategy, the only place that knows them by name.

A :class:`Strategy` holds everything mcsim needs to know about a strategy
outside the kernel (docs/model.md §3 states what each computes):

* ``kernel_hook``: which of the kernel's checkpoint hooks runs it
  (a kernel hook ``STRATEGY_<HOOK>`` of :mod:`mcsim.kernels.interface`): ``"sync"`` (durable when the
  stall ends), ``"async"`` (durable a background write after the stall; the
  next checkpoint waits for it) or ``"in_memory"`` (a snapshot replicated to a
  peer, persisted to storage every n-th time);
* ``timings``: its stall, background write, replication and memory load from
  the configuration's transfer times (:class:`Transfers`);
* ``infeasible``: why a configuration cannot use it (None if it can);
* ``peer_copies_per_checkpoint``: snapshot copies sent over the inter-node link
  per checkpoint (energy).

A new strategy that reuses a kernel hook is one more entry in
:data:`STRATEGIES` (plus its description in docs/model.md and a test); the
scenario schema, the plan, the kernel parameters, feasibility and energy all
read this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from mcsim.kernels import interface as kernel
from mcsim.scenario.schema import CHECKPOINT_STRATEGIES

if TYPE_CHECKING:  # only for annotations
    from mcsim.scenario.config import Config

#: A number, or an array of them over candidates or draws (the vectorised equations of
#: :mod:`mcsim.model` take and give either; GPU counts are integer arrays, hence any dtype).
FloatOrArray = float | npt.NDArray[Any]


class Transfers(NamedTuple):
    """Transfer times of one checkpoint of a configuration, s."""

    storage_write_s: FloatOrArray  # S / W: the whole checkpoint to storage
    copy_s: FloatOrArray  # each GPU's shard to host memory (S/G / d2h_gbps)
    peer_s: FloatOrArray  # one node's shard to its peer node over the inter-node links


class Timings(NamedTuple):
    """What a strategy costs per checkpoint and recovery, s."""

    stall_s: FloatOrArray  # training stands still per checkpoint
    write_s: FloatOrArray  # storage durability after the stall (0: durable when the stall ends)
    replicate_s: FloatOrArray  # in-memory snapshot restorable after the stall (0 if none)
    load_memory_s: FloatOrArray  # load of a snapshot from the peer's memory (0 if none)


@dataclass(frozen=True)
class Strategy:
    """One checkpoint strategy (see the module docstring)."""

    name: str
    kernel_hook: str
    timings: Callable[[Config, FloatOrArray, Transfers], Timings]  # (cfg, iteration_time_s, transfers)
    infeasible: Callable[[Config], str | None] = lambda cfg: None
    peer_copies_per_checkpoint: float = 0.0

    @property
    def kernel_code(self) -> int:
        """The kernel's ``STRATEGY_*`` code of :attr:`kernel_hook`."""
        return getattr(kernel, "STRATEGY_" + self.kernel_hook.upper())


def _sync(cfg: Config, iteration_time_s: FloatOrArray, tr: Transfers) -> Timings:
    return Timings(tr.storage_write_s, 0.0, 0.0, 0.0)


def _async(cfg: Config, iteration_time_s: FloatOrArray, tr: Transfers) -> Timings:
    return Timings(tr.copy_s + cfg.checkpoint.async_overhead_s, tr.storage_write_s, 0.0, 0.0)


def _gockpt(cfg: Config, iteration_time_s: FloatOrArray, tr: Transfers) -> Timings:
    # GoCkpt (arXiv 2511.07035): the copy is spread over several iterations and made
    # consistent on the CPU; training stalls a fraction of async's stall.
    ck = cfg.checkpoint
    overlap = ck.gockpt_overlap_iterations or np.ceil(tr.copy_s / iteration_time_s) + 1
    stall = ck.gockpt_stall_fraction * (tr.copy_s + ck.async_overhead_s)
    return Timings(stall, overlap * iteration_time_s + tr.storage_write_s, 0.0, 0.0)


def _in_memory(cfg: Config, iteration_time_s: FloatOrArray, tr: Transfers) -> Timings:
    # Gemini (SOSP'23): snapshot to CPU memory, replica on a peer node.
    return Timings(tr.copy_s, tr.storage_write_s, tr.peer_s, tr.peer_s)


def _needs_a_peer(cfg: Config) -> str | None:
    if cfg.parallelism.gpus // cfg.hardware.gpus_per_node < 2:
        return "in_memory needs at least 2 nodes (a peer for the replica)"
    return None


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("sync", "sync", _sync),
        Strategy("async", "async", _async),
        Strategy("gockpt", "async", _gockpt),
        Strategy("in_memory", "in_memory", _in_memory, infeasible=_needs_a_peer, peer_copies_per_checkpoint=1.0),
    )
}

if tuple(STRATEGIES) != CHECKPOINT_STRATEGIES:  # pragma: no cover (a developer's mistake, caught at import)
    raise ImportError(f"mcsim.model.strategies defines {tuple(STRATEGIES)}, the schema accepts {CHECKPOINT_STRATEGIES}")
