"""The structure world: difficulty from hidden structure with a knob, do-nothing scores,
transfer along hidden factors, exact moments, determinism by seed."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import spearmanr

from envsched_gnn.envs.check import empty_trajectory_checks
from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.simulate import LearnerSimulator, build_world
from envsched_gnn.eval.simulator.structure_world import build_structure_world, normal_scores
from tests.envs.handmade_pool import handmade_pool

POOL = generate_pool(n_envs=12, tasks_per_env=30, seed=0, test_per_env=6)


@pytest.fixture(scope="module")
def rest_checks():
    return empty_trajectory_checks(POOL)


def world(rest_checks, **config):
    return build_structure_world(POOL, SimulatorConfig(**config), rest_checks)


def eta_squared(values: np.ndarray, groups: np.ndarray) -> float:
    """Share of the variance of ``values`` explained by the group means."""
    codes = np.unique(groups, return_inverse=True)[1]
    means = np.bincount(codes, values) / np.bincount(codes)
    return float(np.var(means[codes]) / np.var(values))


def slot_kinds(w) -> np.ndarray:
    """The op:<kind> factor of every real slot."""
    kinds = []
    for i, slot in zip(*np.nonzero(w.slot_mask), strict=True):
        names = [
            w.op_names[f]
            for f, ok in zip(w.slot_op[i, slot], w.slot_op_mask[i, slot], strict=True)
            if ok
        ]
        kinds.append(next(n for n in names if n.startswith("op:")))
    return np.array(kinds)


def test_kappa_zero_difficulty_is_independent_of_structure(rest_checks):
    mask = None
    for kappa, low, high in ((0.0, -0.1, 0.1), (0.5, 0.6, 0.8), (1.0, 0.999, 1.0)):
        w = world(rest_checks, kappa=kappa)
        mask = w.slot_mask
        corr = np.corrcoef(w.delta[mask], w.structure_score[mask])[0, 1]
        assert low <= corr <= high, (kappa, corr)
    kinds = slot_kinds(w)
    chance = len(set(kinds)) / mask.sum()  # eta^2 of unrelated values is about groups / n
    assert eta_squared(world(rest_checks, kappa=0.0).delta[mask], kinds) < 4 * chance
    assert eta_squared(world(rest_checks, kappa=1.0).delta[mask], kinds) > 0.2


def test_kappa_zero_leaves_the_layout_in_the_variance_and_the_null_world_removes_it(rest_checks):
    # the operation count is what a task's abstract shows; at kappa 0 difficulty ignores it,
    # but a task with more operations still has more ways to stop early
    for seed in (0, 1):
        config = SimulatorConfig(kappa=0.0, world_seed=seed)
        w = world(rest_checks, kappa=0.0, world_seed=seed)
        operations = w.slot_mask.sum(axis=1)
        variance = LearnerSimulator(POOL, config, world=w).expected_group_variance()
        null = w.with_tasks_shuffled(seed)
        null_variance = LearnerSimulator(POOL, config, world=null).expected_group_variance()
        noise = 1 / np.sqrt(len(operations) - 1)  # sd of a Spearman correlation under the null
        assert spearmanr(variance, operations).statistic < -6 * noise
        assert abs(spearmanr(null_variance, operations).statistic) < 3 * noise


def test_difficulty_distribution_is_the_same_for_every_kappa(rest_checks):
    stats = []
    for kappa in (0.0, 0.25, 0.5, 0.75, 1.0):
        w = world(rest_checks, kappa=kappa)
        d = w.delta[w.slot_mask]
        first, second = w.delta[:, 0], w.delta[:, 1]
        both = w.slot_mask[:, 1]
        stats.append((d.mean(), d.std(), np.corrcoef(first[both], second[both])[0, 1]))
    stats = np.array(stats)
    assert np.ptp(stats[:, 0]) < 0.25 and np.ptp(stats[:, 1]) < 0.25  # mu = -1, sigma = 3.5
    assert np.allclose(stats[:, 0], -1.0, atol=0.3) and np.allclose(stats[:, 1], 3.5, atol=0.3)
    assert np.ptp(stats[:, 2]) < 0.12  # within-task correlation kept by the noise


def test_normal_scores_are_standard_normal_with_ties():
    scores = normal_scores(np.array([3.0, 1.0, 1.0, 2.0, 5.0, 4.0]))
    assert scores[1] == scores[2] and np.isclose(scores.mean(), 0) and np.isclose(scores.std(), 1)
    assert np.argmax(scores) == 4


def test_worlds_and_runs_are_determined_by_their_seeds(rest_checks):
    a, b = world(rest_checks, world_seed=4), world(rest_checks, world_seed=4)
    c = world(rest_checks, world_seed=5)
    for field in ("delta", "slot_op", "need_weight", "rest_weight", "structure_score"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert not np.array_equal(a.delta, c.delta)
    config = SimulatorConfig(world_seed=4)
    ids = a.task_ids[:40]
    first = LearnerSimulator(POOL, config, seed=9, world=a)
    second = LearnerSimulator(POOL, config, seed=9, world=b)
    for _ in range(5):
        ra, rb = first.rollout(ids), second.rollout(ids)
        assert np.array_equal(ra.rewards, rb.rewards) and np.array_equal(ra.wrong, rb.wrong)
        first.update(ra)
        second.update(rb)
    assert first.score() == second.score()
    other = LearnerSimulator(POOL, config, seed=10, world=a).rollout(ids)
    assert not np.array_equal(
        other.rewards, LearnerSimulator(POOL, config, 9, world=a).rollout(ids).rewards
    )


def test_doing_nothing_scores_what_it_scores_in_the_pool(rest_checks):
    w = world(rest_checks)
    empty = np.array([np.mean(rest_checks[t]) for t in w.task_ids])
    assert np.allclose(w.rest_weight.sum(axis=1), empty)
    assert np.allclose(w.need_weight.sum(axis=1) + w.rest_weight.sum(axis=1), 1.0)
    assert 0.2 < empty.mean() < 0.8  # distractors and unchanged-checks pass at rest
    hopeless = replace(w, delta=w.delta + 1e3)  # every first operation fails ...
    config = SimulatorConfig(wrong_action=0.0)  # ... without doing anything wrong
    rewards = LearnerSimulator(POOL, config, world=hopeless).rollout(w.task_ids).rewards
    assert np.allclose(rewards, empty[:, None])
    wrong = LearnerSimulator(POOL, SimulatorConfig(wrong_action=1.0), world=hopeless)
    broken = wrong.rollout(w.task_ids).rewards  # now the first operation breaks its checks
    assert np.all(broken <= empty[:, None] + 1e-12) and broken.mean() < empty.mean()


def test_expected_reward_and_variance_match_sampled_rollouts(rest_checks):
    w = world(rest_checks, kappa=0.5)
    sim = LearnerSimulator(POOL, SimulatorConfig(), seed=1, world=w)
    ids = w.task_ids[:30]
    tasks = sim.indices(ids)
    draws = [sim.rollout(ids).rewards for _ in range(2500)]
    assert np.allclose(sim.expected_reward(tasks), np.mean(draws, axis=(0, 2)), atol=0.01)
    sampled = np.mean([r.var(axis=1) for r in draws], axis=0)
    assert np.allclose(sim.expected_group_variance(tasks), sampled, atol=0.004)


def test_skills_transfer_along_hidden_factors(rest_checks):
    """Training on one-operation update tasks helps every held-out task with an update
    operation, in any environment, and leaves tasks sharing no skill factor exactly as they
    were (environment and task skills off)."""
    w = world(rest_checks, kappa=0.5)
    config = SimulatorConfig(alpha_env=0.0, alpha_task=0.0, alpha_op=4.0)
    sim = LearnerSimulator(POOL, config, seed=2, world=w)
    update = w.op_names.index("op:update")
    has = (w.slot_op == update).any(axis=(1, 2)) & w.slot_mask.any(axis=1)
    single = w.slot_mask.sum(axis=1) == 1
    train = [
        t for t, ok, test in zip(w.task_ids, has & single, w.test, strict=True) if ok and not test
    ]
    assert len(train) >= 5
    held_with = np.flatnonzero(has & w.test)
    held_without = np.flatnonzero(~has & w.test)
    before = sim.expected_reward(held_with), sim.expected_reward(held_without)
    for _ in range(40):
        sim.update(sim.rollout(train))
    assert (sim.expected_reward(held_with) - before[0]).mean() > 0.02
    assert np.array_equal(sim.expected_reward(held_without), before[1])
    moved = np.flatnonzero(sim.skills()["op"])
    assert moved.tolist() == [update]


def test_default_world_is_structure_and_falls_back_to_abstracts():
    pool = handmade_pool()
    w = build_world(pool, SimulatorConfig())
    assert w.kind == "structure" and w.info["tasks_structured_by_abstract"] == len(pool.tasks)
    assert w.info["tasks_with_hidden_structure"] == 0
    assert LearnerSimulator(pool, world=w).score() > 0.0
    with pytest.raises(
        ValueError, match=r"SimulatorConfig\.kappa = 1\.5, expected a number in \[0, 1\]"
    ):
        SimulatorConfig(kappa=1.5)
    with pytest.raises(ValueError, match=r"SimulatorConfig\.world = 'flat', expected one of"):
        SimulatorConfig(world="flat")


def test_the_null_world_simulates_each_task_as_a_random_other_task(rest_checks):
    config = SimulatorConfig(kappa=1.0)
    w = world(rest_checks, kappa=1.0)
    null = w.with_tasks_shuffled(0)
    assert null.task_ids == w.task_ids and np.array_equal(null.test, w.test)
    assert null.info["tasks_shuffled"]
    real = LearnerSimulator(POOL, config, world=w).expected_group_variance()
    shuffled = LearnerSimulator(POOL, config, world=null).expected_group_variance()
    donors = [int(np.flatnonzero((w.delta == row).all(axis=1))[0]) for row in null.delta[:20]]
    assert np.allclose(shuffled[:20], real[donors])  # task i behaves as its donor pi(i) ...
    env = np.array([w.env_names.index(t.env_id) for t in POOL.tasks])
    assert np.mean(null.env == env) < 0.2  # ... of another environment, most of the time


def test_the_null_world_is_drawn_per_run_seed(rest_checks):
    """One permutation for every seed would give each graph position a fixed behaviour, a
    luck of the draw no number of run seeds averages out: each run seed draws its own."""
    config = SimulatorConfig(kappa=1.0, world_seed=4, shuffle_tasks=True)
    w = world(rest_checks, kappa=1.0, world_seed=4)
    runs = [LearnerSimulator(POOL, config, seed=s, world=w).world for s in (0, 0, 1)]
    assert np.array_equal(runs[0].delta, w.with_tasks_shuffled(4, 0).delta)
    assert np.array_equal(runs[0].delta, runs[1].delta)  # seeded ...
    assert not np.array_equal(runs[0].delta, runs[2].delta)  # ... per run seed
    assert runs[0].info["tasks_shuffled"] and runs[0].task_ids == w.task_ids
    assert not build_world(POOL, config).info.get("tasks_shuffled")  # the shared base world
