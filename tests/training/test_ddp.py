"""DDP with 2 CPU processes (gloo), launched as a user would: ``train grpo --devices 2
--strategy ddp``. One batch per step chosen once (rank 0) and shared, the episodes split
across the ranks, the rewards gathered before ``observe``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.graph.task_graph import write_graph
from envsched_gnn.scheduler.registry import make_scheduler
from envsched_gnn.training.grpo.module import CHECKPOINT_KEY
from envsched_gnn.training.grpo.train import RESULT_FILE
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.rng import step_seed
from envsched_gnn.training.rollout import EpisodeSpec, RolloutEngine
from tests.envs.handmade_pool import write_handmade_pool
from tests.training.grpo_setup import AGENT, POOL, RUNTIME, grpo_policy_dir, handmade_graph

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def train_ddp(tmp_path: Path, out: Path, *options: str) -> dict:
    """``train grpo`` in 2 DDP processes on the hand-made pool (B = 2 unless ``options`` say
    otherwise); its ``grpo_result.json``."""
    pool_dir = tmp_path / "pool"
    if not pool_dir.exists():
        write_handmade_pool(pool_dir)
        write_graph(tmp_path / "graph.json", handmade_graph())
    command = [
        sys.executable, "-m", "envsched_gnn.cli", "train", "grpo",
        "--pool", str(pool_dir), "--graph", str(tmp_path / "graph.json"),
        "--model", str(grpo_policy_dir()), "--out", str(out),
        "--batch-size", "2", "--group-size", "4", "--steps", "2", "--lr", "1e-3",
        "--eval-every", "0", "--seed", "3", "--workers", "1",
        "--max-turns", str(AGENT.max_turns), "--max-new-tokens", str(AGENT.max_new_tokens),
        "--temperature", str(AGENT.temperature),
        "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", "--no-progress-bar",
        *options,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / RESULT_FILE).read_text())


def test_two_processes_share_batches_split_rollouts_gather_rewards(tmp_path):
    result = train_ddp(tmp_path, tmp_path / "ddp")

    assert result["world_size"] == 2
    assert result["rollouts"] == 2 * 2 * 4 and result["local_rollouts"] == 2 * 4
    # every group has its K rewards although each rank rolled out half of every group
    assert all(len(r) == 4 for step in result["rewards"] for r in step.values())

    # one scheduler chose the batches: replaying it on the gathered rewards reproduces them
    scheduler = make_scheduler(
        "envsched", handmade_graph().subgraph([t.task_id for t in POOL.split("train")]),
        batch_size=2, seed=3,
    )  # fmt: skip
    for step, (batch, rewards) in enumerate(zip(result["batches"], result["rewards"], strict=True)):
        assert scheduler.next_batch(step) == batch
        scheduler.observe(step, rewards)

    # the gathered rewards of step 0 are those of the policy's own episodes, in one process
    model, tokenizer = load_policy(grpo_policy_dir())
    with EnvRuntime(POOL, RUNTIME) as runtime:
        engine = RolloutEngine(model, tokenizer, runtime, AGENT, "cpu", POOL)
        specs = [EpisodeSpec(t, k) for t in result["batches"][0] for k in range(4)]
        episodes = engine.rollout_episodes(specs, seed=step_seed(3, 0))
    expected = {t: [e.reward for e in episodes if e.task_id == t] for t in result["batches"][0]}
    assert result["rewards"][0] == expected


def test_dapo_pending_groups_survive_a_checkpoint_on_every_rank(tmp_path):
    """DAPO's refill under DDP (B = 3 of the 4 train tasks): each rank keeps its own episodes
    of the groups pending after step 0; the checkpoint rank 0 writes gathers them with the
    rank that held each, and the resumed 2-process run gives each rank its share back: the
    uninterrupted run's batches, rewards, updates and bit-identical weights."""
    options = ("--scheduler", "dapo", "--batch-size", "3", "--steps", "4")
    whole = train_ddp(tmp_path, tmp_path / "whole", *options)
    assert whole["steps"][0]["batch/kept_groups"] == 0  # step 0 leaves groups pending
    train_ddp(tmp_path, tmp_path / "part", *options, "--stop-after", "1")
    checkpoint = tmp_path / "part" / "checkpoints" / "last.ckpt"
    pending = torch.load(checkpoint, weights_only=True)[CHECKPOINT_KEY]["pending"]
    assert pending and all(len(row["episodes"]) == 4 for row in pending)
    holders = {rank for row in pending for rank, _ in row["episodes"]}
    assert 1 in holders  # rank 1's episodes reached the file rank 0 wrote

    resumed = train_ddp(tmp_path, tmp_path / "resumed", *options, "--resume", str(checkpoint))

    for key in ("batches", "rewards", "rollouts", "local_rollouts"):
        assert resumed[key] == whole[key], key
    assert [m["batch/kept_groups"] for m in resumed["steps"]] == [
        m["batch/kept_groups"] for m in whole["steps"]
    ]
    a, _ = load_policy(tmp_path / "whole" / "policy")
    b, _ = load_policy(tmp_path / "resumed" / "policy")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
