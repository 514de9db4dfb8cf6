"""Schedulers for the adapters: one builder, the same checks, dynamic sampling the same way.

:func:`adapter_scheduler` builds a scheduler for an adapter by name (the checks of
:mod:`envsched_gnn.scheduler.building`: the name, operation patterns for ``envsched_ops`` from
``pool=`` or ``operations=``, a ``DynamicSamplingConfig`` only for ``NAME+ds``), and
:func:`check_adapter_scheduler` checks one built elsewhere. What each adapter does with a
scheduler that over-samples (``NAME+ds``, ``dapo``):

======== ============================================================================
trl      refused: ``GRPOTrainer`` generates exactly B x K completions per round and trains
         on all of them, so it has no generation batch to filter.
verl     verl filters (``algorithm.filter_groups``, required): the scheduler picks each
         step's first generation batch (its size by the composition's rule), verl drops the
         zero-variance groups and refills with tasks the wrapped scheduler picks; every group
         is observed.
ray      the composition filters: ``filter_groups`` through the actor, the selection
         (groups to train, groups pending) returned to every rollout process.
prime_rl prime-rl filters (its admission gates, e.g. ``AdvantageRangeGate``): the sampler
         hands out the scheduler's generation batches and observes every group.
======== ============================================================================

Where a framework filters, :func:`observe_generation` records a generation batch once every
group is back, so that the composition sizes the next from its zero-variance share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envsched_gnn.scheduler.base import Scheduler
from envsched_gnn.scheduler.building import Caller, build_scheduler, check_over_sampling
from envsched_gnn.scheduler.dynamic_sampling import DynamicSampling

ADAPTERS: dict[str, Caller] = {
    "trl": Caller(
        "the TRL adapter",
        "pool=POOL (or operations=operation_patterns(pool.tasks))",
        over_sampling_refused=(
            "TRL's GRPOTrainer generates exactly B x K completions per round and trains on all "
            "of them, so there is no generation batch to filter"
        ),
    ),
    "verl": Caller("the verl adapter", "+envsched.pool=DIR (the pool the graph was built from)"),
    "ray": Caller("the Ray scheduler actor", "pool=POOL or operations={task_id: pattern}"),
    "prime_rl": Caller(
        "the prime-rl adapter", "pool=POOL (or operations=operation_patterns(pool.tasks))"
    ),
}
"""The adapters and what each supports (module docstring)."""


def _caller(adapter: str) -> Caller:
    try:
        return ADAPTERS[adapter]
    except KeyError:
        expected = sorted(ADAPTERS)
        raise ValueError(f"unknown adapter {adapter!r}, expected one of {expected}") from None


def adapter_scheduler(adapter: str, name: str, graph: Any, **options: Any) -> Scheduler:
    """The scheduler ``name`` on ``graph`` for ``adapter`` (a key of :data:`ADAPTERS`);
    ``options``: ``batch_size`` (B, required), ``seed``, ``pool``, ``operations``,
    ``sampling`` and fields of the scheduler's config (``scheduler.building.build_scheduler``)."""
    return build_scheduler(_caller(adapter), name, graph, **options)


def check_adapter_scheduler(adapter: str, scheduler: Scheduler) -> Scheduler:
    """``scheduler``, built elsewhere, if ``adapter`` can run it (an error naming what to use
    instead otherwise)."""
    check_over_sampling(_caller(adapter), scheduler.name, scheduler.over_samples)
    return scheduler


def observe_generation(
    scheduler: Scheduler, step: int, rewards: Mapping[str, Sequence[float]]
) -> None:
    """Observe generation batch ``step`` (``{task_id: [r_1..r_K]}``, every group back) whose
    groups a framework filtered: the composition also takes its zero-variance share for the
    next generation size; any other scheduler just observes."""
    if isinstance(scheduler, DynamicSampling):
        scheduler.observe_generation(step, rewards)
    else:
        scheduler.observe(step, rewards)


def exact_batch(scheduler: Scheduler, step: int, size: int) -> list[str]:
    """Exactly ``size`` tasks for ``step``, as a framework's refill asks: a composition's
    wrapped scheduler picks them (the composition's own rule may choose fewer)."""
    chooser = scheduler.inner if isinstance(scheduler, DynamicSampling) else scheduler
    return chooser.next_batch(step, size)
