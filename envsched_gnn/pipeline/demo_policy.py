"""The warm start of a preset and the policy packages built from it (``envsched-gnn train
demo-policy``): the base SFT policy and, for a preset with a :class:`StartRecipe`, the start
that is sometimes right, fine-tuned from it. The main job uses a package instead of running
its SFT when its own SFT inputs have the same fingerprint."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from envsched_gnn.pipeline.presets import PRESETS, Preset


def preset_pools(preset: Preset, seed: int) -> tuple[Any, Any]:
    """(the base SFT's pool, the job's pool): the same environments; the base one, when the
    preset has ``base_max_calls``, with tasks of up to that many calls and every operation,
    else the job's own."""
    from envsched_gnn.envs.generator import generate_pool

    def pool(max_calls: int | None, operations: tuple[str, ...] | None) -> Any:
        return generate_pool(
            preset.envs, preset.tasks_per_env, seed, preset.test_per_env, max_calls=max_calls,
            operations=operations,
        )  # fmt: skip

    job = pool(preset.max_calls, preset.operations)
    if preset.base_max_calls is None:
        return job, job
    return pool(preset.base_max_calls, None), job


def demo_sft_config(preset: Preset, seed: int, accelerator: str, agent: Any) -> Any:
    """The base SFT warm start of a preset (what the packaged demo policy was built with)."""
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


def demo_start_config(preset: Preset, seed: int, accelerator: str, agent: Any) -> Any:
    """The SFT that makes the preset's start from its base policy (``preset.start``)."""
    if preset.start is None:
        raise ValueError("this preset starts GRPO from its base SFT policy (no start recipe)")
    from envsched_gnn.training.sft_config import SFTConfig

    return SFTConfig(
        max_steps=preset.start.steps,
        learning_rate=preset.start.learning_rate,
        extra_tasks_per_env=preset.start.extra_tasks_per_env,
        extra_operations=preset.operations,
        include_train_split=False,
        seed=seed,
        accelerator=accelerator,
        agent=agent,
        policy=preset.policy,
        competence=preset.start.competence,
    )


def package_demo_policy(
    out: str | Path, preset_name: str = "demo", seed: int = 0, threads: int = 0, stage: str = "base"
) -> Path:
    """Build a package the main job checks (:mod:`~envsched_gnn.training.warm_start`):
    ``stage`` ``base`` is SFT of the built-in policy on the preset's base pool; ``start``
    fine-tunes the packaged base policy (its fingerprint must match the preset's) into the
    preset's start."""
    from envsched_gnn.training.warm_start import (
        PACKAGED_DEMO_POLICY,
        package_policy,
        packaged_policy,
        sft_fingerprint,
    )

    preset = PRESETS[preset_name]
    base_pool, pool = preset_pools(preset, seed)
    base = replace(demo_sft_config(preset, seed, "cpu", preset.agent), threads=threads)
    command = (
        f"envsched-gnn train demo-policy --preset {preset_name} --seed {seed} --stage {stage} "
        f"--out {out}"
    )
    if stage == "base":
        return package_policy(base_pool, base, out, command)
    if stage != "start":
        raise ValueError(f"--stage {stage!r}, expected 'base' or 'start'")
    base_fingerprint = sft_fingerprint(base_pool, base)
    if packaged_policy(base_fingerprint) is None:
        raise ValueError(
            "the packaged base policy does not match this preset's base SFT: build it first "
            f"(train demo-policy --preset {preset_name} --stage base --out {PACKAGED_DEMO_POLICY})"
        )
    config = replace(demo_start_config(preset, seed, "cpu", preset.agent), threads=threads)
    return package_policy(pool, config, out, command, PACKAGED_DEMO_POLICY, base_fingerprint)
