"""Ray on a local instance (``ray.init(num_cpus=2)``, loopback only): the scheduler actor
shared by two rollout processes (also behind dynamic sampling, filtering through the actor),
its idempotent observations and its restart from a checkpoint, and environment actors (their
workers in the runtime's sandbox, which dies with them) replaced after a kill with their
episodes replayed, warning about unscorable states as the local runtime does."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import ray

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.integrations.ray import EnvSchedActor, RayEnvRuntime, RayRuntimeConfig
from envsched_gnn.integrations.schedulers import adapter_scheduler
from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig
from envsched_gnn.scheduler.registry import make_scheduler
from tests.envs.test_state_loading import REFUSED, refusal_pool
from tests.integrations.small_setup import rollout_rewards, small_graph, small_pool

pytestmark = pytest.mark.slow

ROOT = str(Path(__file__).resolve().parents[2])
B, K, STEPS = 4, 3, 4


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}},
    )
    yield
    ray.shutdown()


@ray.remote(num_cpus=1)
def rollout_process(scheduler, part, parts, steps, k):
    """One rollout process: every step, the shared batch, its share rolled out and observed."""
    seen = []
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        for step in range(steps):
            batch = ray.get(scheduler.next_batch.remote(step))
            seen.append(batch)
            rewards = rollout_rewards(runtime, batch[part::parts], step, k)
            ray.get(scheduler.observe.remote(step, rewards))
    return seen


def single_process_run(steps):
    scheduler = make_scheduler("envsched", small_graph(), batch_size=B, seed=0)
    batches = []
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        for step in range(steps):
            batches.append(scheduler.next_batch(step))
            scheduler.observe(step, rollout_rewards(runtime, batches[-1], step, K))
    return batches, scheduler


def test_two_rollout_processes_share_one_actor_and_get_single_process_batches(cluster):
    expected, single = single_process_run(STEPS)
    actor = EnvSchedActor.remote("envsched", small_graph(), batch_size=B, seed=0)
    seen = ray.get([rollout_process.remote(actor, p, 2, STEPS, K) for p in range(2)])
    assert seen[0] == seen[1] == expected
    state = ray.get(actor.state_dict.remote())
    rows = {
        (o["task_id"], o["step"], tuple(o["rewards"]))
        for o in state["scheduler"]["log"]["observations"]
    }
    assert rows == {(o.task_id, o.step, o.rewards) for o in single.log.observations()}
    assert len(rows) == STEPS * B


def test_observations_are_idempotent_by_task_and_step(cluster):
    actor = EnvSchedActor.remote("envsched", small_graph(), batch_size=B, seed=0)
    batch = ray.get(actor.next_batch.remote(0))
    rewards = {task: [0.0, 1.0, 1.0] for task in batch}
    assert ray.get(actor.observe.remote(0, rewards)) == B
    before = ray.get(actor.state_dict.remote())
    assert ray.get(actor.observe.remote(0, rewards)) == 0  # a retried call
    assert ray.get(actor.state_dict.remote()) == before
    with pytest.raises(ray.exceptions.RayTaskError, match="refusing different rewards"):
        ray.get(actor.observe.remote(0, {batch[0]: [1.0, 1.0, 1.0]}))
    assert ray.get(actor.state_dict.remote()) == before
    assert ray.get(actor.next_batch.remote(1)) == ray.get(actor.next_batch.remote(1))


def test_restarted_scheduler_actor_continues_from_its_checkpoint(cluster, tmp_path):
    expected, _ = single_process_run(2)
    actor = EnvSchedActor.options(max_restarts=-1, max_task_retries=-1).remote(
        "envsched", small_graph(), batch_size=B, seed=0, checkpoint_path=str(tmp_path / "s.json")
    )
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        batch = ray.get(actor.next_batch.remote(0))
        ray.get(actor.observe.remote(0, rollout_rewards(runtime, batch, 0, K)))
    pid = ray.get(actor.pid.remote())
    os.kill(pid, signal.SIGKILL)
    assert ray.get(actor.next_batch.remote(1)) == expected[1]
    assert ray.get(actor.pid.remote()) != pid


def test_scheduler_actor_grows_live_and_a_restart_comes_back_on_the_grown_graph(cluster, tmp_path):
    full = small_graph()
    old_envs = sorted(set(full.env_ids))[:2]
    old = full.subgraph(
        [t for t, e in zip(full.task_ids, full.env_ids, strict=True) if e in old_envs]
    )
    actor = EnvSchedActor.options(max_restarts=-1, max_task_retries=-1).remote(
        "envsched", old, batch_size=B, seed=0, checkpoint_path=str(tmp_path / "s.json")
    )
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        for step in range(2):
            batch = ray.get(actor.next_batch.remote(step))
            ray.get(actor.observe.remote(step, rollout_rewards(runtime, batch, step, K)))
        before = ray.get(actor.state_dict.remote())
        assert ray.get(actor.grow.remote(full)) == full.num_tasks
        grown = ray.get(actor.state_dict.remote())
        assert grown["scheduler"]["log"] == before["scheduler"]["log"]
        assert grown["batches"] == before["batches"]
        new = set(full.task_ids) - set(old.task_ids)
        batch = ray.get(actor.next_batch.remote(2))
        assert new & set(batch), "the new environment's tasks are not selected"
        ray.get(actor.observe.remote(2, rollout_rewards(runtime, batch, 2, K)))
    # a restart (Ray passes the first graph again) continues on the grown one
    os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
    assert ray.get(actor.state_dict.remote())["scheduler"]["num_tasks"] == full.num_tasks
    assert len(ray.get(actor.state_dict.remote())["scheduler"]["log"]["observations"]) == 3 * B
    assert ray.get(actor.retire.remote([old_envs[0]])) == [old_envs[0]]
    retired = {t for t, e in zip(full.task_ids, full.env_ids, strict=True) if e == old_envs[0]}
    assert not retired & set(ray.get(actor.next_batch.remote(3)))


KEEP = DynamicSamplingConfig(oversample=2, surplus="keep")
OVER_SAMPLING = {"batch_size": B, "seed": 0, "pool": small_pool(), "sampling": KEEP}
"""``envsched_ops+ds``: the coverage over operation patterns (from the pool) behind dynamic
sampling, the surplus kept pending for the next update."""


@ray.remote(num_cpus=1)
def filtering_process(scheduler, part, parts, steps, k):
    """One rollout process behind dynamic sampling: every generation batch, its share rolled
    out and observed, the step's selection from the actor; it trains the groups it holds."""
    held, trained, seen = {}, [], []
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        for step in range(steps):
            batch = ray.get(scheduler.next_batch.remote(step))
            rewards = rollout_rewards(runtime, batch[part::parts], step, k)
            ray.get(scheduler.observe.remote(step, rewards))
            held.update({(step, task): group for task, group in rewards.items()})
            selection = ray.get(scheduler.filter_groups.remote(step, final=step == steps - 1))
            trained.append({key for key in selection.update if key in held})
            held = {key: held[key] for key in selection.pending if key in held}
            seen.append((batch, groups_of(selection)))
    return seen, trained


def groups_of(selection):
    """A selection's groups to train and groups pending (its metrics hold NaN)."""
    return selection.update, selection.pending


def test_two_processes_run_dynamic_sampling_through_the_actor_as_one_process_would(cluster):
    single = adapter_scheduler("ray", "envsched_ops+ds", small_graph(), **OVER_SAMPLING)
    expected = []
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        for step in range(STEPS):
            batch = single.next_batch(step)
            rewards = rollout_rewards(runtime, batch, step, K)
            selection = single.filter_groups(step, rewards, final=step == STEPS - 1)
            expected.append((batch, groups_of(selection)))
    actor = EnvSchedActor.remote("envsched_ops+ds", small_graph(), **OVER_SAMPLING)
    runs = ray.get([filtering_process.remote(actor, p, 2, STEPS, K) for p in range(2)])
    (seen_0, trained_0), (seen_1, trained_1) = runs
    assert seen_0 == seen_1 == expected
    for step, (_, (update, _)) in enumerate(expected):
        assert trained_0[step] | trained_1[step] == set(update)
        assert not trained_0[step] & trained_1[step]
    assert {len(batch) for batch, _ in expected} == {2 * B}  # generation batches of 2B
    updates = [len(update) for _, (update, _) in expected]
    assert sum(updates) < STEPS * 2 * B and any(pending for _, (_, pending) in expected)
    # every group rolled out was observed, the zero-variance ones too
    state = ray.get(actor.state_dict.remote())
    rows = {
        (o["task_id"], o["step"]) for o in state["scheduler"]["scheduler"]["log"]["observations"]
    }
    assert rows == {(t, step) for step, (batch, _) in enumerate(expected) for t in batch}
    assert ray.get(actor.metrics.remote())["sampling/updates_total"] == sum(map(bool, updates))


def test_an_unfiltered_step_holds_the_next_batch_and_a_restart_filters_it_the_same(
    cluster, tmp_path
):
    options = {**OVER_SAMPLING, "checkpoint_path": str(tmp_path / "s.json")}
    actor = EnvSchedActor.options(max_restarts=-1, max_task_retries=-1).remote(
        "envsched_ops+ds", small_graph(), wait_timeout_s=1.0, **options
    )
    reference = adapter_scheduler("ray", "envsched_ops+ds", small_graph(), **OVER_SAMPLING)
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        batch = ray.get(actor.next_batch.remote(0))
        rewards = rollout_rewards(runtime, batch, 0, K)
        assert batch == reference.next_batch(0)
    ray.get(actor.observe.remote(0, rewards))
    with pytest.raises(ray.exceptions.RayTaskError, match=r"misses filter_groups\(0\)"):
        ray.get(actor.next_batch.remote(1))
    os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)  # observed, not yet filtered
    selection = groups_of(ray.get(actor.filter_groups.remote(0)))
    assert selection == groups_of(reference.filter_groups(0, rewards))
    assert groups_of(ray.get(actor.filter_groups.remote(0))) == selection  # a retried call
    with pytest.raises(ray.exceptions.RayTaskError, match="was filtered with final=False"):
        ray.get(actor.filter_groups.remote(0, final=True))
    assert ray.get(actor.next_batch.remote(1)) == reference.next_batch(1)


def sandboxed(pid: int) -> bool:
    """The worker runs in the runtime's sandbox: its own user and network namespaces."""
    return all(
        os.readlink(f"/proc/{pid}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}")
        for kind in ("user", "net")
    )


def assert_exit(pids: list[int], within_s: float = 10.0) -> None:
    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if alive(pid)] == []


def test_killed_environment_actor_is_replaced_and_its_episode_replayed(cluster):
    pool = small_pool()
    task = pool.split("train")[0]
    calls = list(task.reference_solution)
    assert len(calls) == 2
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as local:
        after_one, after_all = (
            s.reward for s in local.replay([(task.task_id, calls[:1]), (task.task_id, calls)])
        )
    assert after_one < after_all

    config = RayRuntimeConfig(actors=2, num_cpus=0.5)
    with RayEnvRuntime(pool, config) as runtime:
        runtime.reset([("episode", task.task_id), ("other", task.task_id)])
        runtime.call([("episode", calls[0])])
        actor = runtime._episodes["episode"].worker
        pids = runtime.actor_pids()
        for _, workers in pids:
            assert workers and all(sandboxed(pid) for pid in workers)
        os.kill(pids[actor][0], signal.SIGKILL)
        assert_exit(pids[actor][1])  # its sandboxes died with it

        assert [s.reward for s in runtime.score(["episode"])] == [after_one]
        assert runtime.restarts == 1
        now = runtime.actor_pids()
        assert now[actor][0] != pids[actor][0] and now[1 - actor] == pids[1 - actor]
        assert runtime.call([("episode", calls[1])])[0]["success"] is True
        assert [s.reward for s in runtime.score(["episode"])] == [after_all]
        assert [s.reward for s in runtime.replay([(task.task_id, calls)])] == [after_all]


def test_ray_runtime_warns_about_unscorable_states_once_per_task_as_the_local_one_does(cluster):
    pool = refusal_pool()
    runs = [(task.task_id, task.reference_solution) for task in pool.tasks]
    local = EnvRuntime(pool, RuntimeConfig(workers=1))
    with local, pytest.warns(RuntimeWarning) as local_warned:
        expected = local.replay(runs)
    runtime = RayEnvRuntime(pool, RayRuntimeConfig(actors=1, num_cpus=0.5))
    with runtime, pytest.warns(RuntimeWarning) as warned:
        scores = runtime.replay(runs)
        again = runtime.replay(runs)
    assert [s.unscored for s in scores] == [s.unscored for s in expected]
    assert [s.unscored for s in again] == [s.unscored for s in expected]
    assert all(s.unscored.startswith("state cannot be loaded (class ") for s in scores)
    messages = sorted(str(warning.message) for warning in warned)
    assert messages == sorted(str(warning.message) for warning in local_warned)
    assert len(messages) == len(REFUSED)  # once per task, not once per replay
