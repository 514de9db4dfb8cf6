"""The ablation's numbers on hand-made curves."""

import pytest

from envsched_gnn.eval.ablation.config import STEP_METRICS, AblationConfig
from envsched_gnn.eval.ablation.summary import summarise


def _run(name, seed, scores, pools, trained=None):
    """A policy-learner run: the start, then one step each with its evaluations; every step
    an update of B = 2 groups unless ``trained`` says how many each trained."""
    records = [{"step": -1, "budget_step": 0.0, "score": scores[0], "pool_score": pools[0]}]
    trained = trained or [2] * (len(scores) - 1)
    for step, (score, pool) in enumerate(zip(scores[1:], pools[1:], strict=True)):
        records.append(
            {"step": step, "budget_step": step + 1.0, "score": score, "pool_score": pool}
            | {"trained_groups": trained[step]}
            | dict.fromkeys(STEP_METRICS, 0.0)
        )
    return {"name": name, "seed": seed, "records": records, "wall_s": 1.0, "schedule_s": 0.1,
            "rollouts": 32}  # fmt: skip


def test_pool_reward_is_summarised_and_paired_like_the_score():
    config = AblationConfig(
        steps=2,
        batch_size=2,
        learner="policy",
        evaluations=2,
        schedulers=("envsched", "random"),
        k_grid=(),
        score_steps=(1, 2),
    )
    runs = [
        _run("envsched", 0, [0.5, 0.6, 0.7], [0.4, 0.5, 0.8]),
        _run("envsched", 1, [0.5, 0.6, 0.6], [0.4, 0.6, 0.7]),
        _run("random", 0, [0.5, 0.5, 0.6], [0.4, 0.4, 0.5]),
        _run("random", 1, [0.5, 0.55, 0.6], [0.4, 0.5, 0.6]),
    ]
    results = summarise(runs, config)
    envsched = results["envsched"]
    assert envsched["pool_score"]["2"]["mean"] == pytest.approx(0.75)
    assert envsched["pool_score"]["2"]["per_seed"] == pytest.approx([0.8, 0.7])
    # paired by seed: (0.8 - 0.5, 0.7 - 0.6) = (0.3, 0.1)
    margin = envsched["pool_margin_over_random"]["2"]
    assert margin["mean"] == pytest.approx(0.2) and margin["per_seed"] == pytest.approx([0.3, 0.1])
    assert envsched["margin_over_random"]["2"]["per_seed"] == pytest.approx([0.1, 0.0])
    assert envsched["pool_curve"]["score_mean"] == pytest.approx([0.4, 0.55, 0.75])
    assert "pool_margin_over_random" in results["random"]


def test_updates_count_the_steps_that_trained_a_group():
    """DAPO's refill: a step whose batch left its groups pending made no update."""
    config = AblationConfig(
        steps=2, batch_size=2, learner="policy", schedulers=("dapo", "random"), k_grid=()
    )
    runs = [
        _run("dapo", seed, [0.5, 0.5, 0.6], [0.4, 0.4, 0.5], trained=[0, 2]) for seed in (0, 1)
    ] + [_run("random", seed, [0.5, 0.5, 0.6], [0.4, 0.4, 0.5]) for seed in (0, 1)]
    results = summarise(runs, config)
    assert results["dapo"]["updates"]["per_seed"] == [1, 1]
    assert results["random"]["updates"]["per_seed"] == [2, 2]
