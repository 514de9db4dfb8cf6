"""Compute to a target on hand-made runs: the targets from random's lift, rollouts and rollout
seconds to each, the area, groups per group trained, rewards at equal updates, paired."""

import math

import pytest

from envsched_gnn.eval.ablation.targets import lift_targets, run_measures, summarise_targets

PER_STEP, BUDGET = 16, 4.0  # B K = 16 rollouts per budget step; a budget of 4 steps


def plain(scores: dict[int, float], seed: int) -> dict:
    """A run with one update per budget step, evaluated at the budget steps of ``scores``."""
    records = [{"step": -1, "budget_step": 0.0, "score": scores[0]}]
    for step in range(1, 5):
        records.append(
            {
                "step": step - 1,
                "budget_step": float(step),
                "score": scores.get(step),
                "groups": 2,
                "trained_groups": 2,
                "rollout_s": 1.0,
            }
        )
    return {"seed": seed, "records": records}


def sampled(final: float, seed: int) -> dict:
    """Behind dynamic sampling: two generation batches of 4 groups (two budget steps each),
    the first short of B (no update), the second trains 2; evaluated after each."""
    records = [{"step": -1, "budget_step": 0.0, "score": 0.5}]
    for step, trained, score in ((0, 0, 0.5), (1, 2, final)):
        records.append(
            {
                "step": step,
                "budget_step": 2.0 * (step + 1),
                "score": score,
                "groups": 4,
                "trained_groups": trained,
                "rollout_s": 3.0,
            }
        )
    return {"seed": seed, "records": records}


RANDOM = [plain({0: 0.5, 2: 0.56, 4: 0.60}, 0), plain({0: 0.5, 2: 0.54, 4: 0.58}, 1)]


def test_targets_are_shares_of_randoms_mean_lift():
    lifted = lift_targets(RANDOM)
    assert lifted["start"] == {0: 0.5, 1: 0.5} and lifted["lift"] == pytest.approx(0.09)
    for f, y in {"0.5": 0.545, "0.75": 0.5675, "0.9": 0.581, "1.0": 0.59}.items():
        assert lifted["targets"][f] == pytest.approx({0: y, 1: y})
    # each seed's own start (the simulator's runs do not share one), the same lift
    other = [plain({0: 0.4, 4: 0.5}, 0), plain({0: 0.5, 4: 0.58}, 1)]
    assert lift_targets(other)["targets"]["1.0"] == pytest.approx({0: 0.49, 1: 0.59})
    flat = [plain({0: 0.5, 4: 0.49}, 0)]
    assert lift_targets(flat) is None  # no lift, nothing to reach


def test_one_run_by_hand():
    targets = {"0.5": 0.545, "0.9": 0.581}
    m = run_measures(RANDOM[0], targets, PER_STEP, BUDGET)
    # 0.545 between (0, 0.50) and (2, 0.56): b = 0.045 / 0.06 * 2 = 1.5 budget steps
    assert m["rollouts"]["0.5"] == pytest.approx(1.5 * PER_STEP)
    assert m["rollout_s"]["0.5"] == pytest.approx(1.5)  # 1 s of rollouts per step
    # 0.581 between (2, 0.56) and (4, 0.60): b = 2 + 0.021 / 0.04 * 2 = 3.05
    assert m["rollouts"]["0.9"] == pytest.approx(3.05 * PER_STEP)
    # trapezoids: (0.50 + 0.56) + (0.56 + 0.60) = 2.22 over 4 budget steps
    assert m["area"] == pytest.approx(0.555)
    assert m["groups_per_trained"] == 1.0 and m["updates"] == 4 and m["final"] == 0.60
    never = run_measures(sampled(0.52, 0), targets, PER_STEP, BUDGET)
    assert never["rollouts"]["0.5"] is None and never["rollout_s"]["0.5"] is None
    assert never["groups_per_trained"] == 4.0 and never["updates"] == 1


def test_paired_against_the_references():
    results = {
        "random": {"runs": RANDOM},
        "random+ds": {"runs": [sampled(0.57, 0), sampled(0.59, 1)]},
    }
    out = summarise_targets(results, PER_STEP, BUDGET)
    ds = out["runs"]["random+ds"]
    # 0.545 between (2, 0.50) and (4, 0.57 | 0.59): b = 2 + 0.045/0.07*2 | 2 + 0.045/0.09*2
    first = [2 + 0.045 / 0.07 * 2, 2 + 0.045 / 0.09 * 2]
    assert [ds["per_seed"][s]["rollouts"]["0.5"] for s in (0, 1)] == pytest.approx(
        [b * PER_STEP for b in first]
    )
    assert ds["rollouts_to"]["0.5"]["reached"] == 2
    versus = ds["versus"]["random"]
    # random reached 0.545 at 1.5 and 2.25 budget steps
    ratio = math.exp((math.log(1.5 / first[0]) + math.log(2.25 / first[1])) / 2)
    assert versus["rollouts_to"]["0.5"]["ratio"]["mean"] == pytest.approx(ratio)
    assert versus["rollouts_to"]["0.5"]["pairs"] == 2
    # at one update (the run's one): the run 0.57 | 0.59; random after 1 of its 4 updates,
    # read off its curve against updates: 0.53 | 0.52
    assert versus["at_equal_updates"]["mean"] == pytest.approx((0.04 + 0.07) / 2)
    assert versus["at_equal_updates"]["updates"] == [1, 1]
    assert versus["groups_per_trained"]["mean"] == pytest.approx(3.0)
    assert "random+ds" in out["runs"]["random"]["versus"]  # and the other way round
    assert "versus" in out["runs"]["random"] and "random" not in out["runs"]["random"]["versus"]
