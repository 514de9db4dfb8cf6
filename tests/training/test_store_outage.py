"""``train grpo --store bolt://...`` while its Neo4j is killed (SIGKILL) mid-run, which the
project does not own: its operator starts it again, or it stays down.

Back a while later, the run goes on and its write-behind sink delivers. Never back, the run
ends after ``GRPOConfig.store_flush_timeout_s`` with one ``error:`` line, its ``history.jsonl``
whole, and ``--resume`` against the restarted server writes what was buffered. Either way the
store holds each (task, step) once, with the rewards of the run's own history and of an
uninterrupted run's. The server is a Neo4j of this module's own
(:class:`~tests.graph_store.neo4j_server.RestartableNeo4j`); these run in the Neo4j pass of
``.ci/run``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsched_gnn.cli import main
from envsched_gnn.observations import Observation, read_history
from envsched_gnn.training.grpo.config import GRPOConfig
from envsched_gnn.training.grpo.train import HISTORY_FILE, RESULT_FILE
from tests.graph_store.neo4j_server import RestartableNeo4j
from tests.training.store_run import (
    STEPS,
    environment,
    tiny_pool_and_policy,
    train_command,
    wait_for_checkpoints,
)

pytestmark = [pytest.mark.slow, pytest.mark.store, pytest.mark.neo4j]

KILL_AFTER = 2
"""Checkpoints written (one a step) before the server is killed."""
OUTAGE_S = 3.0
"""How long the killed server stays down before its operator starts it (then its start)."""
UNWRITTEN_FILE = "unwritten_observations.jsonl"


@dataclass
class Setting:
    """The module's pool, policy and Neo4j holding the pool's graph, and an uninterrupted run."""

    pool: Path
    policy: Path
    neo4j: RestartableNeo4j
    uninterrupted: dict[tuple[str, int], tuple[float, ...]]
    """(task, step) -> rewards of the same run without a store fault (nor a store)."""

    def train(self, out: Path) -> list[str]:
        return train_command(self.pool, self.policy, out, "--store", self.neo4j.uri)


def by_key(observations: list[Observation]) -> dict[tuple[str, int], tuple[float, ...]]:
    keyed = {(o.task_id, o.step): tuple(o.rewards) for o in observations}
    assert len(keyed) == len(observations), "a (task, step) twice"
    return keyed


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    folder = tmp_path_factory.mktemp("outage")
    pool, policy = tiny_pool_and_policy(folder)
    neo4j = RestartableNeo4j(folder / "neo4j").start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in neo4j.environment.items():
                patch.setenv(name, value)
            assert main(["graph", "build", "--pool", str(pool)]) == 0
            assert main(["graph", "export", "--out", str(folder / "graph.json")]) == 0
        uninterrupted = folder / "uninterrupted"
        command = train_command(pool, policy, uninterrupted, "--graph", str(folder / "graph.json"))
        done = subprocess.run(command, env=environment({}), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        expected = by_key(read_history(uninterrupted / HISTORY_FILE))
        yield Setting(pool, policy, neo4j, expected)
    finally:
        neo4j.stop()


@pytest.fixture
def neo4j(setting: Setting) -> RestartableNeo4j:
    """The module's Neo4j, running, with the graph and no observation."""
    if not setting.neo4j.running:
        setting.neo4j.start()
    with setting.neo4j.connect() as store:
        store.write(lambda tx: tx.run("MATCH (o:Observation) DETACH DELETE o").consume())
    return setting.neo4j


def kill_mid_run(setting: Setting, out: Path) -> subprocess.Popen:
    """The run started, and its server killed after ``KILL_AFTER`` steps, before its end."""
    run = subprocess.Popen(
        setting.train(out),
        env=environment(setting.neo4j.environment),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_checkpoints(out, KILL_AFTER, run)
    setting.neo4j.kill()
    assert run.poll() is None and not (out / RESULT_FILE).exists()  # mid-run
    return run


def stored(neo4j: RestartableNeo4j) -> dict[tuple[str, int], tuple[float, ...]]:
    with neo4j.connect() as store:
        return by_key(store.read_observations())


def test_a_run_goes_on_through_an_outage_and_writes_once_the_server_is_back(
    setting, neo4j, tmp_path
) -> None:
    out = tmp_path / "run"
    run = kill_mid_run(setting, out)
    time.sleep(OUTAGE_S)
    neo4j.start()  # on the same folder and port
    _, errors = run.communicate(timeout=900)
    assert run.returncode == 0, errors[-3000:]
    assert "Traceback" not in errors
    assert not [line for line in errors.splitlines() if line.startswith("error:")]
    assert "will be retried" in errors or "observation write failed" in errors  # it met the outage
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["unwritten_observations"] == 0 and result["rejected_observations"] == 0
    assert not (out / UNWRITTEN_FILE).exists()
    history = by_key(read_history(out / HISTORY_FILE))
    assert stored(neo4j) == history == setting.uninterrupted


def test_a_server_that_never_comes_back_ends_the_run_with_one_error_and_resume_writes_the_rest(
    setting, neo4j, tmp_path
) -> None:
    out = tmp_path / "run"
    run = kill_mid_run(setting, out)
    _, errors = run.communicate(timeout=900)
    assert run.returncode == 1, errors[-3000:]
    assert "Traceback" not in errors
    (error,) = [line for line in errors.splitlines() if line.startswith("error:")]
    assert f"did not take {len(read_history(out / UNWRITTEN_FILE))} of" in error
    assert f"within {GRPOConfig().store_flush_timeout_s:g} s" in error
    assert f"--resume {out / 'checkpoints' / 'last.ckpt'}" in error
    history = by_key(read_history(out / HISTORY_FILE))
    assert history == setting.uninterrupted  # the run itself is whole

    neo4j.start()
    resumed = subprocess.run(
        [*setting.train(out), "--resume", str(out / "checkpoints" / "last.ckpt")],
        env=environment(neo4j.environment),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["unwritten_observations"] == 0 and len(result["batches"]) == STEPS
    assert by_key(read_history(out / HISTORY_FILE)) == history
    assert stored(neo4j) == history == setting.uninterrupted
