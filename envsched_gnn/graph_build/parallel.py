"""Where a build's independent pieces of work run: in this process, in spawned worker
processes, or as Ray tasks on a cluster; results always come back in input order, at most
``window`` pieces in flight. Each piece is a pure function, so the graph is the same anywhere.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from envsched_gnn.validation import ConfigError
from envsched_gnn.workers import process_context

RAY_LOCAL = "local"
"""``--ray local``: start (or join) a Ray instance on this machine; else a cluster address."""
PACKAGE = str(Path(__file__).resolve().parents[1])
"""This package's folder, which a new Ray connection ships to the workers."""


def ordered_map(
    fn: Callable,
    items: Iterable[tuple],
    *,
    workers: int = 1,
    ray: str | None = None,
    window: int | None = None,
) -> Iterator[tuple[tuple, Any]]:
    """``(args, fn(*args))`` for every ``args`` of ``items``, in order: as Ray tasks (``ray``: an
    address or :data:`RAY_LOCAL`), in ``workers`` > 1 spawned processes, or here; ``window``
    calls in flight (default 4 per worker).
    """
    if ray is not None:
        yield from _ray_map(fn, items, ray, window)
        return
    if workers <= 1:
        for args in items:
            yield args, fn(*args)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=process_context()) as executor:
        yield from _windowed(lambda args: executor.submit(fn, *args), items, window or 4 * workers)


def _windowed(submit: Callable, items: Iterable[tuple], window: int, result=None) -> Iterator:
    pending: deque = deque()
    for args in items:
        pending.append((args, submit(args)))
        if len(pending) >= window:
            args, future = pending.popleft()
            yield args, (result(future) if result else future.result())
    while pending:
        args, future = pending.popleft()
        yield args, (result(future) if result else future.result())


def check_ray_address(address: str | None) -> None:
    """:class:`ConfigError` unless ``address`` (None: no Ray) is :data:`RAY_LOCAL`, ``auto``,
    ``ray://HOST:PORT`` or ``HOST:PORT``: a wrong form is refused before anything is built."""
    if address is None or address in (RAY_LOCAL, "auto"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"--ray {address!r}: expected {RAY_LOCAL}, auto, ray://HOST:PORT or HOST:PORT"
        )


def connect_ray(address: str) -> Any:
    """The ``ray`` module, initialised: an existing instance, else one at ``address``."""
    try:
        import ray
    except ImportError as error:
        raise ValueError(
            "--ray needs the 'ray' package: pip install 'envsched-gnn[ray]'"
        ) from error
    if not ray.is_initialized():
        ray.init(
            address=None if address == RAY_LOCAL else address,
            log_to_driver=False,
            runtime_env={"py_modules": [PACKAGE]},
        )
    return ray


def _ray_map(fn: Callable, items: Iterable[tuple], address: str, window: int | None) -> Iterator:
    ray = connect_ray(address)
    remote = ray.remote(num_cpus=1)(fn)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    yield from _windowed(lambda args: remote.remote(*args), items, window or 4 * cpus, ray.get)
