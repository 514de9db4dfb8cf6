"""GRPO's pure functions on hand-made numbers."""

from __future__ import annotations

import math

import pytest
import torch

from envsched_gnn.training.grpo.objective import (
    ADVANTAGE_ESTIMATORS,
    clipped_tokens,
    get_advantage_estimator,
    group_advantages,
    kl_penalty,
    loss_denominator,
    policy_loss,
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
    # the larger loss), 1.0
    old = torch.zeros(3, dtype=torch.float64)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.0], dtype=torch.float64))
    adv = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64)
    # token 0: max(-2*1.5, -2*1.2) = -2.4; token 1: max(0.5, 0.8) = 0.8; token 2: -0.5
    loss = policy_loss(logp, old, adv, loss_denominator("token_mean", 3, 1, 40), clip=0.2)
    assert loss.item() == pytest.approx((-2.4 + 0.8 - 0.5) / 3)
    assert clipped_tokens(logp, old, clip=0.2).item() == 2


def test_policy_loss_gradient_vanishes_when_clipped():
    old = torch.zeros(2, dtype=torch.float64)
    logp = torch.log(torch.tensor([1.5, 1.1], dtype=torch.float64)).requires_grad_()
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    policy_loss(logp, old, adv, 2.0, clip=0.2).backward()
    # d/dlogp of -A*rho/2 = -rho/2 on the unclipped token; 0 on the clipped one
    assert logp.grad.tolist() == pytest.approx([0.0, -1.1 / 2])


def test_dr_grpo_divides_by_a_constant_and_micro_batches_add_up():
    # two episodes with 2 and 1 policy tokens, a budget of 3 tokens each
    logp = torch.zeros(3, dtype=torch.float64)
    adv = torch.tensor([-1.0, -2.0, -4.0], dtype=torch.float64)
    assert loss_denominator("token_sum_norm", 3, 2, 3) == 6.0
    assert policy_loss(logp, logp, adv, 6.0).item() == pytest.approx(7.0 / 6.0)
    whole = policy_loss(logp, logp, adv, loss_denominator("token_mean", 3, 2, 3))
    parts = policy_loss(logp[:2], logp[:2], adv[:2], 3.0) + policy_loss(
        logp[2:], logp[2:], adv[2:], 3.0
    )
    assert whole.item() == pytest.approx(7.0 / 3.0) == pytest.approx(parts.item())
    assert (
        loss_denominator("token_mean", 0, 0, 3)
        == loss_denominator("token_sum_norm", 0, 0, 3)
        == 1.0
    )
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        loss_denominator("seq_mean", 3, 2, 3)


def test_kl_penalty_k3():
    logp = torch.log(torch.tensor([0.5, 0.25, 0.2], dtype=torch.float64))
    ref = torch.log(torch.tensor([0.5, 0.5, 0.1], dtype=torch.float64))
    kl = kl_penalty(logp, ref)
    # exp(d) - d - 1 with d = ref - logp: d = 0, log 2, log 0.5
    expected = [0.0, 2.0 - math.log(2.0) - 1.0, 0.5 + math.log(2.0) - 1.0]
    assert kl.tolist() == pytest.approx(expected)
    assert torch.all(kl >= 0)
