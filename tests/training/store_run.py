"""``train grpo --store`` as a user runs it, in a process of its own, on the smallest generated
pool and the tiny policy: what the tests that kill a run or its store server share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from envsched_gnn.envs.generator import generate_pool, write_pool_files
from envsched_gnn.training.policy import build_default_policy
from tests.training.tiny_policy import TINY

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6


def tiny_pool_and_policy(folder: Path) -> tuple[Path, Path]:
    """A generated pool of 2 environments x 6 tasks in ``folder/pool`` and the tiny policy for
    it in ``folder/policy``."""
    pool = generate_pool(n_envs=2, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)
    write_pool_files(pool, folder / "pool")
    return folder / "pool", build_default_policy(pool, TINY, folder / "policy")


def train_command(pool: Path, policy: Path, out: Path, *graph: str) -> list[str]:
    """``train grpo`` of ``STEPS`` small steps, a checkpoint after each; ``graph`` is
    ``--store SPEC`` or ``--graph FILE``."""
    return [
        sys.executable, "-m", "envsched_gnn.cli", "train", "grpo", "--model", str(policy),
        "--pool", str(pool), "--out", str(out), *graph,
        "--batch-size", "4", "--group-size", "2", "--steps", str(STEPS), "--eval-every", "0",
        "--max-turns", "1", "--max-new-tokens", "16", "--workers", "1", "--seed", "0",
        "--accelerator", "cpu", "--no-progress-bar", "--checkpoint-every", "1",
    ]  # fmt: skip


def environment(store: dict[str, str]) -> dict[str, str]:
    """This process's environment with the store's ``NEO4J_*`` variables, for a command."""
    return {**os.environ, **store, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def wait_for_checkpoints(out: Path, count: int, process: subprocess.Popen) -> None:
    """Returns once the run in ``out`` has written ``count`` step checkpoints."""
    deadline = time.monotonic() + 600
    while len(list((out / "checkpoints").glob("step*.ckpt"))) < count:
        assert process.poll() is None, f"the run ended first (exit code {process.returncode})"
        assert time.monotonic() < deadline, f"not {count} checkpoints in 10 minutes"
        time.sleep(0.1)
