"""One part of a sweep (``mcsim run --shard i/n``): which sweep configurations a job simulates.

A batch system runs a large sweep as ``n`` independent jobs (a Slurm job array, say): job ``i``
simulates the sweep configurations whose flat index (C order over the sweep dims) is ``i`` modulo
``n``, every run and every parameter draw of each. Dealt round-robin, the parts take a similar share
of the cheap and the expensive configurations whatever the order of the sweep axes. The parts'
files are combined by :mod:`mcsim.engine.shards`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SHARDS = 100_000
_SHARD_TEXT = re.compile(r"^\s*(\d{1,6})\s*/\s*(\d{1,6})\s*$")


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count`` (0 <= index < count) of a sweep."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or isinstance(self.count, bool):  # True/2 would be a part's label
            raise ValueError(f"shard: expected whole numbers I and N, got {self.index!r}/{self.count!r}")
        if not (isinstance(self.count, int) and 1 <= self.count <= MAX_SHARDS):
            raise ValueError(f"shard: expected a number of parts from 1 to {MAX_SHARDS:,}, got {self.count!r}")
        if not (isinstance(self.index, int) and 0 <= self.index < self.count):
            raise ValueError(
                f"shard: expected a part index from 0 to {self.count - 1} for {self.count} parts, got {self.index!r}"
            )

    @property
    def label(self) -> str:
        """``"i/n"``, as ``--shard`` takes it and the part file records it."""
        return f"{self.index}/{self.count}"

    def holds(self, flat: int) -> bool:
        """Whether the sweep configuration of flat index ``flat`` belongs to this part."""
        return flat % self.count == self.index

    def flat_indices(self, configurations: int) -> range:
        """The flat indices this part holds of a sweep of ``configurations``, increasing."""
        return range(self.index, configurations, self.count)

    def check_sweep(self, configurations: int) -> None:
        """ValueError when this part would hold none of a sweep's ``configurations``, or when some part of its
        split would (more parts than configurations: those parts cannot be made, so this one could never be
        combined)."""
        if self.index >= configurations:
            raise ValueError(
                f"shard: part {self.label} holds no configuration: the sweep has {configurations} "
                f"(use at most {configurations} parts)"
            )
        if self.count > configurations:
            raise ValueError(
                f"shard: {self.count} parts of a sweep of {configurations} configurations: parts {configurations} "
                f"to {self.count - 1} would hold none, so the parts could never be combined "
                f"(use at most {configurations} parts)"
            )


def parse_shard(text: str) -> Shard:
    """The :class:`Shard` of ``"i/n"`` (``i`` from 0 to ``n - 1``); one-line ValueError otherwise."""
    match = _SHARD_TEXT.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"shard: expected I/N, part I (from 0) of N, such as 0/4, got {text!r}")
    return Shard(int(match.group(1)), int(match.group(2)))


def checked_shard(shard: object) -> Shard | None:
    """``shard`` when it is a :class:`Shard` or None; TypeError (one line) otherwise (a tuple or ``"i/n"`` text
    given to :func:`mcsim.simulate` or :func:`mcsim.load_scenario`)."""
    if shard is None or isinstance(shard, Shard):
        return shard
    raise TypeError(f"shard: expected mcsim.Shard(i, n) (part i of n) or None, got {shard!r}")
