"""Physics: what one configuration costs, deterministically (layer 2, above ``scenario``).

- ``workload``: iteration time, memory and MFU of a layout (docs/model.md §2), on arrays.
- ``strategies``: the checkpoint strategies, one record each.
- ``checkpointing``: checkpoint size, stall, interval (Young/Daly) and failure classes.
- ``stragglers``: the law of the slowest of G lognormal ranks.
- ``energy``: power by phase, energy, cost and carbon of a run.
- ``reliability``: Daly's renewal estimate of a run's wall time under failures.
"""
