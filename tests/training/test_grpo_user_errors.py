"""``train grpo`` refuses what the user got wrong with one line and exit code 1, not a
traceback: an environment to retire that the graph does not hold (before anything loads), and
a checkpoint whose observed tasks the graph lost."""

from __future__ import annotations

import json

import pytest
import torch

from envsched_gnn.cli import main
from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.graph.task_graph import write_graph
from envsched_gnn.training.grpo.train import RESULT_FILE
from tests.training.grpo_setup import POOL, handmade_graph
from tests.training.tiny_policy import untrained_policy_dir

SMALL_RUN = [
    "--batch-size", "2", "--group-size", "2", "--steps", "2", "--eval-every", "0",
    "--max-turns", "1", "--max-new-tokens", "8", "--workers", "1", "--seed", "0",
    "--accelerator", "cpu", "--no-progress-bar",
]  # fmt: skip


def _inputs(folder, pool: Pool) -> list[str]:
    """``--pool`` and ``--graph`` of ``pool`` and its tasks' part of the hand-made graph."""
    save_pool(pool, folder / "pool")
    graph = handmade_graph().subgraph([task.task_id for task in pool.tasks])
    write_graph(folder / "graph.json", graph)
    return ["--pool", str(folder / "pool"), "--graph", str(folder / "graph.json")]


def test_an_unknown_environment_to_retire_fails_before_the_policy_loads(
    tmp_path, monkeypatch, capsys
):
    def load_policy(*args, **kwargs):
        raise AssertionError("the policy was loaded before the names were checked")

    monkeypatch.setattr("envsched_gnn.training.policy.load_policy", load_policy)
    out = tmp_path / "run"
    argv = [
        "train", "grpo", *_inputs(tmp_path, POOL), "--model", str(tmp_path / "no-model"),
        "--out", str(out), *SMALL_RUN, "--retire-env", "library", "--retire-env", "no_such_env",
    ]  # fmt: skip

    assert main(argv) == 1

    err = capsys.readouterr().err
    assert err == ("error: unknown environment(s) ['no_such_env']: not in the scheduler's graph\n")
    assert not out.exists()  # failed before the run folder was made


@pytest.mark.slow
def test_resume_on_a_graph_that_lost_an_observed_task_is_a_one_line_error_before_the_policy_loads(
    tmp_path, capsys, monkeypatch
):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    train = ["train", "grpo", "--model", str(untrained_policy_dir()), "--out", str(out)]
    assert main([*train, *_inputs(tmp_path / "before", POOL), *SMALL_RUN, "--stop-after", "1"]) == 0
    lost = json.loads((out / RESULT_FILE).read_text())["batches"][0][0]
    smaller = Pool(envs=POOL.envs, tasks=[t for t in POOL.tasks if t.task_id != lost])
    capsys.readouterr()

    def load_policy(*args, **kwargs):
        raise AssertionError("the policy was loaded before the lost task was found")

    monkeypatch.setattr("envsched_gnn.training.policy.load_policy", load_policy)

    resume = ["--resume", str(out / "checkpoints" / "last.ckpt")]
    assert main([*train, *_inputs(tmp_path / "after", smaller), *SMALL_RUN, *resume]) == 1

    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the graph (") and "lacks 1 task(s)" in last
    assert repr(lost) in last


def test_no_graph_and_no_store_is_a_one_line_error(tmp_path, capsys):
    save_pool(POOL, tmp_path / "pool")
    out = tmp_path / "run"
    argv = ["train", "grpo", "--pool", str(tmp_path / "pool"), "--model", str(tmp_path / "m")]
    argv += ["--out", str(out), *SMALL_RUN]

    assert main(argv) == 2

    assert capsys.readouterr().err == (
        "error: give --graph FILE or --store SPEC to read the task graph from\n"
    )
    assert not out.exists()
