"""The dask backend says nothing of its own (hostile finding of issue 42; failed before its fix)."""

from __future__ import annotations

import socket
import warnings

import pytest

from mcsim.engine.backends import DaskBackend

pytest.importorskip("dask.distributed")


def test_a_local_cluster_prints_no_port_warning_when_8787_is_taken():
    # Found: distributed's "Port 8787 is already in use" printed under --quiet (another dask dashboard running).
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass  # taken already: the case itself
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backend = DaskBackend(workers=1)
            backend.close()
        assert not [w for w in caught if "already in use" in str(w.message)]
    finally:
        holder.close()
