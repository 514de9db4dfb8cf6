"""The built-in policy, built (and briefly SFT-trained) once per test process on the
hand-made pool, for the training tests."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from envsched_gnn.training.policy import PolicyConfig, build_default_policy
from envsched_gnn.training.sft import SFTConfig, run_sft
from tests.envs.handmade_pool import handmade_pool

TINY = PolicyConfig(
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=128,
    vocab_size=600,
    seed=0,
)
TINY_SFT = SFTConfig(
    minutes=0,
    max_steps=40,
    batch_size=4,
    warmup_steps=5,
    extra_tasks_per_env=0,
    checkpoint_every_steps=20,
    log_every_steps=5,
    policy=TINY,
)


@functools.cache
def _scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="envsched-tiny-policy-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


@functools.cache
def untrained_policy_dir() -> Path:
    return build_default_policy(handmade_pool(), TINY, _scratch() / "untrained")


@functools.cache
def trained_policy_dir() -> Path:
    """``TINY_SFT`` on the hand-made pool (about 10 s on 2 cores); the run folder is the
    returned folder's parent."""
    return run_sft(handmade_pool(), None, TINY_SFT, _scratch() / "sft")
