"""Where a policy runs (:func:`resolve_device`) and a policy opened as a rollout engine.

Settings name a place in two vocabularies: a Lightning accelerator (``auto``, ``cpu``, ``gpu``)
or a torch device (``auto``, ``cpu``, ``cuda``, ``cuda:1``); one rule maps both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.validation import ConfigError

ACCELERATORS = ("auto", "cpu", "gpu")
"""The Lightning accelerators a run may name (:func:`resolve_device` maps them to devices)."""


def resolve_device(setting: str = "auto") -> str:
    """The torch device of an accelerator or device setting: ``auto`` is ``cuda`` when torch
    sees a GPU, else ``cpu``; ``gpu`` is ``cuda``; any other value is a torch device."""
    if setting == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if setting == "gpu" else setting


def check_device(setting: str, name: str = "device") -> None:
    """:class:`ConfigError` unless ``setting`` is one :func:`resolve_device` maps: ``auto``,
    ``gpu`` or a torch device (``cpu``, ``cuda``, ``cuda:1``); ``name`` is what the user knows
    the setting by (``--device``)."""
    if setting in ACCELERATORS:
        return
    import torch

    try:
        torch.device(setting)
    except RuntimeError as error:
        raise ConfigError(
            f"{name} {setting!r}: expected auto, gpu or a torch device (cpu, cuda, cuda:1, ...)"
        ) from error


def on_gpu(setting: str) -> bool:
    """Whether ``setting`` (:func:`resolve_device`) runs on a GPU."""
    return resolve_device(setting) != "cpu"


@contextmanager
def open_engine(
    policy_dir: str | Path,
    pool: Pool,
    agent: AgentConfig,
    runtime: RuntimeConfig | None = None,
    device: str = "auto",
    threads: int = 0,
) -> Iterator:
    """A ``RolloutEngine`` of the policy in ``policy_dir`` in a runtime of ``pool``, closed when the
    block ends; ``threads`` > 0 sets torch's CPU threads first.
    """
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
