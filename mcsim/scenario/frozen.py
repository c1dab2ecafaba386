"""Frozen records hashed once: the configuration and its sections as cache keys.

A :class:`mcsim.scenario.config.Config` is the key of the caches that hold its workload,
checkpoint plan and kernel inputs (:func:`mcsim.scenario.config.cached_per_configuration`), and
its sections are the keys of the step model's cache (:func:`mcsim.model.workload.step_sections`).
A frozen dataclass recomputes its hash from every field at each lookup, recursively through the
sections: 9,146 hashes of configurations (69,146 with their sections) took 0.04 s of a
480-configuration sweep's 0.4 s around its kernel. :func:`hash_once` keeps the
value, which cannot change, on the instance.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

_Record = TypeVar("_Record")

# The instance attribute that holds the hash once computed (never a field: not compared, not copied).
_HASH = "_hash_once_value"


def hash_once(cls: type[_Record]) -> type[_Record]:
    """Class decorator for a frozen dataclass: its hash (that of the tuple of its hashed fields, as the
    dataclass computes it) is computed on first use and kept.

    The kept value is left out of pickles and copies (``__getstate__``): a string's hash differs
    between processes, so a record sent to another process computes its own.
    """
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"hash_once needs a frozen dataclass, not {cls!r}")
    hashed = [f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash)]
    values = operator.attrgetter(*hashed) if len(hashed) > 1 else (lambda self: tuple(getattr(self, n) for n in hashed))

    def __hash__(self: Any) -> int:
        try:
            return self.__dict__[_HASH]
        except KeyError:
            value = hash(values(self))
            object.__setattr__(self, _HASH, value)
            return value

    def __getstate__(self: Any) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name != _HASH}

    cls.__hash__ = __hash__  # type: ignore[method-assign]
    cls.__getstate__ = __getstate__  # type: ignore[method-assign]
    return cls


@dataclass_transform(frozen_default=True, kw_only_default=True)
def section(cls: type[_Record]) -> type[_Record]:
    """Class decorator of a table of a scenario file (:mod:`mcsim.scenario.schema`): a frozen dataclass
    of keyword-only fields, hashed once (:func:`hash_once`)."""
    return hash_once(dataclass(frozen=True, kw_only=True)(cls))
