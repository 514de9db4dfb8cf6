"""The process listening on a port is found from /proc (the server behind a store's URI)."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from envsched_gnn.graph_store.listener import listening_pid, server_pid


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_the_listening_process_is_found_and_a_free_port_has_none():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        assert listening_pid(port) is None  # bound, not listening
        listener.listen()
        assert listening_pid(port) == os.getpid()
        assert server_pid(f"bolt://127.0.0.1:{port}") == os.getpid()
        assert server_pid(f"bolt://db.example:{port}") is None  # not this machine
    assert listening_pid(port) is None
