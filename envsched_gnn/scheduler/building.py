"""A scheduler built for a caller outside this package's own step loop (an adapter to another
trainer, ``select``), with the same checks for every caller.

Before anything is built (:func:`check_request`, which a command calls before it reads its
files), :func:`build_scheduler` checks that:

- the name is a registered scheduler or ``NAME+ds`` (:func:`~.registry.check_scheduler_name`);
- a scheduler that over-samples (``NAME+ds``, ``dapo``) is one the caller can run; a caller that
  cannot says why (:attr:`Caller.over_sampling_refused`), and the error names the scheduler to
  use instead;
- ``sampling`` goes only to a ``NAME+ds`` (``dapo`` is pinned to verl's DAPO recipe);
- a scheduler that reads the tasks' operation patterns (the EnvSched family) gets them:
  ``operations``, or those of ``pool``'s tasks (``envs.abstract.operation_patterns``); one that
  needs them (``envsched_ops``) without either is an error that says how this caller gives
  them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envsched_gnn.envs.abstract import operation_patterns
from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.scheduler.base import Scheduler, SchedulerError
from envsched_gnn.scheduler.dynamic_sampling import SUFFIX, DynamicSamplingConfig
from envsched_gnn.scheduler.registry import (
    check_scheduler_name,
    make_scheduler,
    needs_operations,
    over_samples,
    reads_operations,
)
from envsched_gnn.validation import UsageError


class RequestError(SchedulerError, UsageError):
    """A scheduler this caller cannot build as asked (a usage error: the arguments' fault)."""


@dataclass(frozen=True)
class Caller:
    """Who builds a scheduler, and what it can run."""

    name: str
    """How errors name the caller, e.g. ``the TRL adapter``."""
    operations_from: str
    """How the caller's user gives the tasks' operation patterns, e.g. ``pool=POOL``."""
    over_sampling_refused: str | None = None
    """Why the caller cannot run a scheduler that over-samples; None: it can."""


def without_dynamic_sampling(name: str) -> str:
    """The scheduler that ``name`` puts behind dynamic sampling, in words for an error."""
    if name.endswith(SUFFIX):
        return repr(name.removesuffix(SUFFIX))
    return "a scheduler that does not over-sample ('random' for 'dapo')"


def check_over_sampling(caller: Caller, name: str, over_sampling: bool) -> None:
    """Refuse a scheduler ``name`` that over-samples where ``caller`` cannot run one."""
    if over_sampling and caller.over_sampling_refused is not None:
        raise RequestError(
            f"{caller.name} cannot run scheduler {name!r}, which over-samples (dynamic "
            f"sampling): {caller.over_sampling_refused}. Use {without_dynamic_sampling(name)} "
            f"here, or run {name!r} in `envsched-gnn train grpo`"
        )


def check_request(
    caller: Caller,
    name: str,
    *,
    has_operations: bool,
    sampling: DynamicSamplingConfig | None = None,
) -> None:
    """The checks of the module docstring, before any file is read (``has_operations``: the
    caller has the operation patterns or the pool)."""
    check_scheduler_name(name)
    check_over_sampling(caller, name, over_samples(name))
    if sampling is not None and not name.endswith(SUFFIX):
        raise RequestError(
            f"{caller.name}: a dynamic-sampling config was given for scheduler {name!r}, which "
            f"has none to set; it is for NAME{SUFFIX} schedulers ('dapo' is pinned to verl's "
            f"DAPO recipe: use 'random{SUFFIX}' to change it)"
        )
    if needs_operations(name) and not has_operations:
        raise RequestError(
            f"{caller.name}: scheduler {name!r} spreads its coverage stage over the tasks' "
            f"operation patterns and needs them: give {caller.operations_from}"
        )


def build_scheduler(
    caller: Caller,
    name: str,
    graph: TaskGraph,
    *,
    batch_size: int,
    seed: int = 0,
    pool: Pool | None = None,
    operations: Mapping[str, str] | None = None,
    sampling: DynamicSamplingConfig | None = None,
    **overrides,
) -> Scheduler:
    """The scheduler ``name`` on ``graph`` for ``caller``, after :func:`check_request`;
    ``overrides`` replace fields of its config (see ``make_scheduler``)."""
    has_operations = operations is not None or pool is not None
    check_request(caller, name, has_operations=has_operations, sampling=sampling)
    if reads_operations(name) and operations is None and pool is not None:
        operations = operation_patterns(pool.tasks)
    return make_scheduler(
        name,
        graph,
        batch_size=batch_size,
        seed=seed,
        operations=operations,
        sampling=sampling,
        **overrides,
    )
