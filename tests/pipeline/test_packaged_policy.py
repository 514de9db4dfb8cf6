"""The packaged policies are the main job's warm start and start: their manifests must match
the SFT inputs the demo preset has now, or a fresh clone silently runs ~40 minutes of SFT."""

from __future__ import annotations

from envsched_gnn.pipeline.demo_policy import demo_sft_config, demo_start_config, preset_pools
from envsched_gnn.pipeline.presets import PRESETS
from envsched_gnn.training.warm_start import (
    PACKAGED_DEMO_POLICY,
    PACKAGED_DEMO_START,
    chained_fingerprint,
    packaged_policy,
    sft_fingerprint,
)


def test_the_packaged_policies_match_the_demo_presets_sft_inputs():
    preset = PRESETS["demo"]
    base_pool, pool = preset_pools(preset, 0)
    base = sft_fingerprint(base_pool, demo_sft_config(preset, 0, "auto", preset.agent))
    assert packaged_policy(base) == PACKAGED_DEMO_POLICY
    start = sft_fingerprint(pool, demo_start_config(preset, 0, "auto", preset.agent))
    assert packaged_policy(chained_fingerprint(base, start), PACKAGED_DEMO_START) == (
        PACKAGED_DEMO_START
    )
