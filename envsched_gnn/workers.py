"""Worker processes: the one start-method rule (:func:`process_context`), and jobs that share
one context, sent once per worker by its initializer. On CPU two one-thread jobs side by
side beat one two-thread job after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from multiprocessing.context import BaseContext
from typing import Any

_WORKER: tuple[Callable, Any] | None = None
"""This worker process's function and shared context (None in the parent)."""


def process_context() -> BaseContext:
    """The multiprocessing context every worker process is started from: ``spawn``, never ``fork``
    (a child forked after torch started its thread pools can hang on their locks).
    """
    return get_context("spawn")


def map_in_workers(fn: Callable, jobs: Iterable, shared: Any, workers: int) -> Iterator:
    """``fn(job, shared)`` of every job, yielded in order; ``workers`` > 1 runs them in processes of
    :func:`process_context` (``fn`` at module level), one torch thread each.
    """
    if workers <= 1:
        for job in jobs:
            yield fn(job, shared)
        return
    context = process_context()
    with ProcessPoolExecutor(workers, context, _init_worker, (fn, shared)) as executor:
        yield from executor.map(_run, jobs)


def _init_worker(fn: Callable, shared: Any) -> None:
    import torch

    global _WORKER
    torch.set_num_threads(1)
    _WORKER = (fn, shared)


def _run(job: Any) -> Any:
    assert _WORKER is not None, "worker started without its context"
    fn, shared = _WORKER
    return fn(job, shared)
