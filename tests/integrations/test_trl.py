"""TRL's real ``GRPOTrainer`` (1.16) with EnvSched choosing the prompts, end to end on CPU:
the built-in policy architecture (tiny, untrained), a small generated pool and its real
graph, rewards from the environment runtime."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch
from transformers import TrainerCallback
from trl import GRPOConfig

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.integrations.schedulers import adapter_scheduler
from envsched_gnn.integrations.trl import (
    EnvSchedGRPOTrainer,
    RoundRewards,
    RuntimeReward,
    ScheduledSlots,
    pool_dataset,
)
from envsched_gnn.scheduler.registry import make_scheduler
from envsched_gnn.training.policy import load_policy
from tests.integrations.small_setup import small_graph, small_policy_dir, small_pool

pytestmark = pytest.mark.slow

B, K = 4, 4


class PromptRecorder:
    """A second reward function (weight 0): what TRL actually generated for, per round."""

    __name__ = "prompt_recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[list, list[str]]] = []

    def __call__(self, prompts, completions, task_id, **_):
        self.calls.append((list(prompts), list(task_id)))
        return [0.0] * len(prompts)


class StopAfter(TrainerCallback):
    """Interrupts training after ``steps`` optimiser steps (as a crash would, after a save)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.steps:
            control.should_training_stop = True


class Recorder(RuntimeReward):
    """The runtime reward, also keeping every reward it returned."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.returned: list[tuple[str, float]] = []

    def __call__(self, prompts, completions, task_id, **kwargs):
        scores = super().__call__(prompts, completions, task_id, **kwargs)
        self.returned += list(zip(task_id, scores, strict=True))
        return scores


def make_trainer(out, runtime, steps, *, callbacks=(), store=None, seed=0, envs=None):
    """The trainer on the small pool, or on its environments ``envs`` only."""
    model, tokenizer = load_policy(small_policy_dir())
    tokenizer.padding_side = "left"
    rewards = RoundRewards()
    graph, dataset = small_graph(), pool_dataset(small_pool())
    if envs is not None:
        graph = graph.subgraph(
            [t for t, e in zip(graph.task_ids, graph.env_ids, strict=True) if e in envs]
        )
        dataset = dataset.filter(lambda row: row["env_id"] in envs)
    scheduler = make_scheduler("envsched", graph, batch_size=B, seed=seed)
    reward, recorder = Recorder(runtime, rewards), PromptRecorder()
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=B * K,
        num_generations=K,
        max_completion_length=48,
        max_steps=steps,
        learning_rate=1e-3,
        logging_steps=1,
        save_steps=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=seed,
        reward_weights=[1.0, 0.0],
        disable_tqdm=True,
    )
    trainer = EnvSchedGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=dataset,
        reward_funcs=[reward, recorder],
        scheduler=scheduler,
        rewards=rewards,
        write_observations=store.write_observations if store is not None else None,
        callbacks=list(callbacks),
    )
    return trainer, reward, recorder


@pytest.fixture(scope="module")
def runtime():
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as rt:
        yield rt


def test_slots_follow_repeat_sampler_layout():
    slots = list(ScheduledSlots(batch_size=2, group_size=3, repeat_count=2, rounds=1))
    assert slots == [0, 0, 0, 1, 1, 1] * 2
    assert len(ScheduledSlots(2, 3, 2, 5)) == 5 * 2 * 2 * 3


@pytest.mark.store
def test_grpo_trainer_trains_on_the_scheduler_batches(tmp_path, runtime, store):
    torch.set_num_threads(1)
    store.write_pool(small_pool())
    trainer, reward, recorder = make_trainer(tmp_path, runtime, steps=3, store=store)
    trainer.train()
    run = trainer.envsched

    assert len(run.batches) == 3 and len(recorder.calls) == 3
    rows = {row["task_id"]: row for row in pool_dataset(small_pool())}
    for batch, (prompts, task_ids) in zip(run.batches, recorder.calls, strict=True):
        assert Counter(task_ids) == Counter({task: K for task in batch})
        assert all(p == rows[t]["prompt"] for p, t in zip(prompts, task_ids, strict=True))

    # every reward the environment returned reached observe, grouped by task and step, and
    # the store (written in the background, flushed when training ends)
    observed = [(t, r) for groups in run.observed for t, rs in groups.items() for r in rs]
    assert Counter(observed) == Counter(reward.returned) and len(observed) == 3 * B * K
    stored = {(o.task_id, o.step): list(o.rewards) for o in store.read_observations()}
    assert stored == {(t, s): r for s, groups in enumerate(run.observed) for t, r in groups.items()}
    assert run.unwritten == []

    # the batches are the scheduler's: a replica fed the same rewards chooses the same ones
    replica = make_scheduler("envsched", small_graph(), batch_size=B, seed=0)
    for step, (batch, groups) in enumerate(zip(run.batches, run.observed, strict=True)):
        assert replica.next_batch(step) == batch
        replica.observe(step, groups)
    assert [m["step"] for m in run.step_metrics] == [0.0, 1.0, 2.0]
    assert all("batch/mean_reward_variance" in m for m in run.step_metrics)


def test_resume_from_a_trl_checkpoint_continues_with_the_same_batches(tmp_path, runtime):
    torch.set_num_threads(1)
    whole, _, _ = make_trainer(tmp_path / "whole", runtime, steps=4)
    whole.train()

    part, _, _ = make_trainer(tmp_path / "part", runtime, steps=4, callbacks=[StopAfter(2)])
    part.train()
    assert part.envsched.batches == whole.envsched.batches[:2]
    assert (tmp_path / "part" / "checkpoint-2" / "envsched_state.json").is_file()

    resumed, _, _ = make_trainer(tmp_path / "part", runtime, steps=4)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.envsched.next_step == 4
    assert resumed.envsched.batches == whole.envsched.batches
    assert resumed.envsched.observed == whole.envsched.observed[2:]


def test_resume_on_a_grown_pool_keeps_the_observations_and_selects_the_new_tasks(tmp_path, runtime):
    torch.set_num_threads(1)
    old_envs = sorted(set(small_graph().env_ids))[:2]
    part, _, _ = make_trainer(tmp_path, runtime, steps=5, callbacks=[StopAfter(2)], envs=old_envs)
    part.train()
    assert len(part.envsched.observed) == 2

    # an environment joins (graph add-env, the dataset and runtime of the grown pool)
    grown, _, recorder = make_trainer(tmp_path, runtime, steps=5)
    grown.train(resume_from_checkpoint=True)
    run = grown.envsched
    assert run.next_step == 5
    assert run.batches[:2] == part.envsched.batches
    kept = {(o.task_id, o.step, o.rewards) for o in run.scheduler.log.observations()}
    assert {
        (t, s, tuple(r))
        for s, groups in enumerate(part.envsched.observed)
        for t, r in groups.items()
    } <= kept
    graph = small_graph()
    new = {t for t, e in zip(graph.task_ids, graph.env_ids, strict=True) if e not in old_envs}
    chosen = {t for batch in run.batches[2:] for t in batch}
    assert new & chosen, "the new environment's tasks were never selected"
    assert new & {t for _, task_ids in recorder.calls for t in task_ids}  # and rolled out


def test_mismatched_batch_size_is_refused(tmp_path, runtime):
    with pytest.raises(ValueError, match="batch size B is 4"):
        model, tokenizer = load_policy(small_policy_dir())
        rewards = RoundRewards()
        EnvSchedGRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=GRPOConfig(
                output_dir=str(tmp_path),
                per_device_train_batch_size=2 * K,
                num_generations=K,
                use_cpu=True,
                report_to="none",
            ),
            train_dataset=pool_dataset(small_pool()),
            reward_funcs=RuntimeReward(runtime, rewards),
            scheduler=make_scheduler("envsched", small_graph(), batch_size=B, seed=0),
            rewards=rewards,
        )


@pytest.mark.parametrize(
    "name, instead",
    [
        ("dapo", "Use a scheduler that does not over-sample ('random' for 'dapo')"),
        ("envsched_spread+ds", "Use 'envsched_spread'"),
    ],
)
def test_an_over_sampling_scheduler_is_refused_naming_what_to_use(name, instead):
    """Dynamic sampling needs generation batches larger than B and groups held back for a
    later update; TRL generates B x K per round and trains on them, so the trainer refuses it
    before TRL sets anything up, and so does the builder."""
    scheduler = make_scheduler(name, small_graph(), batch_size=B)
    with pytest.raises(ValueError, match="over-samples") as refused:
        EnvSchedGRPOTrainer(scheduler=scheduler, rewards=RoundRewards())
    message = str(refused.value)
    assert "B x K" in message and instead in message and "train grpo" in message
    with pytest.raises(ValueError, match=re.escape(instead)):
        adapter_scheduler("trl", name, small_graph(), batch_size=B)
