"""The one builder of the adapters' schedulers: the same checks for each adapter (a name,
operation patterns for ``envsched_ops``, a dynamic-sampling config only for ``NAME+ds``, an
over-sampling scheduler only where the framework can run one), and the two calls adapters
use where a framework filters (a refill of exactly n tasks, a generation batch observed)."""

from __future__ import annotations

import re

import pytest

from envsched_gnn.envs.abstract import operation_patterns
from envsched_gnn.integrations.schedulers import (
    ADAPTERS,
    adapter_scheduler,
    check_adapter_scheduler,
    exact_batch,
    observe_generation,
)
from envsched_gnn.scheduler.base import SchedulerError
from envsched_gnn.scheduler.dynamic_sampling import DynamicSampling, DynamicSamplingConfig
from envsched_gnn.scheduler.registry import make_scheduler
from tests.integrations.small_setup import small_graph, small_pool

B = 4


def test_an_unknown_name_or_adapter_is_refused_naming_what_exists():
    with pytest.raises(ValueError, match="unknown scheduler 'nope'.*envsched_spread"):
        adapter_scheduler("ray", "nope", small_graph(), batch_size=B)
    with pytest.raises(ValueError, match="unknown scheduler 'dapo\\+ds'"):
        adapter_scheduler("ray", "dapo+ds", small_graph(), batch_size=B)
    with pytest.raises(ValueError, match=re.escape("expected one of ['prime_rl', 'ray'")):
        adapter_scheduler("lightning", "random", small_graph(), batch_size=B)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_over_sampling_is_refused_only_where_the_framework_cannot_run_it(adapter):
    refused = ADAPTERS[adapter].over_sampling_refused is not None
    assert refused == (adapter == "trl")
    for name in ("dapo", "envsched_spread+ds"):
        if refused:
            with pytest.raises(SchedulerError, match="over-samples") as error:
                adapter_scheduler(adapter, name, small_graph(), batch_size=B)
            assert "the TRL adapter" in str(error.value) and "train grpo" in str(error.value)
            with pytest.raises(SchedulerError, match="over-samples"):
                check_adapter_scheduler(adapter, make_scheduler(name, small_graph(), batch_size=B))
        else:
            scheduler = adapter_scheduler(adapter, name, small_graph(), batch_size=B)
            assert scheduler.over_samples and check_adapter_scheduler(adapter, scheduler)
    plain = adapter_scheduler(adapter, "envsched", small_graph(), batch_size=B)
    assert check_adapter_scheduler(adapter, plain) is plain and not plain.over_samples


def test_a_sampling_config_reaches_the_composition_and_only_it():
    greso = DynamicSamplingConfig(generation="greso", max_oversample=1.5)
    scheduler = adapter_scheduler("ray", "random+ds", small_graph(), batch_size=B, sampling=greso)
    assert isinstance(scheduler, DynamicSampling) and scheduler.config == greso
    for name in ("random", "dapo"):
        with pytest.raises(SchedulerError, match=f"scheduler '{name}', which has none to set"):
            adapter_scheduler("ray", name, small_graph(), batch_size=B, sampling=greso)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_envsched_ops_gets_the_pools_operation_patterns_or_says_how_to_give_them(adapter):
    with pytest.raises(SchedulerError, match="operation patterns") as error:
        adapter_scheduler(adapter, "envsched_ops", small_graph(), batch_size=B)
    assert ADAPTERS[adapter].operations_from in str(error.value)
    patterns = operation_patterns(small_pool().tasks)
    from_pool = adapter_scheduler(
        adapter, "envsched_ops", small_graph(), batch_size=B, pool=small_pool()
    )
    given = adapter_scheduler(
        adapter, "envsched_ops", small_graph(), batch_size=B, operations=patterns
    )
    assert from_pool._operations == given._operations == patterns
    assert from_pool.next_batch(0) == given.next_batch(0)
    if ADAPTERS[adapter].over_sampling_refused is None:
        behind = adapter_scheduler(
            adapter, "envsched_ops+ds", small_graph(), batch_size=B, pool=small_pool()
        )
        assert behind.inner._operations == patterns


def test_a_refill_gets_exactly_the_tasks_asked_for():
    greso = DynamicSamplingConfig(generation="greso", max_oversample=2)
    scheduler = adapter_scheduler("verl", "random+ds", small_graph(), batch_size=B, sampling=greso)
    observe_generation(scheduler, 0, {t: [0.0, 0.0] for t in scheduler.next_batch(0)})
    assert scheduler.generation_size() == 8  # all zero-variance: the cap, 2B
    # a refill of 3 is 3 tasks, where the composition would cap at its own size
    assert len(exact_batch(scheduler, 1, 3)) == 3
    assert len(exact_batch(make_scheduler("random", small_graph(), batch_size=B), 1, 3)) == 3


def test_observing_a_generation_batch_feeds_the_compositions_share_and_observes_any_other():
    scheduler = adapter_scheduler("verl", "random+ds", small_graph(), batch_size=B)
    batch = scheduler.next_batch(0)
    rewards = {t: [0.0, 1.0] if i % 4 else [1.0, 1.0] for i, t in enumerate(batch)}
    observe_generation(scheduler, 0, rewards)
    assert scheduler.last_zero_share == 2 / 8
    assert {o.task_id for o in scheduler.log.observations()} == set(batch)
    plain = adapter_scheduler("verl", "random", small_graph(), batch_size=B)
    observe_generation(plain, 0, rewards)
    assert len(list(plain.log.observations())) == len(batch)
