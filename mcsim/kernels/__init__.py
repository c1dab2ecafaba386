"""Numba kernels of mcsim, installed as ``mcsim.kernels``.

Kernels take and return plain NumPy arrays and scalars only; everything with
names, units and files lives in :mod:`mcsim`. Modules:

- :mod:`.accelerate` -- the one place where Numba options are set.
- :mod:`.rng` -- counter-based per-run random streams (SplitMix64-seeded xoshiro256**).
- :mod:`.normal` -- the standard normal quantile and the exact max-of-G lognormal sampler.
- :mod:`.renewal` -- per-unit Weibull renewal processes of the failure classes.
- :mod:`.montecarlo` -- the run loop: one simulated training run per random stream.
"""
