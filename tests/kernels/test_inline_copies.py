"""Numba's inlining without its two deep copies of IR built for the call (``accelerate._inline_without_copies``):
applied only to the Numba releases whose inliner was read, the same compiled results, and Numba's own
``copy`` module back in place after every inlining, also one that fails."""

from __future__ import annotations

import copy
import types

import numba
import pytest

from mcsim.kernels import accelerate


def _fake_inliner(calls: list) -> types.SimpleNamespace:
    """A stand-in for ``numba.core.inline_closurecall``: its ``inline_function`` records which ``copy`` it sees."""
    module = types.SimpleNamespace(copy=copy)

    class InlineWorker:
        def inline_function(self, caller_ir, block, i, function, arg_typs=None):
            calls.append(module.copy)
            if function == "fails":
                raise ValueError("inlining failed")
            return "inlined"

    module.InlineWorker = InlineWorker
    return module


@pytest.mark.parametrize(
    ("release", "applied"), [("0.58.1", False), ("0.59.0", True), ("0.68.1", True), ("0.69.0", False)]
)
def test_applied_only_to_the_releases_read(monkeypatch, release, applied):
    calls: list = []
    fake = _fake_inliner(calls)
    monkeypatch.setattr(accelerate, "_inliner", fake)
    monkeypatch.setattr(accelerate.numba, "__version__", release)
    assert accelerate._inline_without_copies() is applied
    assert fake.InlineWorker().inline_function(None, None, 0, "helper") == "inlined"
    assert calls == [accelerate._BlocksNotCopied if applied else copy]
    assert fake.copy is copy  # Numba's module back after the call
    if applied:
        with pytest.raises(ValueError, match="inlining failed"):
            fake.InlineWorker().inline_function(None, None, 0, "fails")
        assert fake.copy is copy
        assert accelerate._inline_without_copies() is False  # never wrapped twice


def test_only_ir_blocks_are_left_uncopied():
    loc = accelerate._numba_ir.Loc("kernel.py", 1)
    block = accelerate._numba_ir.Block(accelerate._numba_ir.Scope(None, loc=loc), loc=loc)
    assert accelerate._BlocksNotCopied.deepcopy(block) is block
    nested = {"values": [1.0, 2.0]}
    copied = accelerate._BlocksNotCopied.deepcopy(nested)
    assert copied == nested and copied["values"] is not nested["values"]


@numba.njit(inline="always")
def _leaf(x):
    return x * 2.0 + 1.0


@numba.njit(inline="always")
def _middle(x):
    return _leaf(x) - _leaf(x + 1.0)  # the same helper inlined twice: each copy of its IR must be its own


@numba.njit
def _outer(x):
    total = 0.0
    for i in range(3):
        total += _middle(x + i) * _leaf(x)
    return total


def test_nested_inlining_gives_the_closed_form():
    """A helper inlined at several sites, inside a helper itself inlined, compiled in this process (with the
    copies skipped when this Numba is in range): sum over i < 3 of (2(x+i)+1 - 2(x+i+1)-1)(2x+1) = -6(2x+1)."""
    if accelerate.JIT_DISABLED:
        pytest.skip("the kernels are plain Python here: nothing is inlined")
    in_range = (0, 59) <= tuple(int(p) for p in numba.__version__.split(".")[:2]) <= (0, 68)
    assert accelerate.INLINE_COPIES_SKIPPED is in_range
    assert [_outer(x) for x in (0.0, 1.5, -3.0)] == [-6.0 * (2.0 * x + 1.0) for x in (0.0, 1.5, -3.0)]
