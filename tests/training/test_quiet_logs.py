"""A ``train grpo`` with checkpoints, then its ``--resume``, as a user runs them: stderr holds no
warning a user cannot act on (Lightning's ModelCheckpoint note on manual optimisation, the
``dataloader_iter`` notes, a cloud-logging tip), the checkpoints are where a resume looks for
them, and the resumed run keeps the first part's CSV log instead of deleting it."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.graph.task_graph import write_graph
from tests.training.grpo_setup import POOL, handmade_graph
from tests.training.tiny_policy import untrained_policy_dir

pytestmark = pytest.mark.slow  # two GRPO runs of the tiny policy in their own processes

ROOT = Path(__file__).resolve().parents[2]
NOT_ACTIONABLE = (
    "ModelCheckpoint",
    "dataloader_iter",
    "LeafSpec",
    "Tip:",
    "will be deleted",
    "callbacks used to create the checkpoint",
)
"""What stderr held before (Lightning's words), and a user could do nothing about."""


def _train(argv: list[str]) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "envsched_gnn.cli", "train", "grpo", *argv]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)


def _logged_steps(path: Path) -> list[int]:
    with path.open() as handle:
        return sorted({int(row["step"]) for row in csv.DictReader(handle) if row.get("step")})


def test_a_checkpointed_and_resumed_run_prints_no_warning_a_user_cannot_act_on(tmp_path):
    save_pool(POOL, tmp_path / "pool")
    write_graph(tmp_path / "graph.json", handmade_graph())
    out = tmp_path / "run"
    argv = [
        "--pool", str(tmp_path / "pool"), "--graph", str(tmp_path / "graph.json"),
        "--model", str(untrained_policy_dir()), "--out", str(out),
        "--batch-size", "2", "--group-size", "2", "--steps", "3", "--eval-every", "0",
        "--max-turns", "1", "--max-new-tokens", "8", "--workers", "1", "--seed", "0",
        "--accelerator", "cpu", "--no-progress-bar", "--checkpoint-every", "1",
    ]  # fmt: skip

    first = _train([*argv, "--stop-after", "2"])
    resumed = _train([*argv, "--resume", str(out / "checkpoints" / "step2.ckpt")])

    for run in (first, resumed):
        assert run.returncode == 0, run.stderr[-3000:]
        said = [line for line in run.stderr.splitlines() if any(w in line for w in NOT_ACTIONABLE)]
        assert not said, "\n".join(said)
    checkpoints = sorted(path.name for path in (out / "checkpoints").iterdir())
    assert checkpoints == ["last.ckpt", "step1.ckpt", "step2.ckpt", "step3.ckpt"]
    assert _logged_steps(out / "logs" / "metrics.csv") == [0, 1]
    assert _logged_steps(out / "logs" / "resumed-1" / "metrics.csv") == [2]
