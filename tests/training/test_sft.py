"""SFT warm start on the hand-made pool: data, the shared-prefix loss, a short real run."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.agent_format import AgentConfig, ChatFormat
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.sft import CosineBudget, SFTConfig, policy_token_loss, sft_tasks
from envsched_gnn.training.sft_data import (
    GroupedBatchSampler,
    SFTDataset,
    pad_collate,
    render_references,
    run_references,
)
from envsched_gnn.training.shared_prefix import shared_prefix_length
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import TINY_SFT, trained_policy_dir, untrained_policy_dir


@pytest.fixture(scope="module")
def examples():
    pool = handmade_pool()
    _, tokenizer = load_policy(untrained_policy_dir())
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        runs = run_references(runtime, pool.tasks)
    return runs, render_references(ChatFormat(tokenizer), pool, runs, AgentConfig())


def test_references_run_in_the_runtime_and_score_one(examples):
    runs, rendered = examples
    assert len(runs) == len(handmade_pool().tasks) == len(rendered)
    for run in runs:
        assert run.reward == 1.0
        assert len(run.results) == len(run.task.reference_solution)
        assert all(result.get("success") for result in run.results)
    assert [env for env, _ in rendered] == [run.task.env_id for run in runs]


def test_dataset_labels_only_the_policy_tokens(examples):
    _, rendered = examples
    dataset = SFTDataset(rendered, max_length=10_000)
    for index, (_, episode) in enumerate(rendered):
        ids, labels = dataset[index]
        mask = torch.tensor(episode.policy_mask, dtype=torch.bool)
        assert torch.equal(labels[mask], ids[mask])
        assert torch.all(labels[~mask] == -100)
    assert sorted(map(len, dataset.groups)) == [3, 3]
    short = SFTDataset(rendered, max_length=min(len(e.input_ids) for _, e in rendered))
    assert short.dropped == len(rendered) - len(short)


def test_grouped_batches_stay_within_a_group_and_reshuffle():
    sampler = GroupedBatchSampler([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9, 10]], batch_size=2, seed=0)
    first, second = list(sampler), list(sampler)
    assert len(first) == len(sampler) == 2 + 1 + 2
    for batches in (first, second):
        for batch in batches:
            assert {i < 5 for i in batch} == {True} or all(i >= 5 for i in batch)
            assert len({(i >= 5) + (i >= 7) for i in batch}) == 1
    assert first != second


def test_length_buckets_cut_padding_and_keep_every_example():
    lengths = [(7 * i) % 23 + 1 for i in range(32)]
    plain = list(GroupedBatchSampler([range(32)], batch_size=4, seed=0))
    bucketed = list(GroupedBatchSampler([range(32)], 4, 0, lengths, bucket_batches=8))

    def padded(batches):
        return sum(len(b) * max(lengths[i] for i in b) for b in batches)

    assert sorted(i for b in bucketed for i in b) == list(range(32))
    assert padded(bucketed) < padded(plain)
    for batch in bucketed:
        assert max(lengths[i] for i in batch) - min(lengths[i] for i in batch) <= 6


def test_shared_prefix_loss_equals_the_plain_loss(examples):
    _, rendered = examples
    model, tokenizer = load_policy(untrained_policy_dir(), dtype=torch.float64)
    dataset = SFTDataset(rendered, max_length=10_000)
    batch = pad_collate(tokenizer.pad_token_id)([dataset[i] for i in dataset.groups[0]])
    assert shared_prefix_length(batch["input_ids"], batch["labels"] != -100) > 100
    fast = policy_token_loss(model, batch)
    plain = model(**batch, use_cache=False).loss
    assert float(fast) == pytest.approx(float(plain), rel=1e-6)


def test_cosine_budget_warms_up_then_decays_to_the_floor():
    schedule = CosineBudget(SFTConfig(minutes=0, max_steps=100, warmup_steps=10, min_lr_ratio=0.1))
    assert schedule(0) == pytest.approx(0.1)
    assert schedule(9) == pytest.approx(1.0)
    assert schedule(50) == pytest.approx(0.1 + 0.9 * 0.5)
    assert schedule(100) == pytest.approx(0.1)
    values = [schedule(s) for s in range(10, 101)]
    assert values == sorted(values, reverse=True)


def test_sft_run_lowers_the_loss_and_writes_an_hf_folder():
    policy = trained_policy_dir()
    run = policy.parent
    summary = json.loads((run / "sft_summary.json").read_text())
    assert summary["steps"] == TINY_SFT.max_steps
    assert summary["final_loss"] < 0.5 * summary["first_loss"]
    model, tokenizer = load_policy(policy)
    assert tokenizer.chat_template and model.config.model_type == "qwen3"
    (metrics,) = list((run / "sft_logs").glob("version_*/metrics.csv"))
    with metrics.open() as handle:
        losses = [float(row["sft/loss"]) for row in csv.DictReader(handle) if row["sft/loss"]]
    assert len(losses) >= 4 and losses[-1] < losses[0]
    assert (run / "checkpoints" / "last.ckpt").is_file()


def test_extra_sft_tasks_are_no_longer_than_the_pools_references():
    pool = generate_pool(n_envs=2, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    serving, tasks = sft_tasks(pool, SFTConfig(extra_tasks_per_env=5))
    assert len(tasks) == 2 * 5 + 2 * 5
    assert {len(task.reference_solution) for task in tasks} == {1, 2}
    assert {task.task_id for task in tasks} <= {task.task_id for task in serving.tasks}
