"""Resume: 2 steps, a checkpoint, 2 more steps give exactly the uninterrupted 4-step run
(same seed, CPU): the same batches, the same rewards, bit-identical weights."""

from __future__ import annotations

import math

import pytest
import torch

from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig
from envsched_gnn.training.grpo.module import CHECKPOINT_KEY
from envsched_gnn.training.policy import load_policy
from tests.training.grpo_setup import grpo_policy_dir, run, small_config

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


@pytest.mark.timeout(180)  # a spinning fit loop fails here, not at the suite's 600 s
def test_resuming_a_finished_run_trains_nothing_and_gives_its_result(tmp_path):
    """What the store's error line tells a user whose server did not come back to run: the
    run's ``last.ckpt`` is after its last step, so the resumed run only ends, with the run's
    result and weights (its stream is empty; Lightning's fit loop would spin on it)."""
    config = small_config(steps=2)
    whole = run(config, tmp_path / "whole")
    resumed = run(
        config, tmp_path / "resumed", resume=tmp_path / "whole" / "checkpoints" / "last.ckpt"
    )
    assert resumed.batches == whole.batches and resumed.rewards == whole.rewards
    assert resumed.rollouts == whole.rollouts == 2 * 2 * 4
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


@pytest.mark.parametrize(
    "scheduler, sampling",
    [
        ("dapo", DynamicSamplingConfig()),
        ("envsched_spread+ds", DynamicSamplingConfig(generation="greso", surplus="keep")),
    ],
)
def test_resume_mid_accumulation_gives_the_uninterrupted_run(tmp_path, scheduler, sampling):
    """Dynamic sampling's refill (B = 3 of the 4 train tasks, so a generation batch is all 4),
    for random with verl's recipe and for EnvSched's spread target sizing its own batches and
    keeping the surplus: step 0 leaves groups with spread pending and makes no update; the
    checkpoint after it carries them (records and episodes), and the resumed run makes the
    uninterrupted run's updates: the same batches, rewards, groups trained and bit-identical
    weights. With weight decay on, the step without an update leaves the policy exactly as it
    started."""
    config = small_config(
        scheduler=scheduler, sampling=sampling, batch_size=3, steps=4, weight_decay=0.1
    )
    whole = run(config, tmp_path / "whole")
    opening = whole.steps[0]
    assert opening["batch/kept_groups"] == 0 and opening["sampling/groups_pending"] > 0
    assert math.isnan(opening["train/loss"])
    assert set(opening) == set(whole.steps[1])  # the same names, with or without an update
    run(config, tmp_path / "part", stop_after=1)
    checkpoint = tmp_path / "part" / "checkpoints" / "last.ckpt"
    state = torch.load(checkpoint, weights_only=True)[CHECKPOINT_KEY]
    pending = [(row["step"], row["task_id"]) for row in state["pending"]]
    refill = state["scheduler"]["refill"]["pending"]
    assert (
        pending == [(s, t) for s, t, _ in refill]
        and len(pending) == opening["sampling/groups_pending"]
    )
    assert all(len(row["records"]) == len(row["episodes"]) == 4 for row in state["pending"])
    start, _ = load_policy(grpo_policy_dir())
    untouched, _ = load_policy(tmp_path / "part" / "policy")
    for (name, x), y in zip(
        start.state_dict().items(), untouched.state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), name

    resumed = run(config, tmp_path / "resumed", resume=checkpoint)

    assert resumed.batches == whole.batches and resumed.rewards == whole.rewards
    assert resumed.rollouts == whole.rollouts == 4 * 3 * 4  # the budget S B K
    names = ["batch/kept_groups", "train/loss", *(n for n in opening if n.startswith("sampling/"))]

    def trained(steps):  # NaN (no update) as None, so that equal runs compare equal
        return [[None if math.isnan(m[n]) else m[n] for n in names] for m in steps]

    assert trained(resumed.steps) == trained(whole.steps)
    a, _ = load_policy(tmp_path / "whole" / "policy")
    b, _ = load_policy(tmp_path / "resumed" / "policy")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
