"""The ablation's numbers on hand-made curves."""

import pytest

from envsched_gnn.eval.ablation_config import STEP_METRICS, AblationConfig
from envsched_gnn.eval.ablation_summary import summarise


def _run(name, seed, scores, pools):
    """A policy-learner run: the start, then one update per step with its evaluations."""
    records = [{"step": -1, "budget_step": 0.0, "score": scores[0], "pool_score": pools[0]}]
    for step, (score, pool) in enumerate(zip(scores[1:], pools[1:], strict=True)):
        records.append(
            {"step": step, "budget_step": step + 1.0, "score": score, "pool_score": pool}
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
