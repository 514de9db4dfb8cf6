"""Dynamic sampling as a composition, by hand: which groups enter which update, the surplus
dropped or kept, the forced updates, the generation sizes of each rule, the rollouts, updates
and observations of a whole budget, and a resume while groups are pending."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.scheduler.base import BaseScheduler, SchedulerError
from envsched_gnn.scheduler.dynamic_sampling import (
    DAPO_RECIPE,
    DynamicSampling,
    DynamicSamplingConfig,
    GroupRefill,
)
from envsched_gnn.scheduler.registry import check_scheduler_name, make_scheduler
from envsched_gnn.scheduler.steps import StepLoop

SPREAD, ZEROS, ONES = [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]

# (rewards of the step's groups in batch order, final) -> (update, pending, dropped), B = 2,
# max_generation_batches = 3, the surplus dropped
SCRIPT = [
    # one group with spread: short of B, it waits
    ({"t1": ZEROS, "t2": SPREAD, "t3": ONES}, False, [], [(0, "t2")], []),
    # three more (t2 again: a new group of it): the first B trained, the surplus dropped
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
    # at the run's end with more than B: still B, the rest dropped
    ({"t7": SPREAD, "t8": SPREAD, "t9": SPREAD}, True, [(10, "t7"), (10, "t8")], [], [(10, "t9")]),
]


def test_accumulation_by_hand():
    refill = GroupRefill(batch_size=2, max_generation_batches=3, keep_surplus=False)
    for step, (rewards, final, update, pending, dropped) in enumerate(SCRIPT):
        out = refill.add(step, rewards, final=final)
        assert out.selection.update == tuple(update), step
        assert out.selection.pending == tuple(pending), step
        assert out.dropped == tuple(dropped) and out.kept == (), step
        assert out.zero_variance == tuple(t for t, r in rewards.items() if r != SPREAD)
        assert list(refill.pending) == pending


def test_a_kept_surplus_trains_first_at_the_next_update_and_at_most_b_minus_one_is_kept():
    refill = GroupRefill(batch_size=2, max_generation_batches=10, keep_surplus=True)
    four = {"a": SPREAD, "b": SPREAD, "c": SPREAD, "d": SPREAD}
    out = refill.add(0, four, final=False)
    assert out.selection.update == ((0, "a"), (0, "b"))
    assert out.kept == ((0, "c"),) and out.dropped == ((0, "d"),)  # B - 1 = 1 kept
    assert out.selection.pending == ((0, "c"),)
    out = refill.add(1, {"e": SPREAD, "f": ZEROS}, final=False)
    assert out.selection.update == ((0, "c"), (1, "e"))  # the kept group first
    out = refill.add(2, {"g": SPREAD, "h": SPREAD, "i": SPREAD}, final=True)
    assert out.selection.update == ((2, "g"), (2, "h")) and out.kept == ()  # nothing after
    assert out.dropped == ((2, "i"),)


def test_generation_batches_count_since_the_last_update():
    refill = GroupRefill(batch_size=2, max_generation_batches=3, keep_surplus=False)
    waited = []
    for step, (rewards, final, *_) in enumerate(SCRIPT[:6]):
        refill.add(step, rewards, final=final)
        waited.append(refill.generation_batches)
    assert waited == [1, 0, 1, 2, 0, 1]


GRAPH = synthetic_graph(12, tasks_per_env=4, k_in=2, k_cross=2, seed=0)


class InOrder(BaseScheduler):
    """Picks the next ``size`` tasks in node order, round the pool; ``spread`` is the P(v > 0)
    it claims for every pick (None: it predicts nothing)."""

    name = "in_order"

    def __init__(self, graph, *, batch_size, seed=0, spread=None):
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.spread = spread

    def _select(self, step, size):
        n = len(self.task_ids)
        first = sum(len(b) for s, b in self.selections.batches.items() if s < step) % n
        indices = (first + np.arange(size)) % n
        return indices, ["in_order"] * size, [], {}

    def _pick_spread(self, indices):
        return None if self.spread is None else np.full(len(indices), self.spread)


def informative_unless_index_is_3_mod_4(batch):
    """K = 2 rewards: every task spreads but those at node index 3 mod 4."""
    return {t: ZEROS if GRAPH.index[t] % 4 == 3 else SPREAD for t in batch}


@pytest.mark.parametrize(
    "surplus, updates",
    [
        # gen 0: t0..t3, informative t0 t1 t2: update t0 t1, t2 surplus
        # gen 1 (the last 4 groups of the budget): t4..t7, informative t4 t5 t6
        ("drop", [["t0", "t1"], ["t4", "t5"]]),  # t2 and t6 dropped
        ("keep", [["t0", "t1"], ["t2", "t4"]]),  # t2 kept; final: t5 t6 dropped
    ],
)
def test_a_whole_budget_by_hand_rollouts_updates_and_observations(surplus, updates):
    inner = InOrder(GRAPH, batch_size=2)
    scheduler = DynamicSampling(inner, DynamicSamplingConfig(oversample=2, surplus=surplus))
    loop = StepLoop(scheduler, group_size=2, budget=2 * 2 * 4)  # S = 4 budget steps of B K
    trained, step = [], 0
    while not loop.done:
        batch = loop.choose(step)
        rewards = informative_unless_index_is_3_mod_4(batch.task_ids)
        groups, selection = loop.settle(step, rewards, {t: t for t in rewards})
        if groups:
            trained.append(groups)
        step += 1
    assert step == 2 and loop.spent == 16  # two generation batches of 4 groups of 2
    assert trained == updates
    assert len(inner.log) == 8  # every group observed, the zero-variance ones too
    totals = scheduler.totals
    assert totals == {
        "rollouts_spent": 16,
        "rollouts_trained": 8,
        "rollouts_wasted": 8,  # t3 and t7 (zero variance), and two surplus groups
        "groups_spent": 8,
        "updates": 2,
    }
    assert not loop.pending.groups


def sizes_of(scheduler, rewards_of, steps):
    """The generation size of each step, driving ``scheduler`` with ``rewards_of(batch)``."""
    sizes = []
    for step in range(steps):
        batch = scheduler.next_batch(step)
        sizes.append(len(batch))
        scheduler.filter_groups(step, rewards_of(batch))
    return sizes


@pytest.mark.parametrize(
    "surplus, sizes",
    [
        # gen 0: no share yet, G = 2B = 8: t0..t7, informative 6 of 8 -> update, share 2/8
        # gen 1: m = 4, G = ceil(1.25 * 4 / 0.75) = 7: t8..t14 (round), informative 6
        # gen 2: share 1/7, G = ceil(1.25 * 4 / (6/7)) = ceil(5.83) = 6
        ("drop", [8, 7, 6]),
        # the same, but 2 of gen 0's surplus kept: m = 2, G = ceil(1.25 * 2 / 0.75) = 4
        # (t8..t11, 3 informative: 5 with the kept, 1 kept again); m = 3,
        # G = ceil(1.25 * 3 / 0.75) = 5
        ("keep", [8, 4, 5]),
    ],
)
def test_the_greso_rule_sizes_from_the_last_batch_share_by_hand(surplus, sizes):
    config = DynamicSamplingConfig(generation="greso", max_oversample=2, surplus=surplus)
    scheduler = DynamicSampling(InOrder(GRAPH, batch_size=4), config)
    assert sizes_of(scheduler, informative_unless_index_is_3_mod_4, 3) == sizes


def test_the_greso_rule_reads_a_predicted_spread_and_chooses_again_with_it():
    config = DynamicSamplingConfig(generation="greso", max_oversample=2, headroom=1.25)
    inner = InOrder(GRAPH, batch_size=4, spread=0.8)
    scheduler = DynamicSampling(inner, config)
    batch = scheduler.next_batch(0)
    # first with the cap (no share yet), then with p = 1 - 0.8: ceil(1.25 * 4 / 0.8) = 7
    assert len(batch) == 7
    assert len(inner.selections.batches[0]) == 7  # the step's recorded selection replaced
    assert scheduler.last_batch.spread == dict.fromkeys(batch, 0.8)
    scheduler.filter_groups(0, {t: ZEROS for t in batch})
    assert scheduler.metrics()["sampling/expected_zero_share"] == pytest.approx(0.2)


def test_a_generation_batch_another_filter_settles_sizes_the_next_by_its_share():
    config = DynamicSamplingConfig(generation="greso", oversample=2, headroom=1.25)
    scheduler = DynamicSampling(InOrder(GRAPH, batch_size=4), config)
    batch = scheduler.next_batch(0)  # no share yet: G = 2B = 8
    scheduler.observe_generation(0, informative_unless_index_is_3_mod_4(batch))
    # share 2/8 and nothing pending: G = ceil(1.25 * 4 / 0.75) = 7
    assert scheduler.generation_size() == 7
    assert {o.task_id for o in scheduler.log.observations()} == set(batch)
    assert scheduler.refill.pending == {} and scheduler.totals["updates"] == 0
    with pytest.raises(ValueError, match="t0"):
        scheduler.observe_generation(1, {"t0": [2.0, 0.0]})


def test_the_caller_caps_the_generation_batch():
    scheduler = make_scheduler("random+ds", GRAPH, batch_size=4, seed=0)
    assert len(scheduler.next_batch(0)) == 4  # the default: B with accumulation
    assert len(scheduler.next_batch(1, 3)) == 3
    recipe = make_scheduler("dapo", GRAPH, batch_size=4, seed=0)
    assert len(recipe.next_batch(0)) == 8 and recipe.config.surplus == "drop"


K3_SPREAD = set(GRAPH.task_ids[:5])


def rewards_of(batch):
    """K = 3 rewards by task: t0-t4 with spread, the others all zeros or all ones."""
    return {
        t: [0.0, 1.0, 1.0] if t in K3_SPREAD else [float(i % 2)] * 3 for i, t in enumerate(batch)
    }


def drive(scheduler, steps, last):
    """Run ``steps`` (the run's last is ``last``): each step's batch, selection and metrics."""
    out = []
    for step in steps:
        batch = scheduler.next_batch(step)
        selection = scheduler.filter_groups(step, rewards_of(batch), final=step == last)
        out.append((batch, selection, scheduler.metrics()))
    return out


def dapo():
    return make_scheduler("dapo", GRAPH, batch_size=2, seed=1, max_generation_batches=3)


def test_every_rollout_is_counted_and_the_counts_add_up():
    trained = wasted = 0
    for step, (batch, selection, m) in enumerate(drive(dapo(), range(8), last=7)):
        assert len(batch) == 4  # G = 2 B uniform tasks
        zero_variance = len(set(batch) - K3_SPREAD)
        assert m["sampling/groups_generated"] == 4 and m["sampling/rollouts_spent"] == 12
        assert m["sampling/groups_zero_variance"] == zero_variance
        assert m["sampling/groups_trained"] == len(selection.update) <= 2
        assert m["sampling/groups_pending"] == len(selection.pending)
        assert m["sampling/rollouts_wasted"] == 3 * (zero_variance + m["sampling/groups_dropped"])
        trained += 3 * len(selection.update)
        wasted += m["sampling/rollouts_wasted"]
        assert m["sampling/rollouts_trained_total"] == trained
        assert m["sampling/rollouts_wasted_total"] == wasted
        pending = 3 * m["sampling/groups_pending"]
        assert m["sampling/rollouts_spent_total"] == 12 * (step + 1) == trained + wasted + pending
        assert selection.metrics == {k: v for k, v in m.items() if k.startswith("sampling/")}
    assert m["sampling/groups_pending"] == 0  # the last step trained what was pending


def test_dapo_is_random_behind_the_recipe():
    ds = make_scheduler("random+ds", GRAPH, batch_size=2, seed=1, sampling=DAPO_RECIPE)
    recipe = make_scheduler("dapo", GRAPH, batch_size=2, seed=1)
    assert [(b, s) for b, s, _ in drive(ds, range(6), 5)] == [
        (b, s) for b, s, _ in drive(recipe, range(6), 5)
    ]


@pytest.mark.parametrize("name", ["greso+ds", "envsched_spread+ds"])
def test_resume_mid_accumulation_gives_the_uninterrupted_updates(name):
    sampling = DynamicSamplingConfig(generation="greso", surplus="keep", max_generation_batches=3)

    def build():
        return make_scheduler(name, GRAPH, batch_size=2, seed=1, sampling=sampling)

    whole = [(batch, selection) for batch, selection, _ in drive(build(), range(10), last=9)]
    # interrupt the run after a step whose groups wait
    cut = next(s for s, (_, selection) in enumerate(whole) if selection.pending) + 1
    first = build()
    assert [(b, s) for b, s, _ in drive(first, range(cut), last=9)] == whole[:cut]
    state = json.loads(json.dumps(first.state_dict()))
    assert state["refill"]["pending"]
    resumed = build()
    resumed.load_state_dict(state)
    assert [(b, s) for b, s, _ in drive(resumed, range(cut, 10), last=9)] == whole[cut:]


def test_names_and_settings_are_checked():
    assert check_scheduler_name("envsched_ops+ds") == "envsched_ops+ds"
    for wrong in ("dapo+ds", "nope+ds", "random+ds+ds"):
        with pytest.raises(ValueError, match="behind dynamic sampling"):
            check_scheduler_name(wrong)
    with pytest.raises(ValueError, match="max_generation_batches = 0"):
        DynamicSamplingConfig(max_generation_batches=0)
    with pytest.raises(ValueError, match="surplus = 'hold'"):
        DynamicSamplingConfig(surplus="hold")
    with pytest.raises(ValueError, match="oversample = 0.5"):
        DynamicSamplingConfig(oversample=0.5)
    with pytest.raises(SchedulerError, match="already over-samples"):
        DynamicSampling(make_scheduler("dapo", GRAPH, batch_size=2))
