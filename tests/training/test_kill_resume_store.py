"""``train grpo --store URI`` killed (SIGKILL) mid-run and ``--resume``d, against the session's
real store server (the managed ArcadeDB, or Neo4j with ``NEO4J_URI``): the resumed run ends
with every step, and the store holds each (task, step) of the finished run once, with the
rewards of its ``history.jsonl``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.generator import generate_pool, write_pool_files
from envsched_gnn.observations import read_history
from envsched_gnn.training.grpo.train import HISTORY_FILE, RESULT_FILE
from envsched_gnn.training.policy import build_default_policy
from tests.training.tiny_policy import TINY

pytestmark = [pytest.mark.slow, pytest.mark.store]

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
KILL_AFTER = 2
"""Checkpoints written (one a step) before the run is killed."""


def test_a_run_killed_mid_way_resumes_and_the_store_holds_each_observation_once(
    tmp_path, store, store_server, monkeypatch
):
    pool = generate_pool(n_envs=2, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    write_pool_files(pool, tmp_path / "pool")
    policy = build_default_policy(pool, TINY, tmp_path / "policy")
    environment = {
        **os.environ,
        "NEO4J_USER": store_server.auth[0],
        "NEO4J_PASSWORD": store_server.auth[1],
        "NEO4J_DATABASE": store_server.database,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }
    uri, run = store_server.uri, tmp_path / "run"
    for name in ("NEO4J_USER", "NEO4J_PASSWORD", "NEO4J_DATABASE"):
        monkeypatch.setenv(name, environment[name])
    assert main(["graph", "build", "--pool", str(tmp_path / "pool"), "--store", uri]) == 0
    train = [
        sys.executable, "-m", "envsched_gnn.cli", "train", "grpo", "--model", str(policy),
        "--pool", str(tmp_path / "pool"), "--out", str(run), "--store", uri,
        "--batch-size", "4", "--group-size", "2", "--steps", str(STEPS), "--eval-every", "0",
        "--max-turns", "1", "--max-new-tokens", "16", "--workers", "1", "--seed", "0",
        "--accelerator", "cpu", "--no-progress-bar", "--checkpoint-every", "1",
    ]  # fmt: skip

    killed = subprocess.Popen(
        train, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    checkpoints = run / "checkpoints"
    deadline = time.monotonic() + 600
    while len(list(checkpoints.glob("step*.ckpt"))) < KILL_AFTER and killed.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint in 10 minutes"
        time.sleep(0.2)
    killed.kill()
    _, errors = killed.communicate(timeout=60)
    assert killed.returncode == -9, errors.decode()[-2000:]
    assert not (run / RESULT_FILE).exists()  # it never finished

    resumed = subprocess.run(
        [*train, "--resume", str(checkpoints / "last.ckpt")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads((run / RESULT_FILE).read_text())
    assert len(result["batches"]) == STEPS
    assert result["rejected_observations"] == 0 and result["unwritten_observations"] == 0
    expected = {(t, s): r for s, step in enumerate(result["rewards"]) for t, r in step.items()}
    observations = store.read_observations()
    stored = {(o.task_id, o.step): list(o.rewards) for o in observations}
    assert len(observations) == len(stored) == len(expected)  # each (task, step) once
    assert stored == expected
    history = {(o.task_id, o.step): list(o.rewards) for o in read_history(run / HISTORY_FILE)}
    assert history == expected
