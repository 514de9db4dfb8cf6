"""The SFT warm start of a preset, and the policy package built from it
(``envsched-gnn train demo-policy``; the main job uses the package instead of running SFT when
its own SFT inputs have the same fingerprint)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from envsched_gnn.pipeline.presets import PRESETS, Preset


def demo_sft_config(preset: Preset, seed: int, accelerator: str, agent: Any) -> Any:
    """The SFT warm start of a preset (what the packaged demo policy was built with)."""
    from envsched_gnn.training.sft_config import SFTConfig

    return SFTConfig(
        max_steps=preset.sft_steps,
        extra_tasks_per_env=preset.sft_extra_tasks_per_env,
        include_train_split=preset.sft_include_train_split,
        seed=seed,
        accelerator=accelerator,
        agent=agent,
        policy=preset.policy,
    )


def package_demo_policy(
    out: str | Path, preset_name: str = "demo", seed: int = 0, threads: int = 0
) -> Path:
    """SFT of the built-in policy on the preset's pool, written to ``out`` with the manifest
    the main job checks (:mod:`~envsched_gnn.training.warm_start`)."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.training.warm_start import package_policy

    preset = PRESETS[preset_name]
    pool = generate_pool(
        preset.envs, preset.tasks_per_env, seed, preset.test_per_env, max_calls=preset.max_calls
    )
    config = replace(demo_sft_config(preset, seed, "cpu", preset.agent), threads=threads)
    command = f"envsched-gnn train demo-policy --preset {preset_name} --seed {seed} --out {out}"
    return package_policy(pool, config, out, command)
