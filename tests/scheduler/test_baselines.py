"""Baselines: each does what its source does, on pools whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.scheduler.registry import make_scheduler


def fixed_rewards(batch, step, kind, k=8):
    """kind 0: always all 0; 1: always all 1; 2: half successes (non-zero variance)."""
    out = {}
    for t in batch:
        label = kind[t]
        out[t] = [float(label)] * k if label < 2 else [0.0, 1.0] * (k // 2)
    return out


@pytest.fixture(scope="module")
def pool():
    graph = synthetic_graph(300, seed=0)
    kinds = np.random.default_rng(0).integers(0, 3, graph.num_tasks)
    return graph, dict(zip(graph.task_ids, kinds.tolist(), strict=True))


def test_random_is_uniform_and_seeded(pool):
    graph, _ = pool
    a = make_scheduler("random", graph, batch_size=32, seed=4)
    b = make_scheduler("random", graph, batch_size=32, seed=4)
    assert a.next_batch(0) == b.next_batch(0)
    assert a.next_batch(1) != a.next_batch(0)
    seen = {t for step in range(40) for t in a.next_batch(step)}
    assert len(seen) > 0.95 * graph.num_tasks


def test_dapo_refills_and_counts_every_rollout_including_the_wasted(pool):
    """Updated for DAPO's refill (issue 37; before it, each step trained at once on at most B
    of its own groups with spread): groups with spread wait until B have accumulated over
    generation batches, the surplus is dropped, the last step trains what is pending, and
    every rollout counts, the dropped, trimmed and pending ones included."""
    graph, kind = pool
    dapo = make_scheduler("dapo", graph, batch_size=32, seed=0)
    spread, selections = [], []
    for step in range(3):
        batch = dapo.next_batch(step)
        assert len(batch) == 64 and len(set(batch)) == 64  # over-samples 2B
        rewards = fixed_rewards(batch, step, kind)
        spread.append([(step, t) for t in batch if kind[t] == 2])
        selections.append(dapo.filter_groups(step, rewards, final=step == 2))
        m = dapo.metrics()
        assert m["sampling/rollouts_spent"] == 512
        assert m["sampling/groups_zero_variance"] == 64 - len(spread[-1])
        accounted = m["sampling/rollouts_trained_total"] + m["sampling/rollouts_wasted_total"]
        accounted += 8 * m["sampling/groups_pending"]
        assert m["sampling/rollouts_spent_total"] == 512 * (step + 1) == accounted
    # about a third of the pool has spread: one batch is short of B, two are not
    assert len(spread[0]) < 32 <= len(spread[0]) + len(spread[1]) and len(spread[2]) < 32
    first, second, last = selections
    assert first.update == () and first.pending == tuple(spread[0])
    assert second.update == tuple((spread[0] + spread[1])[:32]) and second.pending == ()
    assert second.metrics["sampling/groups_dropped"] == len(spread[0]) + len(spread[1]) - 32
    assert last.update == tuple(spread[2]) and last.pending == ()  # the run's end
    assert dapo.totals["rollouts_spent"] == 3 * 512
    assert dapo.totals["rollouts_trained"] == 8 * (32 + len(spread[2]))
    assert dapo.totals["rollouts_wasted"] == 3 * 512 - dapo.totals["rollouts_trained"]
    assert len(dapo.log) == 3 * 64  # every group rolled out is observed


def test_greso_skips_tasks_that_stay_zero_variance(pool):
    graph, kind = pool
    greso = make_scheduler("greso", graph, batch_size=32, seed=0)
    share = []
    for step in range(30):
        batch = greso.next_batch(step)
        greso.observe(step, fixed_rewards(batch, step, kind))
        share.append(np.mean([kind[t] < 2 for t in batch]))
    pool_share = np.mean([k < 2 for k in kind.values()])  # about 2/3
    assert np.mean(share[:3]) > 0.5
    assert np.mean(share[-10:]) < 0.5 * pool_share
    p_easy, p_hard = greso.exploration_probabilities(30)
    assert p_easy < 0.5 and p_hard < 0.5  # too many zero-variance groups: less re-admission
    assert greso.metrics()["greso/skipped"] > 0


@pytest.mark.parametrize("name", ["mopps", "dps"])
def test_mopps_and_dps_prefer_partially_solved_tasks(pool, name):
    graph, kind = pool
    scheduler = make_scheduler(name, graph, batch_size=32, seed=0)
    ids = graph.task_ids
    for step in range(3):  # everything observed a few times
        scheduler.observe(step, fixed_rewards(ids, step, kind))
    batch = scheduler.next_batch(3)
    assert np.mean([kind[t] == 2 for t in batch]) > 0.8


def test_dps_fills_uniformly_when_nothing_is_known(pool):
    graph, _ = pool
    dps = make_scheduler("dps", graph, batch_size=32, seed=0)
    batch = dps.next_batch(0)
    assert set(dps.last_batch.stage.values()) == {"unseen"}
    assert batch != make_scheduler("dps", graph, batch_size=32, seed=1).next_batch(0)


def test_mopps_posterior_follows_observed_rates(pool):
    graph, kind = pool
    mopps = make_scheduler("mopps", graph, batch_size=32, seed=0, decay=1.0)
    ids = graph.task_ids
    mopps.observe(0, fixed_rewards(ids, 0, kind))
    mean = mopps.posterior_mean()
    k = np.array([kind[t] for t in ids])
    assert np.allclose(mean[k == 0], 1 / 10) and np.allclose(mean[k == 1], 9 / 10)
    assert np.allclose(mean[k == 2], 0.5)
