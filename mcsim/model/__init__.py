"""Physics: what one configuration costs, deterministically (layer 2, above ``scenario``).

- ``workload``: the workload of candidate layouts (docs/model.md §2): iteration time, memory, MFU and
  feasibility per training phase, on arrays, and the :class:`~mcsim.model.workload.Workload` of one.
- ``layouts``: the candidate layouts and their parallel degrees as arrays, the records its parts share.
- ``operators``: what one layer, the embedding and the output layer compute and move (§2b).
- ``pipeline_stages``: which layers each pipeline GPU holds.
- ``device_rates``: what one operator or one collective costs on a GPU and its links (§2b).
- ``experts``: the mixture-of-experts layer: its operators, all-to-alls and load imbalance, and
  the operator step model's iteration of a mixture of experts.
- ``steptime``: the time of one iteration, the aggregate (§2) and the operator (§2b) step models.
- ``software``: the software profile a configuration names, for the models (the records are
  :mod:`mcsim.scenario.software`'s).
- ``memory``: memory per GPU, model state and activations.
- ``feasibility``: the feasibility checks of a layout, their codes and their reasons in words.
- ``strategies``: the checkpoint strategies, one record each.
- ``checkpointing``: checkpoint size, stall, interval (Young/Daly) and failure classes.
- ``reliability``: Daly's renewal estimate of a run's wall time under failures.
- ``restart``: the cost of a restart from its parts.
- ``spares``: a spare-node pool's first-order effect on the wall time.
- ``staffing``: the ``[staffing]`` calendar as the kernel's columns, and the waits for a person in closed form.
- ``stragglers``: the law of the slowest of G lognormal ranks.
- ``block_law``: the law of a short block's factor sum (fast mode).
- ``energy``: power by phase, energy, cost and carbon of a run.
- ``preparation``: each simulated configuration prepared once into what the kernel runs (stage 2 of
  ``simulate()``), one by one or a configuration's draws together.
- ``expected_runs``: candidate runs' first-order expected wall time, energy, cost and CO2 on arrays
  (Daly's renewal estimate with its corrections), for the planner's screen.
- ``run_estimate``: the expected size of one run and of a whole simulation, before it starts.
- ``interval_search``: the checkpoint interval that minimises an objective, searched on a grid.
- ``run_outputs``: the named outputs of one configuration, per run from its kernel rows and per
  configuration.
"""
