"""Configurations and their sections hashed once, not at every use in a sweep (mcsim.scenario.frozen.hash_once)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from mcsim.scenario.config import Config, load_scenario
from mcsim.scenario.frozen import _HASH, hash_once
from mcsim.scenario.schema import CheckpointSection, ModelSection


def _fields_hash(record) -> int:
    """The hash a frozen dataclass computes: that of the tuple of its compared fields."""
    return hash(tuple(getattr(record, f.name) for f in dataclasses.fields(record) if f.compare))


def test_the_hash_is_the_dataclass_hash_and_kept():
    cfg = load_scenario("capacity-planning", runs=10, seed=0).base
    assert _HASH not in vars(cfg)
    assert hash(cfg) == _fields_hash(cfg)
    assert vars(cfg)[_HASH] == hash(cfg)
    assert hash(cfg.model) == _fields_hash(cfg.model) and vars(cfg.model)[_HASH] == hash(cfg.model)


def test_equal_records_hash_equal_and_a_changed_one_is_hashed_anew():
    a = load_scenario("capacity-planning", runs=10, seed=0).base
    b = load_scenario("capacity-planning", runs=10, seed=0).base
    hash(a)
    assert a == b and a is not b and hash(a) == hash(b)
    changed = dataclasses.replace(a, checkpoint=dataclasses.replace(a.checkpoint, strategy="in_memory"))
    assert _HASH not in vars(changed) and changed != a
    assert hash(changed) == _fields_hash(changed)
    assert {a: 1, changed: 2}[b] == 1  # usable as a cache key


def test_copies_and_pickles_compute_their_own_hash():
    # A string's hash differs between processes: a record sent to another one must not carry it.
    cfg = load_scenario("capacity-planning", runs=10, seed=0).base
    hash(cfg)
    for other in (pickle.loads(pickle.dumps(cfg)), copy.copy(cfg), copy.deepcopy(cfg)):
        assert other == cfg and _HASH not in vars(other)
        assert hash(other) == hash(cfg)
    assert _HASH not in vars(pickle.loads(pickle.dumps(cfg.model)))


def test_a_record_holding_arrays_stays_unhashable():
    # A configuration holding parameter draws as arrays is not hashable: the caches compute it anew.
    cfg = load_scenario("capacity-planning", runs=10, seed=0).base
    drawn = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, params=np.array([1e9, 2e9])))
    with pytest.raises(TypeError):
        hash(drawn)
    assert _HASH not in vars(drawn)


def test_only_frozen_dataclasses_are_accepted():
    @dataclasses.dataclass
    class Mutable:
        x: int = 0

    with pytest.raises(TypeError, match="frozen dataclass"):
        hash_once(Mutable)
    assert all(
        getattr(cls.__hash__, "__qualname__", "").startswith("hash_once")
        for cls in (Config, ModelSection, CheckpointSection)
    )
