"""A run that fails mid-training leaves no observation-sink thread behind."""

from __future__ import annotations

import threading

import pytest
import torch

from envsched_gnn.training.grpo.module import GRPOModule
from tests.training.grpo_setup import run, small_config


@pytest.mark.slow  # a real GRPO step before the failure
def test_a_failed_run_stops_its_sink_thread(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    written: list = []
    step = GRPOModule.training_step

    def fails_at_the_second_step(module, dataloader_iter):
        if module.next_step == 1:
            raise RuntimeError("the rollout workers died")
        return step(module, dataloader_iter)

    monkeypatch.setattr(GRPOModule, "training_step", fails_at_the_second_step)
    with pytest.raises(RuntimeError, match="the rollout workers died"):
        run(small_config(steps=3), tmp_path, write_observations=written.extend)
    assert not [t for t in threading.enumerate() if t.name == "observation-sink"]
