"""Runs side by side in spawned processes give what the same runs give one after the other."""

from __future__ import annotations

import pytest
import torch

from envsched_gnn.training.grpo.config import LaunchConfig
from envsched_gnn.training.grpo.runs import GRPORun, SharedStart, parallel_workers, train_runs
from tests.training.grpo_setup import (
    AGENT,
    POOL,
    RUNTIME,
    grpo_policy_dir,
    handmade_graph,
    small_config,
)


@pytest.mark.slow  # two GRPO runs in spawned processes, then the same two in turn: about 40 s
def test_parallel_runs_equal_serial_runs(tmp_path):
    start = SharedStart(
        POOL,
        grpo_policy_dir(),
        AGENT,
        RUNTIME,
        LaunchConfig(accelerator="cpu"),
        initial_eval=None,
    )
    configs = [small_config(scheduler="envsched"), small_config(scheduler="random")]

    def runs(folder: str) -> list[GRPORun]:
        return [GRPORun(c, tmp_path / folder / c.scheduler, handmade_graph()) for c in configs]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what each worker process uses
    try:
        serial = list(train_runs(start, runs("serial"), workers=1))
    finally:
        torch.set_num_threads(threads)
    parallel = list(train_runs(start, runs("parallel"), workers=2))

    assert [r.scheduler for r in parallel] == ["envsched", "random"]
    for one, other in zip(serial, parallel, strict=True):
        assert one.batches == other.batches
        assert one.rewards == other.rewards
        assert one.rollouts == other.rollouts == 2 * 2 * 4
    assert (tmp_path / "parallel" / "random" / "policy" / "agent_config.json").is_file()


@pytest.mark.parametrize(
    ("requested", "runs", "accelerator", "expected"),
    [(3, 2, "cpu", 2), (1, 4, "cpu", 1), (0, 1, "cpu", 1), (0, 2, "gpu", 1)],
)
def test_parallel_workers(requested, runs, accelerator, expected):
    assert parallel_workers(requested, runs, accelerator) == expected
