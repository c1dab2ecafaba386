"""Per-unit Weibull renewal processes of the failure classes, O(log n) per event.

Each failure class ``c`` has ``units[c]`` independent units with Weibull(shape
k, scale lambda) lifetimes; a failed unit is replaced by a new one at the
moment it fails. At t = 0 the units are in the start state of their class
(``start[c]``, docs/model.md §4 "Failure processes"):

* ``START_NEW``: all new, first failure after a Weibull lifetime, cumulative
  hazard ``H(t) = (t/lambda)^k``;
* ``START_STATIONARY``: the renewal process in equilibrium (a cluster that has
  been running for long): the first failure follows the forward-recurrence
  (residual life) law ``P(R > t) = (1/mu) int_t^inf S(u) du = Q(1/k, (t/lambda)^k)``,
  cumulative hazard ``H(t) = -log Q(1/k, (t/lambda)^k)`` (``mcsim.kernels.gamma``);
* ``START_AGED``: every unit ``age_s[c]`` old and working: residual life
  given the age ``a``, ``H(t) = ((a+t)/lambda)^k - (a/lambda)^k``.

For k = 1 all three laws are the exponential one and use the same arithmetic
as ``START_NEW``. The superposition of all units' renewal processes is
simulated without touching every unit:

* Units that have never failed form a *pool*. Their first failure times, in
  increasing order, are generated lazily with Renyi's representation of
  exponential order statistics: the cumulative hazards ``H(T)`` of the first
  failure times of the ``m`` pooled units are iid Exp(1), so the next pooled
  failure has ``H_next = H_prev + E / m`` with ``E ~ Exp(1)``, at the time
  ``H^-1(H_next)`` (:func:`first_failure_s`). O(1) per event, no O(units)
  initialisation.
* A replaced unit's next failure time goes into one binary min-heap shared by
  all classes (entries: time, class). Its size is at most the number of
  failures so far. Its arrays belong to the caller (nothing here allocates,
  :func:`mcsim.kernels.accelerate.jit_unmanaged`): a push into a full heap
  returns -1, and the caller runs the run again with arrays twice as long.

Every draw of class ``c`` comes from that class's own random stream, so its
failure times do not depend on what the rest of the simulation consumed; the
start state changes only the transform of the draws, not the draws.

State (arrays the caller owns, reset at the start of every run):
``pool_left[c]`` (units never failed), ``pool_hazard[c]`` (cumulative hazard
of the last pooled failure), ``pool_next[c]`` (time of the next pooled
failure, inf when the pool is empty), ``heap_time``/``heap_class`` and the
heap size.
"""

from __future__ import annotations

import math

import numpy as np

from .accelerate import jit_inline, jit_unmanaged
from .declarations import START_AGED, START_NEW, START_STATIONARY
from .gamma import log_gammaincc_inv
from .rng import uniform


@jit_unmanaged
def weibull_lifetime(state, shape, scale_s):
    """One Weibull(shape, scale) lifetime in seconds by inversion."""
    return scale_s * (-math.log(uniform(state))) ** (1.0 / shape)


@jit_inline
def replacement_life_s(state, shape, scale_s, bad_share, bad_mean_s):
    """The life of the unit put in after a failure, s: bad with probability ``bad_share`` (an exponential
    life of mean ``bad_mean_s``), else a new unit's Weibull(shape, scale) lifetime. Draws the Bernoulli
    only when ``bad_share > 0``, so classes without bad replacements draw what they drew before."""
    if bad_share > 0.0 and uniform(state) < bad_share:
        return bad_mean_s * -math.log(uniform(state))
    return weibull_lifetime(state, shape, scale_s)


@jit_unmanaged
def first_failure_s(hazard, shape, scale_s, start, age_s):
    """Time of a pooled unit's first failure whose cumulative hazard is ``hazard`` (inverse of H).

    ``START_NEW`` (and k = 1 in every state): ``lambda H^(1/k)``. ``START_STATIONARY``:
    ``lambda x^(1/k)`` with ``Q(1/k, x) = e^-H``. ``START_AGED`` (age ``a``, ``A = (a/lambda)^k``):
    ``a ((1 + H/A)^(1/k) - 1)``, by ``expm1``/``log1p`` so that ``t << a`` keeps its digits.
    """
    if shape == 1.0 or start == START_NEW or (start == START_AGED and age_s == 0.0):
        return scale_s * hazard ** (1.0 / shape)
    if start == START_STATIONARY:
        return scale_s * math.exp(log_gammaincc_inv(1.0 / shape, hazard) / shape)
    log_ratio = math.log(hazard) - shape * math.log(age_s / scale_s)  # log(H / A)
    if log_ratio > 0.0:
        log1p_ratio = log_ratio + math.log1p(math.exp(-log_ratio))
    else:
        log1p_ratio = math.log1p(math.exp(log_ratio))
    growth = log1p_ratio / shape  # log((a + t) / a)
    if growth > 700.0:
        return math.exp(math.log(age_s) + growth)  # a is below t's rounding
    return age_s * math.expm1(growth)


@jit_inline
def _pool_advance(c, pool_left, pool_hazard, pool_next, shape, scale_s, start, age_s, streams):
    """Draw the next first-failure time of the never-failed units of class ``c``."""
    if pool_left[c] <= 0.0:
        pool_next[c] = np.inf
        return
    pool_hazard[c] += -math.log(uniform(streams[c])) / pool_left[c]
    pool_next[c] = first_failure_s(pool_hazard[c], shape[c], scale_s[c], start[c], age_s[c])


@jit_unmanaged
def init_failures(units, shape, scale_s, start, age_s, streams, pool_left, pool_hazard, pool_next):
    """Set the failure state of one run at t = 0 (units in their classes' start states), in place.

    ``pool_left``, ``pool_hazard``, ``pool_next`` (float64[n_classes]) are written; the heap
    starts empty (size 0).
    """
    for c in range(units.shape[0]):
        pool_left[c] = float(units[c])
        pool_hazard[c] = 0.0
        pool_next[c] = np.inf
        _pool_advance(c, pool_left, pool_hazard, pool_next, shape, scale_s, start, age_s, streams)


@jit_inline
def next_failure(pool_next, heap_time, heap_size):
    """Time and source of the earliest pending failure.

    Returns ``(time_s, source)``: ``source >= 0`` is the pool of that class,
    ``source == -1`` the top of the heap; ``(inf, -2)`` when none is pending.
    """
    best = np.inf
    source = -2
    for c in range(pool_next.shape[0]):
        if pool_next[c] < best:
            best = pool_next[c]
            source = c
    if heap_size > 0 and heap_time[0] < best:
        best = heap_time[0]
        source = -1
    return best, source


@jit_unmanaged
def _sift_down(heap_time, heap_class, size, i):
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        child = left
        if left + 1 < size and heap_time[left + 1] < heap_time[left]:
            child = left + 1
        if heap_time[child] >= heap_time[i]:
            return
        heap_time[i], heap_time[child] = heap_time[child], heap_time[i]
        heap_class[i], heap_class[child] = heap_class[child], heap_class[i]
        i = child


@jit_unmanaged
def _heap_push(heap_time, heap_class, size, time_s, c):
    if size == heap_time.shape[0]:
        return -1  # full: the caller grows the arrays and runs the run again
    i = size
    heap_time[i] = time_s
    heap_class[i] = c
    while i > 0:
        parent = (i - 1) // 2
        if heap_time[parent] <= heap_time[i]:
            break
        heap_time[i], heap_time[parent] = heap_time[parent], heap_time[i]
        heap_class[i], heap_class[parent] = heap_class[parent], heap_class[i]
        i = parent
    return size + 1


@jit_inline
def consume_failure(
    source,
    time_s,
    pool_left,
    pool_hazard,
    pool_next,
    heap_time,
    heap_class,
    heap_size,
    shape,
    scale_s,
    start,
    age_s,
    streams,
    bad_share,
    bad_mean_s,
):
    """Remove the failure ``(time_s, source)`` and schedule the replacement unit's (which is bad, and
    fails early, with probability ``bad_share``: the failing unit's class's, a scalar).

    Returns ``(class, heap_size)``; ``heap_size`` is -1 when the heap was full (the caller grows
    it and runs the run again).
    """
    if source >= 0:
        c = source
        pool_left[c] -= 1.0
        _pool_advance(c, pool_left, pool_hazard, pool_next, shape, scale_s, start, age_s, streams)
        replacement = time_s + replacement_life_s(streams[c], shape[c], scale_s[c], bad_share, bad_mean_s)
        return c, _heap_push(heap_time, heap_class, heap_size, replacement, c)
    c = heap_class[0]
    # Replace the top in place by the renewed unit and restore the heap order.
    heap_time[0] = time_s + replacement_life_s(streams[c], shape[c], scale_s[c], bad_share, bad_mean_s)
    _sift_down(heap_time, heap_class, heap_size, 0)
    return c, heap_size


@jit_inline
def pending_class(source, heap_class):
    """Class of the earliest pending failure from its ``source`` (:func:`next_failure`): the pool's class,
    the heap top's, or -1 when none is pending."""
    if source >= 0:
        return source
    if source == -1:
        return heap_class[0]
    return -1


@jit_unmanaged
def heap_push(heap_time, heap_class, size, time_s, c):
    """Push ``(time_s, c)``; returns the new size, or -1 when the arrays are full (nothing pushed)."""
    return _heap_push(heap_time, heap_class, size, time_s, c)


@jit_unmanaged
def heap_pop(heap_time, heap_class, size):
    """Remove the earliest entry; returns ``(time_s, class, size)``. ``size`` must be > 0."""
    time_s = heap_time[0]
    c = heap_class[0]
    size -= 1
    if size > 0:
        heap_time[0] = heap_time[size]
        heap_class[0] = heap_class[size]
        _sift_down(heap_time, heap_class, size, 0)
    return time_s, c, size
