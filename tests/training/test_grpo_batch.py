"""The prefix-shared update (float64, a small model): the same log-probabilities, loss and
gradients as a plain forward of every row."""

from __future__ import annotations

import pytest
import torch

from envsched_gnn.bench.grpo import token_log_probs
from envsched_gnn.training.grpo.batch import (
    UpdateItem,
    collate,
    pack_micro_batches,
    policy_log_probs,
    split_groups,
)
from envsched_gnn.training.grpo.objective import policy_loss
from envsched_gnn.training.shared_prefix import shared_prefix_length
from tests.training.small_lm import float64_norms, group, small_model


@pytest.fixture(autouse=True)
def norms_in_float64(monkeypatch):
    float64_norms(monkeypatch)


def plain_log_probs(model, batch, temperature):
    """Every row whole, all positions through the head (the update before prefix sharing)."""
    logits = model(input_ids=batch.ids).logits
    return token_log_probs(logits, batch.ids, temperature)[batch.policy[:, 1:]]


def loss_and_grads(model, logp, batch):
    loss = policy_loss(logp, batch.old_logp.double(), batch.advantages.double(), logp.numel())
    grads = torch.autograd.grad(loss, [p for p in model.parameters()])
    return loss, grads


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("rows", [1, 3, 5])
def test_prefix_shared_equals_plain_forward(temperature, rows):
    model = small_model()
    batch = collate(group("t", seed=rows, rows=rows))
    assert shared_prefix_length(batch.ids, batch.policy) == 10  # prompt 11, first policy at 11
    shared, entropy = policy_log_probs(model, batch, temperature)
    plain = plain_log_probs(model, batch, temperature)
    assert shared.dtype == torch.float64 and shared.shape == (batch.policy_tokens,)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-12)
    assert torch.all(entropy > 0)

    loss_shared, grads_shared = loss_and_grads(
        model, policy_log_probs(model, batch, temperature)[0], batch
    )
    loss_plain, grads_plain = loss_and_grads(
        model, plain_log_probs(model, batch, temperature), batch
    )
    torch.testing.assert_close(loss_shared, loss_plain, rtol=0, atol=1e-12)
    for a, b in zip(grads_shared, grads_plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_rows_of_different_prompts_share_nothing_and_still_agree():
    model = small_model()
    items = group("a", seed=1, rows=2) + group("b", seed=2, rows=2)
    batch = collate(items)
    assert shared_prefix_length(batch.ids, batch.policy) == 0
    torch.testing.assert_close(
        policy_log_probs(model, batch)[0], plain_log_probs(model, batch, 1.0), rtol=0, atol=1e-12
    )


def test_micro_batches_keep_one_task_each_within_the_budgets():
    items = group("a", seed=1, rows=5) + group("b", seed=2, rows=2) + group("a", seed=3, rows=1)
    batches = pack_micro_batches(items, max_rows=4, max_tokens=10_000)
    assert [len(b) for b in batches] == [4, 2, 2]
    assert [{i.episode.task_id for i in b} for b in batches] == [{"a"}, {"a"}, {"b"}]
    assert sorted(id(i) for b in batches for i in b) == sorted(id(i) for i in items)
    longest = max(i.episode.token_ids.numel() for i in items)
    tight = pack_micro_batches(items, max_rows=8, max_tokens=2 * longest)
    assert all(len(b) * max(i.episode.token_ids.numel() for i in b) <= 2 * longest for b in tight)


def test_one_update_raises_positive_and_lowers_negative_advantage_tokens():
    """One SGD step on the clipped loss (float64): the policy tokens of the episode with
    A > 0 become more likely, those of the episode with A < 0 less likely, token by token;
    a wrong sign, mask or one-position shift of the targets fails this."""
    model = small_model()
    up = group("up", seed=11, rows=1)[0]
    down = group("down", seed=12, rows=1)[0]
    items = [UpdateItem(1.0, up.episode), UpdateItem(-1.0, down.episode)]
    batches = [collate([item]) for item in items]
    # measured with the plain forward, independently of the update's own code path
    with torch.no_grad():
        before = [plain_log_probs(model, b, 1.0) for b in batches]
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    optimizer.zero_grad()
    total = float(sum(b.policy_tokens for b in batches))
    for b in batches:
        logp, _ = policy_log_probs(model, b)
        # on-policy: the rollout's log-probabilities are the current ones (ratio 1)
        loss = policy_loss(logp, logp.detach(), b.advantages.double(), total, 0.2)
        loss.backward()
    optimizer.step()
    with torch.no_grad():
        after = [plain_log_probs(model, b, 1.0) for b in batches]
    assert torch.all(after[0] > before[0]), (before[0], after[0])
    assert torch.all(after[1] < before[1]), (before[1], after[1])


@pytest.mark.parametrize(
    ("n", "parts", "sizes"), [(5, 2, [3, 2]), (4, 2, [2, 2]), (2, 3, [1, 1, 0]), (7, 1, [7])]
)
def test_mini_batches_are_consecutive_near_equal_chunks(n, parts, sizes):
    groups = [f"t{i}" for i in range(n)]
    chunks = split_groups(groups, parts)
    assert [len(c) for c in chunks] == sizes
    assert [g for c in chunks for g in c] == groups
