"""Resume: 2 steps, a checkpoint, 2 more steps give exactly the uninterrupted 4-step run
(same seed, CPU): the same batches, the same rewards, bit-identical weights."""

from __future__ import annotations

import pytest
import torch

from envsched_gnn.training.grpo.module import CHECKPOINT_KEY
from envsched_gnn.training.policy import load_policy
from tests.training.grpo_setup import run, small_config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "passes",
    [{}, {"ppo_epochs": 2, "mini_batches": 2, "lr_warmup_steps": 5}],
    ids=["one-pass", "two-epochs-two-mini-batches-warmup"],
)
def test_resumed_run_equals_the_uninterrupted_one(tmp_path, passes):
    config = small_config(steps=4, **passes)
    whole = run(config, tmp_path / "whole")
    first = run(config, tmp_path / "part", stop_after=2)
    checkpoint = tmp_path / "part" / "checkpoints" / "last.ckpt"
    state = torch.load(checkpoint, weights_only=False)[CHECKPOINT_KEY]
    assert state["next_step"] == 2 and len(state["scheduler"]["log"]["observations"]) == 4
    # the batches and rewards are the scheduler's log; the checkpoint does not repeat them
    assert "batches" not in state and "rewards" not in state
    assert first.batches == whole.batches[:2]

    resumed = run(config, tmp_path / "resumed", resume=checkpoint)

    assert resumed.batches == whole.batches and len(whole.batches) == 4
    assert resumed.rewards == whole.rewards
    assert resumed.rollouts == whole.rollouts == 4 * 2 * 4
    spread = [r for step in whole.rewards for r in step.values() if min(r) < max(r)]
    assert spread, "no group with reward spread: the weights would not move"
    a, _ = load_policy(tmp_path / "whole" / "policy")
    b, _ = load_policy(tmp_path / "resumed" / "policy")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


def test_resume_refuses_a_checkpoint_of_another_seed(tmp_path):
    run(small_config(steps=2), tmp_path / "part", stop_after=1)
    with pytest.raises(ValueError, match="seed"):
        run(
            small_config(steps=2, seed=4),
            tmp_path / "other",
            resume=tmp_path / "part" / "checkpoints" / "last.ckpt",
        )
