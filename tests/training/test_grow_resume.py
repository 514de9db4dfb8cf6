"""A live pool from the command line, against the session's real store server: ``train grpo``
on a pool, ``graph add-env`` with a new environment, ``train grpo --resume`` on the grown
pool continues the run (its observations kept) and selects the new environment's tasks."""

from __future__ import annotations

import json

import pytest
import torch

from envsched_gnn.cli import main
from envsched_gnn.envs.generator import generate_pool, write_pool_files
from envsched_gnn.observations import read_history
from envsched_gnn.training.grpo.module import CHECKPOINT_KEY
from envsched_gnn.training.grpo.train import HISTORY_FILE, RESULT_FILE
from envsched_gnn.training.policy import build_default_policy
from tests.training.tiny_policy import TINY

pytestmark = [pytest.mark.slow, pytest.mark.store]


def test_resume_after_add_env_continues_and_selects_the_new_tasks(
    tmp_path, store, store_server, monkeypatch
):
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    before = generate_pool(n_envs=2, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    after = generate_pool(n_envs=3, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    write_pool_files(before, tmp_path / "pool-v1")
    write_pool_files(after, tmp_path / "pool-v2")
    policy = build_default_policy(after, TINY, tmp_path / "policy")
    uri, run = store_server.uri, tmp_path / "run"
    train = [
        "train", "grpo", "--model", str(policy), "--out", str(run), "--store", uri,
        "--batch-size", "4", "--group-size", "2", "--steps", "5", "--eval-every", "0",
        "--max-turns", "1", "--max-new-tokens", "16", "--workers", "1", "--seed", "0",
        "--accelerator", "cpu", "--no-progress-bar",
    ]  # fmt: skip
    torch.set_num_threads(1)

    assert main(["graph", "build", "--pool", str(tmp_path / "pool-v1"), "--store", uri]) == 0
    assert main([*train, "--pool", str(tmp_path / "pool-v1"), "--stop-after", "2"]) == 0
    first = json.loads((run / RESULT_FILE).read_text())
    assert main(["graph", "add-env", "--pool", str(tmp_path / "pool-v2"), "--store", uri]) == 0
    old_env, new_env = "insurance_policies", "blood_donation"
    assert new_env in after.envs and new_env not in before.envs and old_env in before.envs
    checkpoint = run / "checkpoints" / "last.ckpt"
    resumed = [*train, "--pool", str(tmp_path / "pool-v2"), "--resume", str(checkpoint)]
    assert main([*resumed, "--retire-env", old_env]) == 0

    result = json.loads((run / RESULT_FILE).read_text())
    assert len(result["batches"]) == 5
    assert result["batches"][:2] == first["batches"] and result["rewards"][:2] == first["rewards"]
    env_of = {t.task_id: t.env_id for t in after.tasks}
    later = [env_of[t] for batch in result["batches"][2:] for t in batch]
    assert new_env in later, "the new environment's tasks were never selected"
    assert old_env not in later, "a retired environment was selected"
    state = torch.load(checkpoint, weights_only=False)[CHECKPOINT_KEY]["scheduler"]
    assert state["retired"] == [old_env] and state["num_tasks"] == 3 * 5
    stored = {(o.task_id, o.step): list(o.rewards) for o in store.read_observations()}
    expected = {(t, s): r for s, step in enumerate(result["rewards"]) for t, r in step.items()}
    assert stored == expected  # the store holds the whole run, before and after the growth
    history = {(o.task_id, o.step): list(o.rewards) for o in read_history(run / HISTORY_FILE)}
    assert history == expected  # and so does the run's history.jsonl
