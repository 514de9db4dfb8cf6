"""The ablation's budget-step arithmetic: the score columns and the evaluation interval."""

import pytest

from envsched_gnn.eval.ablation.config import AblationConfig, eval_every_for, score_steps_for


@pytest.mark.parametrize(
    ("steps", "columns", "every"),
    [(200, (40, 120, 200), 40), (10, (2, 6, 10), 2), (2, (1, 2), 1), (7, (2, 6, 7), 2)],
)
def test_score_columns_scale_the_papers_40_120_200(steps, columns, every):
    assert score_steps_for(steps) == columns
    assert eval_every_for(steps) == every
    assert AblationConfig(steps=steps).score_steps == columns


def test_fewer_evaluations_score_at_them():
    """evaluations = 2 at S = 50: held-out at 25 and 50, the score columns follow."""
    config = AblationConfig(steps=50, evaluations=2)
    assert eval_every_for(50, 2) == 25
    assert config.score_steps == (25, 50)
    assert AblationConfig.evaluations == 5  # the CLI's --evaluations default
