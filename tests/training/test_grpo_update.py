"""GRPO's update without Lightning (plain hooks, one process, a small float64 model): the
on-policy loss is the advantage-weighted token mean, micro-batches add up to the mini-batch's
gradient, and each pass takes ``mini_batches`` optimiser steps with the gradient synchronised
once per step."""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import pytest
import torch

from envsched_gnn.training.grpo.batch import collate, policy_log_probs
from envsched_gnn.training.grpo.config import GRPOConfig
from envsched_gnn.training.grpo.episodes import EpisodeRecord
from envsched_gnn.training.grpo.objective import group_advantages
from envsched_gnn.training.grpo.update import UPDATE_METRICS, GRPOUpdate, UpdateHooks
from tests.training.small_lm import float64_norms, group, small_model

REWARDS = {"a": [1.0, 0.0, 0.0, 1.0], "b": [1.0, 1.0, 0.0, 1.0]}
GROUPS = tuple(REWARDS.items())
BUDGET = 40


@pytest.fixture(autouse=True)
def norms_in_float64(monkeypatch):
    float64_norms(monkeypatch)


def step_episodes(model, on_policy: bool, groups=GROUPS):
    """The update's 4 episodes per group of ``groups`` ((task_id, rewards), group g's
    prompt and tokens drawn from seed g) as (index, episode) and their records;
    ``on_policy``: the rollout log-probabilities are the model's own (ratio 1)."""
    episodes = []
    for seed, (task_id, _) in enumerate(groups):
        for item in group(task_id, seed=seed, rows=4):
            episode = item.episode
            if on_policy:
                with torch.no_grad():
                    logp, _ = policy_log_probs(model, collate([item]))
                old = torch.zeros_like(episode.old_logprobs)
                old[episode.policy_mask] = logp.float()
                episode = replace(episode, old_logprobs=old)
            episodes.append((len(episodes), episode))
    records = [
        EpisodeRecord(
            index=index,
            task_id=episode.task_id,
            reward=groups[index // 4][1][index % 4],
            tools=frozenset(),
            policy_tokens=int(episode.policy_mask.sum()),
        )
        for index, episode in episodes
    ]
    return episodes, records


def plain_hooks(model, **overrides) -> UpdateHooks:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    values = dict(
        optimizer=optimizer,
        lr_scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: 1.0),
        backward=torch.Tensor.backward,
        no_sync=nullcontext,
        reduce_sum=lambda tensor: tensor,
        world_size=1,
        device=torch.device("cpu"),
    )
    values.update(overrides)
    return UpdateHooks(**values)


def config(**overrides) -> GRPOConfig:
    values = dict(batch_size=2, group_size=4, micro_batch_size=16, seed=5)
    values.update(overrides)
    return GRPOConfig(**values)


def frozen(model):
    ref = copy.deepcopy(model).eval()
    return ref.requires_grad_(False)


@pytest.mark.parametrize("aggregation", ["token_mean", "token_sum_norm"])
@pytest.mark.parametrize("kept", [["a", "b"], ["b"]])
def test_on_policy_loss_is_the_token_weighted_advantage(aggregation, kept):
    """First pass, one mini-batch, ratio 1 and policy = reference: the loss is
    ``-sum A(i,k) |T(i,k)| / D`` over the kept episodes, with no KL and nothing clipped."""
    model = small_model()
    episodes, records = step_episodes(model, on_policy=True)
    run = config(loss_aggregation=aggregation, kl_coef=0.1)
    update = GRPOUpdate(
        model, run, temperature=1.0, max_response_tokens=BUDGET, ref_policy=frozen(model)
    )
    # the update trains every group it is handed, numbered over its own groups
    mine = [(i, e) for i, e in episodes if e.task_id in kept]
    ours = [r for r in records if r.task_id in kept]
    first = ours[0].index
    mine = [(i - first, e) for i, e in mine]
    metrics = update(0, mine, [replace(r, index=r.index - first) for r in ours], plain_hooks(model))

    advantages = group_advantages(torch.tensor([r.reward for r in ours], dtype=torch.float64), 4)
    tokens = torch.tensor([float(r.policy_tokens) for r in ours], dtype=torch.float64)
    denominator = tokens.sum() if aggregation == "token_mean" else len(ours) * BUDGET
    assert metrics["train/loss"] == pytest.approx(-float((advantages * tokens).sum() / denominator))
    assert metrics["train/kl"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["train/clip_fraction"] == 0.0
    assert metrics["train/approx_kl"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["train/entropy"] > 0.0 and metrics["train/grad_norm"] > 0.0
    assert metrics["train/advantage_abs_mean"] == pytest.approx(float(advantages.abs().mean()))
    assert metrics["train/advantage_token_mass"] == pytest.approx(
        float((advantages.abs() * tokens).sum() / tokens.sum())
    )
    lengths = sum(e.token_ids.numel() for _, e in episodes if e.task_id in kept)
    assert metrics["train/tokens"] == lengths and metrics["train/optimizer_steps"] == 1.0


@pytest.mark.parametrize("aggregation", ["token_mean", "token_sum_norm"])
def test_micro_batches_add_up_to_the_mini_batch(aggregation):
    """Two passes of two mini-batches with the KL term: one episode per micro-batch gives the
    weights and metrics of whole-task micro-batches."""
    results = []
    for rows in (1, 16):
        model = small_model()
        episodes, records = step_episodes(model, on_policy=False)
        run = config(
            loss_aggregation=aggregation,
            kl_coef=0.1,
            ppo_epochs=2,
            mini_batches=2,
            micro_batch_size=rows,
        )
        update = GRPOUpdate(
            model, run, temperature=0.7, max_response_tokens=BUDGET, ref_policy=frozen(model)
        )
        metrics = update(3, episodes, records, plain_hooks(model))
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (one, one_weights), (whole, whole_weights) = results
    assert whole["train/kl"] > 0.0 and whole["train/approx_kl"] > 0.0
    assert one.keys() == whole.keys()
    for name in one:
        assert one[name] == pytest.approx(whole[name], rel=1e-9, abs=1e-12), name
    for a, b in zip(one_weights, whole_weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_each_pass_takes_mini_batches_steps_synchronised_once_each():
    """``ppo_epochs`` x ``mini_batches`` optimiser and schedule steps; within a step every
    backward but the last runs under ``no_sync`` (DDP would all-reduce once per step)."""
    model = small_model()
    episodes, records = step_episodes(model, on_policy=False)
    calls: list[str] = []

    @contextmanager
    def no_sync():
        calls.append("no_sync")
        yield

    def backward(loss):
        calls.append("backward")
        loss.backward()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.register_step_post_hook(lambda *_: calls.append("step"))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: 1.0)
    hooks = plain_hooks(
        model, optimizer=optimizer, lr_scheduler=schedule, no_sync=no_sync, backward=backward
    )
    # 4 episodes per task in micro-batches of at most 3: two micro-batches per mini-batch
    run = config(ppo_epochs=2, mini_batches=2, micro_batch_size=3)
    update = GRPOUpdate(model, run, temperature=1.0, max_response_tokens=BUDGET)
    metrics = update(0, episodes, records, hooks)

    assert metrics["train/optimizer_steps"] == 4.0 and schedule.last_epoch == 4
    assert calls == ["no_sync", "backward", "backward", "step"] * 4


def test_two_groups_of_one_task_are_two_groups():
    """DAPO's refill can train a task's group from one step with its group from a later step:
    groups are ``index // K``, so the update (advantages, mini-batches) is the one of two
    groups of different tasks."""
    results = []
    for second in ("a", "c"):
        model = small_model()
        groups = (("a", REWARDS["a"]), (second, REWARDS["b"]))
        episodes, records = step_episodes(model, on_policy=False, groups=groups)
        run = config(ppo_epochs=2, mini_batches=2, kl_coef=0.1)
        update = GRPOUpdate(
            model, run, temperature=1.0, max_response_tokens=BUDGET, ref_policy=frozen(model)
        )
        metrics = update(1, episodes, records, plain_hooks(model))
        results.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (same, same_weights), (other, other_weights) = results
    assert same["train/grad_norm"] > 0.0
    for name in same:
        assert same[name] == pytest.approx(other[name], rel=1e-9, abs=1e-12), name
    for a, b in zip(same_weights, other_weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_a_step_without_an_update_changes_nothing():
    """``idle``: after a real update (AdamW with weight decay, its moments set), weights,
    moments, step counts and the learning-rate schedule stay as they are; the metrics are the
    update's names, NaN; the optimiser wrapper is stepped ppo_epochs x mini_batches times,
    which Lightning counts. A step on zero gradients, by contrast, would move the weights."""
    model = small_model()
    episodes, records = step_episodes(model, on_policy=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
    stepped: list[int] = []
    optimizer.register_step_post_hook(lambda *_: stepped.append(1))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: 1.0 / (n + 1))
    hooks = plain_hooks(model, optimizer=optimizer, lr_scheduler=schedule)
    update = GRPOUpdate(
        model, config(ppo_epochs=2, mini_batches=2), temperature=1.0, max_response_tokens=BUDGET
    )
    trained = update(0, episodes, records, hooks)
    weights = [p.detach().clone() for p in model.parameters()]
    state = copy.deepcopy(optimizer.state_dict())
    stepped.clear()

    metrics = update.idle(hooks)

    assert list(metrics) == list(trained) == list(UPDATE_METRICS)
    assert all(math.isnan(value) for value in metrics.values())
    assert len(stepped) == 4 and schedule.last_epoch == 4
    for before, after in zip(weights, model.parameters(), strict=True):
        assert torch.equal(before, after)
    after = optimizer.state_dict()
    assert after["param_groups"] == state["param_groups"]
    for index, moments in state["state"].items():
        for name, value in moments.items():
            assert torch.equal(value, after["state"][index][name]), (index, name)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    assert not all(torch.equal(b, a) for b, a in zip(weights, model.parameters(), strict=True))
