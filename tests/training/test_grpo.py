"""GRPO's pure functions on hand-made numbers."""

from __future__ import annotations

import math

import pytest
import torch

from envsched_gnn.training.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    aggregate_tokens,
    clip_fraction,
    get_advantage_estimator,
    group_advantages,
    kl_penalty,
    policy_loss,
    token_log_probs,
)


def test_group_advantages_divide_by_sample_std():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5], dtype=torch.float64)
    advantages = group_advantages(rewards, group_size=4, normalize_std=True, eps=0.0)
    std = math.sqrt(4 * 0.25 / 3)  # sample std of (1, 0, 0, 1)
    expected = [0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std, 0.0, 0.0, 0.0, 0.0]
    assert torch.allclose(advantages, torch.tensor(expected, dtype=torch.float64))


def test_dr_grpo_does_not_divide():
    rewards = torch.tensor([1.0, 0.0, 0.25, 0.75], dtype=torch.float64)
    advantages = group_advantages(rewards, group_size=2, normalize_std=False)
    assert advantages.tolist() == [0.5, -0.5, -0.25, 0.25]
    assert torch.equal(get_advantage_estimator("dr_grpo")(rewards, 2), advantages)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
@pytest.mark.parametrize("value", [0.0, 1.0, 0.3, 1.0 / 3.0])
def test_zero_variance_groups_get_exactly_zero(name, value):
    rewards = torch.tensor([value] * 8 + [0.0, 1.0] * 4, dtype=torch.float32)
    advantages = get_advantage_estimator(name)(rewards, 8)
    assert torch.all(advantages[:8] == 0.0)
    assert torch.all(advantages[8:].abs() > 0.0)


def test_group_advantages_reject_bad_shapes():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(6), group_size=4)
    with pytest.raises(ValueError, match="shape"):
        group_advantages(torch.zeros(2, 4), group_size=4)
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        get_advantage_estimator("ppo")


def test_policy_loss_is_token_mean_of_clipped_surrogate():
    # ratios exp(.) = 1.5 (clipped to 1.2 for A > 0), 0.5 (clipped to 0.8 for A < 0 -> keeps
    # the larger loss), 1.0, and a masked token.
    old = torch.zeros(4, dtype=torch.float64)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.0, 3.0], dtype=torch.float64))
    adv = torch.tensor([2.0, -1.0, 0.5, 7.0], dtype=torch.float64)
    mask = torch.tensor([1, 1, 1, 0])
    # token 0: max(-2*1.5, -2*1.2) = -2.4; token 1: max(0.5, 0.8) = 0.8; token 2: -0.5
    loss = policy_loss(logp, old, adv, mask, clip=0.2)
    assert loss.item() == pytest.approx((-2.4 + 0.8 - 0.5) / 3)
    assert clip_fraction(logp, old, mask, clip=0.2).item() == pytest.approx(2 / 3)


def test_policy_loss_gradient_vanishes_when_clipped():
    old = torch.zeros(2, dtype=torch.float64)
    logp = torch.log(torch.tensor([1.5, 1.1], dtype=torch.float64)).requires_grad_()
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    policy_loss(logp, old, adv, torch.ones(2), clip=0.2).backward()
    # d/dlogp of -A*rho/2 = -rho/2 on the unclipped token; 0 on the clipped one
    assert logp.grad.tolist() == pytest.approx([0.0, -1.1 / 2])


def test_dr_grpo_aggregation_divides_by_constant_and_micro_batches_add_up():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert aggregate_tokens(
        values, mask, "token_sum_norm", denominator=6.0
    ).item() == pytest.approx(7.0 / 6.0)
    whole = aggregate_tokens(values, mask)
    parts = sum(aggregate_tokens(values[i], mask[i], denominator=3.0) for i in range(2))
    assert whole.item() == pytest.approx(7.0 / 3.0) == pytest.approx(parts.item())
    with pytest.raises(ValueError, match="constant denominator"):
        aggregate_tokens(values, mask, "token_sum_norm")
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate_tokens(values, mask, "seq_mean")


def test_kl_penalty_k3():
    logp = torch.log(torch.tensor([0.5, 0.25, 0.2], dtype=torch.float64))
    ref = torch.log(torch.tensor([0.5, 0.5, 0.1], dtype=torch.float64))
    kl = kl_penalty(logp, ref)
    # exp(d) - d - 1 with d = ref - logp: d = 0, log 2, log 0.5
    expected = [0.0, 2.0 - math.log(2.0) - 1.0, 0.5 + math.log(2.0) - 1.0]
    assert kl.tolist() == pytest.approx(expected)
    assert torch.all(kl >= 0)


def test_token_log_probs_picks_next_token():
    logits = torch.log(torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]]))
    ids = torch.tensor([[0, 1, 2]])
    assert token_log_probs(logits, ids)[0].tolist() == pytest.approx([math.log(0.2), math.log(0.8)])
    tempered = torch.log_softmax(logits[0, :2] / 2.0, dim=-1)
    expected = [tempered[0, 1].item(), tempered[1, 2].item()]
    assert token_log_probs(logits, ids, temperature=2.0)[0].tolist() == pytest.approx(expected)
