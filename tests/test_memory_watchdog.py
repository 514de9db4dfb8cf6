"""The memory watchdog: it reads a process tree's memory and stops a run over its limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from envsched_gnn.memory_watchdog import (
    GIB,
    MemoryLimitExceeded,
    memory_watchdog,
    process_tree_rss,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_the_tree_holds_this_process_and_a_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        tree = process_tree_rss()
        assert os.getpid() in tree and child.pid in tree
        assert tree[os.getpid()][1] > 10 << 20  # this interpreter with numpy loaded
    finally:
        child.kill()
        child.wait()


def test_a_run_over_the_limit_stops_with_a_message_naming_the_processes() -> None:
    child = subprocess.Popen(  # a child that takes about 300 MB, as a server would
        [sys.executable, "-c", "import time; b = bytearray(300 << 20); time.sleep(60)"]
    )
    started = time.monotonic()
    sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a framework might set it
    try:
        limit = sum(rss for _, rss in process_tree_rss().values()) + (150 << 20)
        with (
            pytest.raises(MemoryLimitExceeded, match="over the limit") as stopped,
            memory_watchdog(limit, interval=0.1),
        ):
            while time.monotonic() - started < 20:  # the run, until interrupted
                time.sleep(0.05)
        assert f"pid {child.pid}" in str(stopped.value)
        assert time.monotonic() - started < 10
    finally:
        signal.signal(signal.SIGINT, sigint)
        child.kill()
        child.wait()


def test_a_run_under_the_limit_reports_its_peak() -> None:
    with memory_watchdog(64 * GIB, interval=0.05) as report:
        time.sleep(0.3)
    assert report.fired is None and 0 < report.peak < 64 * GIB


def test_graph_build_over_its_memory_limit_stops_with_the_message(tmp_path, capsys) -> None:
    from envsched_gnn.cli import main
    from tests.envs.handmade_pool import write_handmade_pool

    pool = write_handmade_pool(tmp_path / "pool")
    argv = ["graph", "build", "--pool", str(pool), "--store", str(tmp_path / "store")]
    assert main([*argv, "--max-memory-gib", "0.01"]) == 1  # this interpreter alone is more
    assert "over the limit of 0.01 GiB" in capsys.readouterr().err
