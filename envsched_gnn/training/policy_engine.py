"""Where a policy runs, and a policy opened in the environments as a rollout engine.

Settings name a place in one of two vocabularies: a Lightning accelerator (``auto``, ``cpu``,
``gpu``: SFT, GRPO, the main job, ``eval ablate --learner policy``) or a torch device
(``auto``, ``cpu``, ``cuda``, ``cuda:1``: the evaluation commands). :func:`resolve_device` is
the one rule that maps either to a torch device; :func:`open_engine` is the one way to load a
policy, start the runtime of its pool and roll out with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envsched_gnn.envs.pool import Pool
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.rollout import RolloutEngine


def resolve_device(setting: str = "auto") -> str:
    """The torch device of an accelerator or device setting: ``auto`` is ``cuda`` when torch
    sees a GPU and ``cpu`` otherwise, ``gpu`` is ``cuda``; any other value is already a torch
    device (``cpu``, ``cuda``, ``cuda:1``)."""
    if setting == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if setting == "gpu" else setting


def on_gpu(setting: str) -> bool:
    """Whether ``setting`` (accelerator or device, :func:`resolve_device`) runs on a GPU."""
    return resolve_device(setting) != "cpu"


@contextmanager
def open_engine(
    policy_dir: str | Path,
    pool: Pool,
    agent: AgentConfig,
    runtime: RuntimeConfig | None = None,
    device: str = "auto",
    threads: int = 0,
) -> Iterator[RolloutEngine]:
    """A :class:`~envsched_gnn.training.rollout.RolloutEngine` of the policy in ``policy_dir``
    (loaded on ``resolve_device(device)``) with ``agent``'s format, in a runtime of ``pool``
    that closes when the block ends. ``threads`` > 0 sets torch's CPU threads first when the
    policy runs on the CPU (0: torch's default)."""
    import torch

    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.training.policy import load_policy
    from envsched_gnn.training.rollout import RolloutEngine

    where = resolve_device(device)
    if threads > 0 and where == "cpu":
        torch.set_num_threads(threads)
    model, tokenizer = load_policy(policy_dir, device=where)
    with EnvRuntime(pool, runtime) as env_runtime:
        yield RolloutEngine(model, tokenizer, env_runtime, agent, where, pool)
