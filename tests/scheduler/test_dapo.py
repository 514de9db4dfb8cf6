"""DAPO's dynamic sampling with refill, by hand: which groups enter which update, what is
trimmed, the forced updates (``max_generation_batches``, the run's end), the counts, and a
resume while groups are pending."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.scheduler.baselines.dapo import DapoConfig, DynamicSampling
from envsched_gnn.scheduler.registry import make_scheduler

SPREAD, ZEROS, ONES = [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]

# (rewards of the step's groups in batch order, final) -> (update, pending, trimmed), B = 2,
# max_generation_batches = 3
SCRIPT = [
    # one group with spread: short of B, it waits
    ({"t1": ZEROS, "t2": SPREAD, "t3": ONES}, False, [], [(0, "t2")], []),
    # three more (t2 again: a new group of it): the first B trained, the surplus trimmed
    (
        {"t4": SPREAD, "t5": SPREAD, "t2": SPREAD},
        False,
        [(0, "t2"), (1, "t4")],
        [],
        [(1, "t5"), (1, "t2")],
    ),
    ({"t1": ZEROS, "t6": SPREAD}, False, [], [(2, "t6")], []),
    ({"t1": ZEROS, "t3": ONES}, False, [], [(2, "t6")], []),
    # the third generation batch without B: the update takes what is pending
    ({"t1": ZEROS}, False, [(2, "t6")], [], []),
    # three batches without any spread: the forced update has nothing to train
    ({"t1": ZEROS}, False, [], [], []),
    ({"t3": ONES}, False, [], [], []),
    ({"t1": ZEROS}, False, [], [], []),
    # the count started again: one batch waited, then the run ends with one group pending
    ({"t7": SPREAD}, False, [], [(8, "t7")], []),
    ({"t1": ZEROS}, True, [(8, "t7")], [], []),
    # at the run's end with more than B: still B, the rest trimmed
    ({"t7": SPREAD, "t8": SPREAD, "t9": SPREAD}, True, [(10, "t7"), (10, "t8")], [], [(10, "t9")]),
]


def test_accumulation_by_hand():
    sampling = DynamicSampling(batch_size=2, max_generation_batches=3)
    for step, (rewards, final, update, pending, trimmed) in enumerate(SCRIPT):
        refill = sampling.add(step, rewards, final=final)
        assert refill.selection.update == tuple(update), step
        assert refill.selection.pending == tuple(pending), step
        assert refill.trimmed == tuple(trimmed), step
        assert refill.zero_variance == tuple(t for t, r in rewards.items() if r != SPREAD)
        assert list(sampling.pending) == pending


def test_generation_batches_count_since_the_last_update():
    sampling = DynamicSampling(batch_size=2, max_generation_batches=3)
    waited = []
    for step, (rewards, final, *_) in enumerate(SCRIPT[:6]):
        sampling.add(step, rewards, final=final)
        waited.append(sampling.generation_batches)
    assert waited == [1, 0, 1, 2, 0, 1]


GRAPH = synthetic_graph(12, tasks_per_env=4, k_in=2, k_cross=2, seed=0)
WITH_SPREAD = set(GRAPH.task_ids[:5])


def rewards_of(batch):
    """K = 3 rewards by task: t0-t4 with spread, the others all zeros or all ones."""
    return {
        t: [0.0, 1.0, 1.0] if t in WITH_SPREAD else [float(i % 2)] * 3 for i, t in enumerate(batch)
    }


def dapo():
    return make_scheduler("dapo", GRAPH, batch_size=2, seed=1, max_generation_batches=3)


def drive(scheduler, steps, last):
    """Run ``steps`` (the run's last is ``last``): each step's batch, selection and metrics."""
    out = []
    for step in steps:
        batch = scheduler.next_batch(step)
        selection = scheduler.filter_groups(step, rewards_of(batch), final=step == last)
        out.append((batch, selection, scheduler.metrics()))
    return out


def test_every_rollout_is_counted_and_the_counts_add_up():
    trained = wasted = 0
    for step, (batch, selection, m) in enumerate(drive(dapo(), range(8), last=7)):
        assert len(batch) == 4  # G = 2 B uniform tasks
        zero_variance = len(set(batch) - WITH_SPREAD)
        assert m["dapo/groups_generated"] == 4 and m["dapo/rollouts_spent"] == 12
        assert m["dapo/groups_zero_variance"] == zero_variance
        assert m["dapo/groups_trained"] == len(selection.update) <= 2
        assert m["dapo/groups_pending"] == len(selection.pending)
        assert m["dapo/rollouts_wasted"] == 3 * (zero_variance + m["dapo/groups_trimmed"])
        trained += 3 * len(selection.update)
        wasted += m["dapo/rollouts_wasted"]
        assert m["dapo/rollouts_trained_total"] == trained
        assert m["dapo/rollouts_wasted_total"] == wasted
        assert (
            m["dapo/rollouts_spent_total"]
            == 12 * (step + 1)
            == (trained + wasted + m["dapo/rollouts_pending"])
        )
        assert selection.metrics == {k: v for k, v in m.items() if k.startswith("dapo/")}
    assert m["dapo/rollouts_pending"] == 0  # the last step trained what was pending


def test_resume_mid_accumulation_gives_the_uninterrupted_updates():
    whole = [(batch, selection) for batch, selection, _ in drive(dapo(), range(10), last=9)]
    # interrupt the run after a step whose groups wait
    cut = next(s for s, (_, selection) in enumerate(whole) if selection.pending) + 1
    first = dapo()
    assert [(b, s) for b, s, _ in drive(first, range(cut), last=9)] == whole[:cut]
    state = json.loads(json.dumps(first.state_dict()))
    assert state["extra"]["sampling"]["pending"]
    resumed = dapo()
    resumed.load_state_dict(state)
    assert [(b, s) for b, s, _ in drive(resumed, range(cut, 10), last=9)] == whole[cut:]


def test_max_generation_batches_must_be_positive():
    with pytest.raises(ValueError, match="max_generation_batches = 0"):
        DapoConfig(max_generation_batches=0)
