"""The learner simulator on the independent world: zero-variance groups, exact score and
variance, reproducibility (the worlds: test_independent_world.py, test_structure_world.py)."""

import numpy as np
import pytest

from envsched_gnn.envs.pool import Check, Pool, Task
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.simulate import LearnerSimulator, Rollouts, build_world

CATEGORIES = ["lookup", "create", "update", "delete", "validate"]


def make_pool(n_envs: int = 4, per_env: int = 6, seed: int = 0) -> tuple[Pool, dict]:
    rng = np.random.default_rng(seed)
    tasks, cats = [], {}
    for e in range(n_envs):
        for t in range(per_env):
            task_id = f"env{e}/t{t}"
            cats[task_id] = list(rng.choice(CATEGORIES, int(rng.integers(1, 4))))
            checks = [
                Check(f"c{c}", "def check_func(s):\n    return True") for c in range(1 + t % 4)
            ]
            split = "test" if t < 2 else "train"
            tasks.append(Task(task_id, f"env{e}", "Env", {}, "do it", checks, split=split))
    return Pool({}, tasks), cats


def simulator(seed: int = 0, **config) -> LearnerSimulator:
    pool, cats = make_pool()
    cfg = SimulatorConfig(world="independent", **config)
    return LearnerSimulator(
        pool, cfg, seed=seed, world=build_world(pool, cfg, lambda t: cats[t.task_id])
    )


def test_zero_variance_groups_give_zero_skill_update():
    sim = simulator()
    before = sim.skills()
    rollouts = sim.rollout(sim.world.task_ids[:6])
    rollouts.rewards[:] = rollouts.rewards[:, :1]  # every group: K equal rewards
    step = sim.update(rollouts)
    for name in ("env", "op", "task"):
        assert np.all(step[name] == 0.0)
        # no signal: every skill only decays towards its initial value, which it starts at
        assert np.allclose(sim.skills()[name], before[name])


def test_update_moves_only_skills_of_groups_with_variance():
    sim = simulator(alpha_env=1.0, alpha_op=1.0, alpha_task=1.0)
    tasks = np.array([sim.world.index["env0/t3"], sim.world.index["env2/t3"]])
    k, l_max = sim.config.rollouts, sim.world.slot_op.shape[1]
    success = np.zeros((2, k, l_max), bool)
    success[0, : k // 2, :] = True  # env0 task: half the rollouts complete everything
    success &= sim.world.slot_mask[tasks][:, None, :]
    attempted = np.zeros_like(success)
    attempted[:, :, 0] = True
    attempted[0, : k // 2] = sim.world.slot_mask[tasks[0]]
    prob = np.full(success.shape, 0.5) * sim.world.slot_mask[tasks][:, None, :]
    rewards = np.zeros((2, k))
    rewards[0, : k // 2] = 1.0
    step = sim.update(Rollouts(tasks, success, attempted, prob, rewards))
    assert step["task"][tasks[0]] > 0.0 and step["task"][tasks[1]] == 0.0
    assert step["env"][0] > 0.0 and np.all(step["env"][1:] == 0.0)


def test_score_is_exact_expected_reward_on_held_out():
    sim = simulator(seed=3)
    held_out = [t for t, test in zip(sim.world.task_ids, sim.world.test, strict=True) if test]
    draws = np.concatenate([sim.rollout(held_out).rewards for _ in range(400)], axis=1)
    assert sim.score() == pytest.approx(draws.mean(), abs=0.01)


def test_expected_group_variance_matches_sampled_groups():
    sim = simulator(seed=2)
    ids = sim.world.task_ids[:12]
    tasks = sim.indices(ids)
    sampled = np.mean([sim.rollout(ids).rewards.var(axis=1) for _ in range(3000)], axis=0)
    assert np.allclose(sim.expected_group_variance(tasks), sampled, atol=0.004)


def test_rewards_are_fractions_of_checks_and_runs_are_seeded():
    a, b = simulator(seed=5), simulator(seed=5)
    ids = a.world.task_ids[:10]
    ra, rb = a.rollout(ids), b.rollout(ids)
    assert np.array_equal(ra.rewards, rb.rewards)
    assert ra.rewards.shape == (10, 8) and ((ra.rewards >= 0) & (ra.rewards <= 1)).all()
    n_checks = np.array([1 + int(t.split("t")[-1]) % 4 for t in ids])
    assert np.allclose(np.round(ra.rewards * n_checks[:, None]), ra.rewards * n_checks[:, None])


def test_learning_from_informative_groups_raises_the_score():
    sim = simulator(seed=1, alpha_env=4.0, alpha_op=4.0)
    train = [t for t, test in zip(sim.world.task_ids, sim.world.test, strict=True) if not test]
    start = sim.score()
    for _ in range(60):
        sim.update(sim.rollout(train))
    assert sim.score() > start
