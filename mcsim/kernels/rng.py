"""Counter-based random streams: SplitMix64-seeded xoshiro256**.

Every random number of a run comes from a stream identified by the triple
``(seed, run, stream)`` only: run ``r`` of a scenario draws the same numbers
whatever the thread count, the chunking of runs into calls, the machine the
chunk runs on, and the configuration of a sweep (common random numbers).
Separate streams serve separate purposes (per-iteration straggler factors, job
factors, each failure class), so that, e.g., the failure times of a class are
identical in every configuration that shares its units and law.

Seeding: ``key = mix(mix(mix(seed) ^ run) ^ stream)`` with ``mix`` the
SplitMix64 finaliser (Steele, Lea & Flood, OOPSLA 2014), then four successive
SplitMix64 outputs from ``key`` fill the xoshiro256** state (Blackman & Vigna,
"Scrambled linear pseudorandom number generators", ACM TOMS 2021), which is the
seeding procedure its authors recommend.

A state is a ``uint64`` array of length 4, mutated in place. Its arithmetic wraps modulo 2**64,
compiled or as plain Python (``NUMBA_DISABLE_JIT=1``, where NumPy's ``uint64`` scalars wrap the same
way), so both give the same numbers.
"""

from __future__ import annotations

import numpy as np

from .accelerate import JIT_DISABLED, jit_unmanaged

# Every constant a uint64, shift counts included: with a Python int operand Numba would promote the
# uint64 operand to a float.
_GOLDEN, _MIX1, _MIX2 = (np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))
_S30, _S27, _S31, _S17, _S45, _S7, _S57, _S11 = (np.uint64(s) for s in (30, 27, 31, 17, 45, 7, 57, 11))
_FIVE, _NINE = np.uint64(5), np.uint64(9)
_TWO_M53 = 2.0**-53


def _wrapping(func):
    """``func`` with NumPy's overflow warnings off when it runs as plain Python (``NUMBA_DISABLE_JIT=1``):
    its ``uint64`` scalars wrap modulo 2**64 as the compiled code does, but warn at every wrap. Compiled,
    ``func`` is returned as it is."""
    if JIT_DISABLED:
        return np.errstate(over="ignore")(func)
    return func


@jit_unmanaged
@_wrapping
def splitmix64_mix(z):
    """SplitMix64 finaliser of one ``uint64`` (bijective avalanche mix)."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@jit_unmanaged
@_wrapping
def seed_stream(state, seed, run, stream):
    """Fill ``state`` (uint64[4]) for stream ``stream`` of run ``run`` under ``seed``."""
    key = splitmix64_mix(np.uint64(seed) + _GOLDEN)
    key = splitmix64_mix((key ^ np.uint64(run)) + _GOLDEN)
    key = splitmix64_mix((key ^ np.uint64(stream)) + _GOLDEN)
    for i in range(4):
        key = key + _GOLDEN
        state[i] = splitmix64_mix(key)


@jit_unmanaged
def _rotl(x, k, k_complement):
    return (x << k) | (x >> k_complement)


@jit_unmanaged
@_wrapping
def next_u64(state):
    """Next 64-bit output of xoshiro256** and advance ``state`` in place."""
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = _rotl(s1 * _FIVE, _S7, _S57) * _NINE
    t = s1 << _S17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, _S45, np.uint64(19))
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return result


@jit_unmanaged
def uniform(state):
    """Uniform double in the open interval (0, 1): ``((x >> 11) + 0.5) / 2**53``.

    Never 0 or 1, so logarithms and quantiles of it are always finite; the
    smallest value is 2**-54.
    """
    return ((next_u64(state) >> _S11) + 0.5) * _TWO_M53
