"""The pick diagnosis on a hand-made history, against numbers worked out by hand."""

import math

import pytest

from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.eval.ablation.picks import (
    auc,
    diagnose_picks,
    render_picks,
    run_picks,
    seed_summary,
    waste_over_training,
)


def _task(task_id: str, calls: int, abstract: str) -> Task:
    solution = [ToolCall(f"tool{k}") for k in range(calls)]
    return Task(task_id, "e", "E", {}, "do it", [], solution, abstract)


POOL = Pool({}, [_task("a", 1, "A"), _task("b", 2, "B"), _task("c", 1, "A"), _task("d", 2, "B")])
SPREAD, FLAT = [0.0, 1.0], [1.0, 1.0]

# EnvSched's run: three steps of two groups, with q at the pick
ENVSCHED = [
    {"step": 0, "task_ids": ["a", "b"], "rewards": [FLAT, SPREAD], "score": [0.9, 0.2],
     "stage": ["coverage", "exploitation"]},
    {"step": 1, "task_ids": ["c", "a"], "rewards": [[0.0, 0.5], SPREAD], "score": [0.8, 0.7],
     "stage": ["coverage", "exploitation"]},
    {"step": 2, "task_ids": ["d", "b"], "rewards": [FLAT, FLAT], "score": [0.6, 0.5],
     "stage": ["coverage", "exploitation"]},
]  # fmt: skip
RANDOM_SEED0 = [{"step": 0, "task_ids": ["c", "d"], "rewards": [SPREAD, [0.0, 0.0]]}]
RANDOM_SEED1 = [{"step": 0, "task_ids": ["a", "b"], "rewards": [SPREAD, SPREAD]}]


def test_one_runs_picks():
    picks = run_picks(ENVSCHED, POOL)
    assert [(p.task_id, p.first_visit, p.informative) for p in picks] == [
        ("a", True, False),
        ("b", True, True),
        ("c", True, True),
        ("a", False, True),
        ("d", True, False),
        ("b", False, False),
    ]
    assert [p.calls for p in picks] == [1, 2, 1, 1, 2, 2] and picks[0].stage == "coverage"


def test_the_diagnosis_by_hand():
    runs = {
        "envsched": [{"seed": 0, "groups": ENVSCHED}, {"seed": 1, "groups": ENVSCHED}],
        "random": [{"seed": 0, "groups": RANDOM_SEED0}, {"seed": 1, "groups": RANDOM_SEED1}],
        "no_groups": [{"seed": 0}],  # a run made before groups were kept: left out
    }
    diagnosis = diagnose_picks(runs, POOL)
    assert set(diagnosis) == {"envsched", "random"}
    seed = diagnosis["envsched"]["per_seed"][0]
    assert seed["groups"] == 6
    assert seed["calls_share"] == {"1": 0.5, "2": 0.5}
    # 1-call groups: a flat, c spread, a spread; 2-call: b spread, d flat, b flat
    assert seed["zero_share_by_calls"] == pytest.approx({"1": 1 / 3, "2": 2 / 3})
    assert seed["first_visits"] == 4 and seed["zero_share_first"] == 0.5
    assert seed["repeat_visits"] == 2 and seed["zero_share_repeat"] == 0.5
    # first visits: informative b (0.2) and c (0.8) against flat a (0.9) and d (0.6): of the
    # four pairs only c over d is ordered right
    assert seed["auc_first"] == 0.25
    assert seed["abstracts_per_batch"] == pytest.approx(4 / 3)  # {A, B}, {A}, {B}
    assert seed["top_abstracts_share"] == 1.0 and seed["abstract_counts"] == {"A": 3, "B": 3}
    # 3 of 6 groups informative, every group trained: the zero-variance ones are the waste
    assert seed["zero_share"] == 0.5 and seed["wasted_share"] == 0.5
    # random: seed 0 wastes 1 of 2 groups, seed 1 none; EnvSched 0.5 at both
    assert diagnosis["envsched"]["wasted_minus_random"]["mean"] == pytest.approx(0.25)
    # random's base rate: 0.5 at seed 0, 1.0 at seed 1; EnvSched 0.5 at both
    margin = diagnosis["envsched"]["informative_first_minus_random"]
    assert margin["mean"] == pytest.approx(-0.25)
    assert margin["ci95"] == pytest.approx(12.7062047 * math.sqrt(0.125) / math.sqrt(2))
    assert diagnosis["random"]["auc_first"] is None  # random ranks by no score
    assert diagnosis["envsched"]["auc_first"]["mean"] == 0.25
    text = render_picks(diagnosis)
    assert "| envsched | 0.500 ± 0.000 | 0.500 ± 0.000 |" in text
    assert "-0.250 ± 3.177 (inside the noise)" in text


def test_auc_ties_and_one_class():
    assert auc([0.5, 0.5], [True, False]) == 0.5
    assert auc([0.1, 0.9, 0.5], [False, True, True]) == 1.0
    assert math.isnan(auc([0.1, 0.2], [True, True]))


def test_a_task_outside_the_pool_is_an_error():
    with pytest.raises(ValueError, match="task 'zz' of a run is not in the pool"):
        run_picks([{"step": 0, "task_ids": ["zz"], "rewards": [FLAT]}], POOL)


def test_a_run_that_trains_fewer_groups_than_it_rolls_out_wastes_the_rest():
    picks = run_picks(ENVSCHED, POOL)  # 6 groups, 3 informative
    # DAPO-like: the 3 informative groups rolled out, only 2 trained (one trimmed)
    assert seed_summary(picks, trained=2)["wasted_share"] == pytest.approx(4 / 6)
    # every group trained: the informative ones count, the zero-variance ones are waste
    assert seed_summary(picks, trained=6)["wasted_share"] == pytest.approx(0.5)
    records = [{"step": -1}, {"step": 0, "trained_groups": 2}, {"step": 1, "trained_groups": 0}]
    runs = {"dapo": [{"seed": 0, "groups": ENVSCHED, "records": records}]}
    assert diagnose_picks(runs, POOL)["dapo"]["per_seed"][0]["wasted_share"] == pytest.approx(4 / 6)


def test_the_calls_before_rollout_by_hand():
    """Repeats of ENVSCHED: a at step 1 (zero before, informative now: a revival) and b at
    step 2 (informative before, zero now: missed by the history call). With the spread target's
    P(v > 0) at each pick, calls where it is below 1/2."""
    spread = [[0.3, 0.8], [0.6, 0.4], [0.2, 0.9]]
    groups = [{**group, "spread": p} for group, p in zip(ENVSCHED, spread, strict=True)]
    picks = run_picks(groups, POOL)
    assert [p.zero_before for p in picks] == [None, None, None, True, None, False]
    summary = seed_summary(picks, trained=3)
    assert summary["groups_per_trained"] == 2.0
    # one repeat called (a), informative: precision 0; one zero repeat (b), not called
    assert summary["history_call"] == {
        "precision": 0.0, "recall": 0.0, "called": 1, "zero": 1, "groups": 2
    }  # fmt: skip
    assert summary["revival"] == 1.0
    # first visits a b c d: called a (0.3, zero) and d (0.2, zero); zero: a and d
    assert summary["spread_call"]["first"] == {
        "precision": 1.0, "recall": 1.0, "called": 2, "zero": 2, "groups": 4
    }  # fmt: skip
    # repeats a (0.4: called, informative) and b (0.9, zero): precision 0, recall 0
    assert summary["spread_call"]["repeat"]["precision"] == 0.0
    # the score at repeats: a 0.7 (informative) above b 0.5 (zero)
    assert summary["auc_repeat"] == 1.0
    no_calls = seed_summary(run_picks(ENVSCHED, POOL))
    assert no_calls["spread_call"] == {} and no_calls["groups_per_trained"] is None
    # a spread target that never calls a pick zero-variance: recall 0, precision undefined
    confident = [{**group, "spread": [0.9] * len(group["task_ids"])} for group in ENVSCHED]
    never = seed_summary(run_picks(confident, POOL))["spread_call"]["first"]
    assert never["recall"] == 0.0 and math.isnan(never["precision"]) and never["called"] == 0
    runs = {"envsched_spread": [{"seed": 0, "groups": confident, "records": [{"step": -1}]}]}
    summary = diagnose_picks(runs, POOL)["envsched_spread"]["spread_call_first"]
    assert summary["precision"] is None and summary["recall"]["mean"] == 0.0


def test_waste_over_training_by_hand():
    """ENVSCHED spends 4 rollouts a step (two groups of K = 2), 12 in all: in fifths of them,
    step 0 starts the first, step 1 (at 4) the second, step 2 (at 8) the fourth."""
    windows = waste_over_training(run_picks(ENVSCHED, POOL), windows=5)
    assert windows[0] == {"groups": 2, "zero": 0.5, "all0": 0.0, "all1": 0.5}  # a all ones
    assert windows[1] == {"groups": 2, "zero": 0.0, "all0": 0.0, "all1": 0.0}
    assert windows[2] is None and windows[4] is None
    assert windows[3] == {"groups": 2, "zero": 1.0, "all0": 0.0, "all1": 1.0}
    zeros = [{"step": 0, "task_ids": ["a", "b"], "rewards": [[0.0, 0.0], [0.5, 0.5]]}]
    (only,) = waste_over_training(run_picks(zeros, POOL), windows=1)
    assert only == {"groups": 2, "zero": 1.0, "all0": 0.5, "all1": 0.0}  # b: partial credit
