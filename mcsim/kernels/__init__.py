"""Numba kernels of mcsim, installed as ``mcsim.kernels``.

Kernels take and return plain NumPy arrays and scalars only; everything with
names, units and files lives in :mod:`mcsim`. Python code above reaches them
through :mod:`.interface` only (an import-linter contract). Modules:

- :mod:`.interface` -- what Python code above imports: the declarations, the entry points, the accounting.
- :mod:`.declarations` -- what crosses the boundary: RunParams, FailureClasses, the output columns, codes.
- :mod:`.accelerate` -- the one place where Numba options are set, and where compiled kernels are cached.
- :mod:`.rng` -- counter-based per-run random streams (SplitMix64-seeded xoshiro256**).
- :mod:`.normal` -- the standard normal quantile and the exact max-of-G lognormal sampler.
- :mod:`.gamma` -- regularized incomplete gamma functions and the inverse of Q, in log space.
- :mod:`.renewal` -- per-unit Weibull renewal processes of the failure classes.
- :mod:`.workspace` -- a run's state: the named slots of the workspace's arrays, the workspace, the outputs.
- :mod:`.conditions` -- what an iteration's time depends on: phase, job factor, episodes, degradation.
- :mod:`.checkpoints` -- checkpoints: wait, stall, the strategies' hooks, completed writes.
- :mod:`.recovery` -- failures and recovery: restore, spare nodes, recovery time by cause, restart.
- :mod:`.staffing` -- staffing: how long a recovery that needs a person waits for one (the calendar).
- :mod:`.scheduler` -- the batch system: job time limits, the wait in the queue, crashed jobs released late.
- :mod:`.blocks` -- training between events: blocks of iterations, fast mode's stretches of cycles.
- :mod:`.montecarlo` -- the run loop and its entry points: one simulated training run per random stream.
- :mod:`.accounting` -- the per-run accounting: energy by part, cost, carbon, ETTR and hours.
"""
