"""How the environment runtime runs untrusted code: :class:`RuntimeConfig` and each worker's
:class:`SandboxConfig`; two environment variables set the defaults that ``--trust-pool`` and
``--sandbox-package`` change.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from envsched_gnn.observations import DEFAULT_REWARD, REWARDS, Reward
from envsched_gnn.validation import check_bounds, config_error

TRUST_POOL_VARIABLE = "ENVSCHED_TRUST_POOL"
"""``1`` makes ``RuntimeConfig.trust_pool`` default to True (what ``--trust-pool`` sets)."""
PACKAGES_VARIABLE = "ENVSCHED_SANDBOX_PACKAGES"
"""Comma-separated default of :attr:`SandboxConfig.packages` (what ``--sandbox-package`` sets)."""


@dataclass
class SandboxConfig:
    """Limits and contents of the sandbox of environment code (one per worker)."""

    max_processes: int = 64
    """Processes and threads of the sandbox's user (``RLIMIT_NPROC``, per sandbox on Linux
    >= 5.14); the worker's own two count."""
    max_open_files: int = 256
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    max_file_mb: int = 64
    """Largest file a process may write, in MiB (``RLIMIT_FSIZE``)."""
    cpu_limit_s: int = 3600
    """CPU seconds per process (``RLIMIT_CPU``); a worker past half of it is replaced (its
    episodes rebuilt) after the batch, so the limit stops runaway code, not long runs."""
    scratch_mb: int = 64
    """Size of the private writable ``/tmp`` (a tmpfs), in MiB."""
    packages: tuple[str, ...] = field(default_factory=lambda: default_packages())
    """Installed top-level packages environment code may import besides the standard
    library (mounted read-only); states may hold their classes. Default ``("mpmath",)``
    plus the names in ``ENVSCHED_SANDBOX_PACKAGES`` (``--sandbox-package NAME`` adds one
    name to them; repeatable)."""

    def __post_init__(self) -> None:
        names = ("max_processes", "max_open_files", "max_file_mb", "cpu_limit_s", "scratch_mb")
        check_bounds(self, integers=names, at_least=dict.fromkeys(names, 1))
        self.packages = tuple(self.packages)
        for index, name in enumerate(self.packages):
            if not name.isidentifier():
                raise config_error(self, f"packages[{index}]", name, "a top-level package name")


def packages_from_environment() -> list[str]:
    """The names in ``ENVSCHED_SANDBOX_PACKAGES``: comma-separated, spaces around a name
    ignored, empty entries skipped."""
    names = (part.strip() for part in os.environ.get(PACKAGES_VARIABLE, "").split(","))
    return [name for name in names if name]


def default_packages() -> tuple[str, ...]:
    return tuple(dict.fromkeys(["mpmath", *packages_from_environment()]))


def set_environment_defaults(trust_pool: bool, packages: Sequence[str]) -> None:
    """Makes ``trust_pool`` (when True) and ``packages`` (added to those already named) the
    defaults of every config built later, in this process and the processes it starts."""
    if trust_pool:
        os.environ[TRUST_POOL_VARIABLE] = "1"
    if packages:
        named = dict.fromkeys([*packages_from_environment(), *packages])
        os.environ[PACKAGES_VARIABLE] = ",".join(named)


def trust_pool_default() -> bool:
    return os.environ.get(TRUST_POOL_VARIABLE) == "1"


@dataclass
class RuntimeConfig:
    """How the runtime runs untrusted environment code, and how it scores an episode."""

    workers: int = 2
    """Sandboxed workers one environment's episodes are spread over, at most (the runtime's
    parallelism within an environment; different environments always get their own)."""
    call_timeout_s: float = 2.0
    """Wall-clock limit of one tool call, one instantiation, one check."""
    memory_limit_mb: int = 1024
    """Address-space limit of each worker process (``resource.RLIMIT_AS``)."""
    max_result_bytes: int = 1_000_000
    """Largest JSON text of one tool result; larger results become error results."""
    max_state_bytes: int = 16_000_000
    """Largest pickled initial plus final state of an episode sent to the scorer."""
    grace_s: float = 2.0
    """Extra seconds past an op's budget before the runtime kills a stuck worker."""
    max_sandboxes: int = 64
    """Sandboxes kept at most (idle ones beyond it are stopped, least recently used first;
    an environment with live episodes always has one)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    """Limits and contents of each worker's sandbox."""
    trust_pool: bool = field(default_factory=trust_pool_default)
    """Run the pool's code without a sandbox where the kernel refuses one (``--trust-pool``,
    or ``ENVSCHED_TRUST_POOL=1``); otherwise such a runtime refuses to start
    (:class:`SandboxUnavailable`). Default False."""
    reward: Reward = DEFAULT_REWARD
    """How an episode's checks become its reward: fraction (the share that pass, the paper's)
    or success (1 when every check passes, else 0, as tau-bench and BFCL score). Every reward
    of a run, its held-out evaluations and its history are of this one."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            positive=("call_timeout_s",),
            at_least={"workers": 1, "memory_limit_mb": 64, "max_sandboxes": 1},
        )
        if self.reward not in REWARDS:
            raise config_error(self, "reward", self.reward, f"one of {REWARDS}")
