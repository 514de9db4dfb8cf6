"""The prime-rl TaskSampler adapter against the real ``verifiers.v1`` Task / Episode / Trace
classes prime-rl passes (prime-rl itself is not on PyPI), with rewards from the runtime."""

from __future__ import annotations

import pytest
import verifiers.v1 as vf

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.integrations.prime_rl import EnvSchedTaskSampler
from envsched_gnn.integrations.schedulers import adapter_scheduler
from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig
from envsched_gnn.scheduler.registry import make_scheduler
from tests.integrations.small_setup import rollout_rewards, small_graph, small_pool

B, K = 4, 3


class PoolTask(vf.Task):
    """A pool task as a verifiers task: the instruction as prompt, the task id as ``id``."""


def taskset():
    return [PoolTask(vf.TaskData(id=t.task_id, prompt=t.task)) for t in small_pool().split("train")]


def group_of(task, rewards, broken=()):
    """The finalised group prime-rl hands ``observe``: one episode per rollout."""
    trace_task = vf.TraceTask(type="PoolTask", data=task.data, key=task.key, hash=task.hash)
    group = []
    for j, reward in enumerate(rewards):
        trace = vf.Trace(
            task=trace_task, agent=vf.AgentInfo(config=vf.AgentConfig()), ok=j not in broken
        )
        trace.record_reward("env", reward)
        group.append(vf.Episode(task=trace_task, traces=[trace]))
    return group


def drive(sampler, runtime, steps):
    """Take each step's B tasks, roll them out, observe each group; return the task ids."""
    taken = []
    for step in range(steps):
        tasks = [next(sampler) for _ in range(B)]
        ids = [t.data.id for t in tasks]
        rewards = rollout_rewards(runtime, ids, step, K)
        for task in tasks:
            sampler.observe(group_of(task, rewards[task.data.id]))
        taken.append(ids)
    return taken


def make(seed=0):
    scheduler = make_scheduler("envsched", small_graph(), batch_size=B, seed=seed)
    return EnvSchedTaskSampler(scheduler, taskset(), task_id_of=lambda task: task.data.id)


@pytest.fixture(scope="module")
def runtime():
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as rt:
        yield rt


def test_tasks_come_in_scheduler_batches_and_groups_are_observed(runtime):
    sampler = make()
    taken = drive(sampler, runtime, 3)
    replica = make_scheduler("envsched", small_graph(), batch_size=B, seed=0)
    for step, ids in enumerate(taken):
        assert replica.next_batch(step) == ids
        replica.observe(step, rollout_rewards(runtime, ids, step, K))
    logged = {(o.task_id, o.step, o.rewards) for o in sampler.scheduler.log.observations()}
    assert logged == {(o.task_id, o.step, o.rewards) for o in replica.log.observations()}
    assert "batch/mean_reward_variance" in sampler.metrics()


def test_errored_traces_are_left_out(runtime):
    sampler = make()
    task = next(sampler)
    sampler.observe(group_of(task, [1.0, 0.0, 0.5], broken=(1,)))
    (observation,) = sampler.scheduler.log.observations()
    assert observation.rewards == (1.0, 0.5) and observation.step == 0
    with pytest.raises(ValueError, match="none of it is outstanding"):
        sampler.observe(group_of(task, [1.0]))


def test_a_group_left_with_one_reward_is_no_evidence_not_an_error(runtime):
    sampler = make()
    task = next(sampler)
    sampler.observe(group_of(task, [1.0, 0.0], broken=(1,)))
    assert list(sampler.scheduler.log.observations()) == []
    with pytest.raises(ValueError, match="none of it is outstanding"):  # the group was taken
        sampler.observe(group_of(task, [1.0, 0.0]))


def test_state_round_trip_continues_identically(runtime):
    first = make()
    drive(first, runtime, 2)
    half = [next(first) for _ in range(2)]  # mid-step: two of step 2's tasks handed out
    restored = make()
    restored.load_state_dict(first.state_dict())
    assert [next(restored).data.id for _ in range(B + 2)] == [
        next(first).data.id for _ in range(B + 2)
    ]
    assert len(half) == 2 and restored.step == first.step == 3


def test_generation_batches_are_handed_out_and_every_group_observed(runtime):
    """Behind dynamic sampling prime-rl's gates filter: the sampler hands out the scheduler's
    generation batches, sized by GRESO's rule from the share of the last batch all back, and
    observes every group, the zero-variance ones too."""
    greso = DynamicSamplingConfig(generation="greso", max_oversample=3)
    options = {"batch_size": B, "pool": small_pool(), "sampling": greso}
    scheduler = adapter_scheduler("prime_rl", "envsched_ops+ds", small_graph(), **options)
    sampler = EnvSchedTaskSampler(scheduler, taskset(), task_id_of=lambda task: task.data.id)
    replica = adapter_scheduler("prime_rl", "envsched_ops+ds", small_graph(), **options)
    sizes = []
    for step in range(3):
        expected = replica.next_batch(step)
        tasks = [next(sampler) for _ in expected]
        assert [task.data.id for task in tasks] == expected
        rewards = rollout_rewards(runtime, expected, step, K)
        for task in reversed(tasks[1:]):  # groups finish in any order
            sampler.observe(group_of(task, rewards[task.data.id]))
        assert scheduler.last_zero_share == replica.last_zero_share  # one group still out
        sampler.observe(group_of(tasks[0], rewards[tasks[0].data.id]))
        replica.observe_generation(step, rewards)
        assert scheduler.last_zero_share == replica.last_zero_share is not None
        sizes.append(len(expected))
    assert sizes[0] == 3 * B and len(set(sizes)) > 1, sizes  # the share sized the later ones
    logged = {(o.task_id, o.step, o.rewards) for o in scheduler.log.observations()}
    assert logged == {(o.task_id, o.step, o.rewards) for o in replica.log.observations()}
    assert len(logged) == sum(sizes)
