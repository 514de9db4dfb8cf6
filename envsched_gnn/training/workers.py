"""Jobs in worker processes that share one context, their results in the jobs' order.

On a CPU machine one torch process with 2 threads is not 2x one with 1 thread (a rollout is
a sequence of small decode steps), so two jobs side by side, one thread each, finish sooner
than the same two one after the other. The shared context goes to each worker once, by its
initializer, not with every job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

_WORKER: tuple[Callable, Any] | None = None
"""This worker process's function and shared context (None in the parent)."""


def map_in_workers(
    fn: Callable, jobs: Iterable, shared: Any, workers: int, start_method: str = "spawn"
) -> Iterator:
    """``fn(job, shared)`` of every job, each yielded as soon as it and those before it are
    done; ``workers`` > 1 runs them in that many processes (``start_method``: ``fork`` or
    ``spawn``, which needs ``fn`` at module level), each with one torch thread."""
    if workers <= 1:
        for job in jobs:
            yield fn(job, shared)
        return
    context = get_context(start_method)
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
