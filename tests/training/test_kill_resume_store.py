"""``train grpo --store URI`` killed (SIGKILL) mid-run and ``--resume``d, against the session's
real store server (the managed ArcadeDB, or Neo4j with ``NEO4J_URI``): the resumed run ends
with every step, and the store holds each (task, step) of the finished run once, with the
rewards of its ``history.jsonl``."""

from __future__ import annotations

import json
import subprocess

import pytest

from envsched_gnn.cli import main
from envsched_gnn.observations import read_history
from envsched_gnn.training.grpo.train import HISTORY_FILE, RESULT_FILE
from tests.training.store_run import (
    STEPS,
    environment,
    tiny_pool_and_policy,
    train_command,
    wait_for_checkpoints,
)

pytestmark = [pytest.mark.slow, pytest.mark.store]

KILL_AFTER = 2
"""Checkpoints written (one a step) before the run is killed."""


def test_a_run_killed_mid_way_resumes_and_the_store_holds_each_observation_once(
    tmp_path, store, store_server, monkeypatch
):
    pool, policy = tiny_pool_and_policy(tmp_path)
    credentials = {
        "NEO4J_USER": store_server.auth[0],
        "NEO4J_PASSWORD": store_server.auth[1],
        "NEO4J_DATABASE": store_server.database,
    }
    uri, run = store_server.uri, tmp_path / "run"
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    assert main(["graph", "build", "--pool", str(pool), "--store", uri]) == 0
    train = train_command(pool, policy, run, "--store", uri)

    killed = subprocess.Popen(
        train, env=environment(credentials), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wait_for_checkpoints(run, KILL_AFTER, killed)
    killed.kill()
    _, errors = killed.communicate(timeout=60)
    assert killed.returncode == -9, errors.decode()[-2000:]
    assert not (run / RESULT_FILE).exists()  # it never finished

    resumed = subprocess.run(
        [*train, "--resume", str(run / "checkpoints" / "last.ckpt")],
        env=environment(credentials),
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
