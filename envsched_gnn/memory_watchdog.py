"""A watchdog on the resident memory of this process and every process it started: a thread
polls ``/proc``; over the limit the main thread gets ``SIGUSR1`` and raises
:class:`MemoryLimitExceeded`; still over ``grace`` seconds later, the run is killed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.validation import ConfigError, UserError

GIB = 1 << 30


class MemoryLimitExceeded(UserError, RuntimeError):
    """The processes of a run held more resident memory than its limit."""


def machine_memory() -> int:
    """Bytes of physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_limit(gib: float | None) -> int:
    """Bytes of a ``--max-memory-gib`` setting: ``gib`` GiB, or (None) 90% of the machine's."""
    if gib is not None and gib <= 0:
        raise ConfigError(f"--max-memory-gib must be positive, got {gib}")
    return int(gib * GIB if gib else 0.9 * machine_memory())


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with suppress(OSError):
            found += [int(child) for child in task.read_text().split()]
    return found


def _rss(pid: int) -> tuple[str, int]:
    """A process's name and resident bytes (0 when it is gone)."""
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
    except (OSError, ValueError):
        return "?", 0
    rss = fields.get("VmRSS", "0 kB").split()
    return fields.get("Name", "?").strip(), int(rss[0]) * 1024 if rss else 0


def process_tree_rss(root: int | None = None) -> dict[int, tuple[str, int]]:
    """``pid -> (name, resident bytes)`` of ``root`` (default: this process) and every
    process below it."""
    root = os.getpid() if root is None else root
    tree: dict[int, tuple[str, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree[pid] = _rss(pid)
            todo += _children(pid)
    return tree


@contextmanager
def beside(work: Callable[[threading.Event], None], name: str) -> Iterator[None]:
    """Run ``work(stop)`` in a daemon thread while the block runs; at its end ``stop`` is set
    and the thread joined (``work`` returns once it sees ``stop``)."""
    stop = threading.Event()
    thread = threading.Thread(target=work, args=(stop,), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@dataclass
class WatchdogReport:
    """What the watchdog saw: the limit, the peak of the whole tree and, once it fired, why."""

    limit: int
    peak: int = 0
    fired: str | None = None


def _describe(tree: dict[int, tuple[str, int]]) -> str:
    rows = sorted(tree.items(), key=lambda item: -item[1][1])
    return ", ".join(f"{name} (pid {pid}) {rss / GIB:.2f} GiB" for pid, (name, rss) in rows[:6])


@contextmanager
def memory_watchdog(
    limit: int, *, interval: float = 0.5, grace: float = 30.0
) -> Iterator[WatchdogReport]:
    """Raise :class:`MemoryLimitExceeded` when the run and its children pass ``limit`` bytes."""
    report = WatchdogReport(limit)
    main = threading.main_thread().ident
    in_main = threading.current_thread() is threading.main_thread()

    def interrupt(signum, frame) -> None:
        raise MemoryLimitExceeded(report.fired)

    def watch(stop: threading.Event) -> None:
        while not stop.wait(interval):
            tree = process_tree_rss()
            total = sum(rss for _, rss in tree.values())
            report.peak = max(report.peak, total)
            if total > limit and report.fired is None:
                report.fired = (
                    f"stopped: the run's processes held {total / GIB:.2f} GiB, over the limit "
                    f"of {limit / GIB:.2f} GiB ({_describe(tree)})"
                )
                print(report.fired, file=sys.stderr, flush=True)
                if in_main:
                    signal.pthread_kill(main, signal.SIGUSR1)
                if stop.wait(grace):
                    return
                for pid in sorted(tree, reverse=True):  # still running: children, then this
                    if pid != os.getpid():
                        with suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                os._exit(137)

    previous = signal.signal(signal.SIGUSR1, interrupt) if in_main else None
    try:
        with beside(watch, "memory-watchdog"):
            yield report
    finally:
        if in_main:
            signal.signal(signal.SIGUSR1, previous)
