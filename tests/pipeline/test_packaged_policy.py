"""The packaged demo policy is the main job's warm start: its manifest must match the SFT
inputs the demo preset has now, or a fresh clone silently runs ~40 minutes of SFT."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.pipeline.demo_policy import demo_sft_config
from envsched_gnn.pipeline.presets import PRESETS
from envsched_gnn.training.warm_start import PACKAGED_DEMO_POLICY, packaged_policy, sft_fingerprint


@pytest.mark.slow  # the demo pool generated and its SFT inputs fingerprinted
def test_the_packaged_policy_matches_the_demo_presets_sft_inputs():
    preset = PRESETS["demo"]
    pool = generate_pool(
        preset.envs, preset.tasks_per_env, 0, preset.test_per_env, max_calls=preset.max_calls
    )
    config = demo_sft_config(preset, 0, "auto", preset.agent)
    assert packaged_policy(sft_fingerprint(pool, config)) == PACKAGED_DEMO_POLICY
