"""The warm start's recipe at small size: SFT with a step budget is reproducible (two runs,
one policy), a packaged policy is used only for the inputs it was trained on."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

import pytest
import torch

from envsched_gnn.training.policy import PolicyConfig, load_policy
from envsched_gnn.training.warm_start import (
    MANIFEST,
    package_policy,
    packaged_policy,
    sft_fingerprint,
    warm_start,
)
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import TINY_SFT

CONFIG = replace(TINY_SFT, max_steps=12, checkpoint_every_steps=1000)


def weights(folder):
    model, _ = load_policy(folder)
    return model.state_dict()


@pytest.mark.slow  # two SFT runs
def test_two_sft_runs_with_one_seed_give_one_policy(tmp_path):
    pool = handmade_pool()
    first = package_policy(pool, CONFIG, tmp_path / "a", "test: first")
    second = package_policy(pool, CONFIG, tmp_path / "b", "test: second")
    a, b = weights(first), weights(second)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    manifest = json.loads((first / MANIFEST).read_text())
    assert manifest["fingerprint"] == sft_fingerprint(pool, CONFIG)
    assert manifest["command"] == "test: first" and manifest["sft"]["steps"] == 12
    assert (first / "agent_config.json").is_file() and not (first / "checkpoints").exists()


@pytest.mark.slow  # two SFT runs
def test_the_packaged_policy_serves_only_its_own_inputs(tmp_path):
    pool = handmade_pool()
    package = package_policy(pool, CONFIG, tmp_path / "package", "test")
    assert packaged_policy(sft_fingerprint(pool, CONFIG), package) == package

    logged: list[str] = []
    policy, info = warm_start(pool, None, CONFIG, tmp_path / "run", logged.append, package)
    assert info["source"] == "packaged" and "matches this run's SFT inputs" in logged[-1]
    assert not (tmp_path / "run" / "sft_summary.json").exists()  # no SFT ran
    for name, value in weights(package).items():
        assert torch.equal(weights(policy)[name], value), name

    # another seed, another step budget, another pool: SFT runs
    for config, other_pool in (
        (replace(CONFIG, seed=1), pool),
        (replace(CONFIG, max_steps=13), pool),
        (CONFIG, replace(pool, tasks=pool.tasks[:-1])),
    ):
        fingerprint = sft_fingerprint(other_pool, config)
        assert fingerprint != sft_fingerprint(pool, CONFIG)
        assert packaged_policy(fingerprint, package) is None
    out = tmp_path / "other"
    policy, info = warm_start(pool, None, replace(CONFIG, seed=1), out, logged.append, package)
    assert info["source"] == "sft" and "running SFT" in logged[-1]
    assert (out / "sft_summary.json").is_file() and policy == out / "policy"


def test_how_sft_runs_is_not_part_of_the_fingerprint():
    pool = handmade_pool()
    faster = replace(CONFIG, threads=1, accelerator="cpu", runtime_workers=4)
    assert sft_fingerprint(pool, faster) == sft_fingerprint(pool, CONFIG)


def test_a_tasks_graph_abstract_is_not_an_sft_input():
    """No prompt or target holds a task's abstract, so a new categoriser keeps the package;
    its instruction is an input."""
    pool = handmade_pool()
    first = pool.tasks[0]
    relabelled = type(pool)(pool.envs, [replace(first, abstract="step 1: other")] + pool.tasks[1:])
    reworded = type(pool)(pool.envs, [replace(first, task=first.task + " now")] + pool.tasks[1:])
    assert sft_fingerprint(relabelled, CONFIG) == sft_fingerprint(pool, CONFIG)
    assert sft_fingerprint(reworded, CONFIG) != sft_fingerprint(pool, CONFIG)


def test_an_option_at_its_default_leaves_the_fingerprint_as_it_was():
    """A later option whose default keeps the old behaviour must not invalidate a package
    built before it existed; set to anything else, it is an input."""

    @dataclass
    class LaterPolicyConfig(PolicyConfig):
        later_option: bool = False

    pool = handmade_pool()
    later = replace(CONFIG, policy=LaterPolicyConfig(**asdict(CONFIG.policy)))
    assert sft_fingerprint(pool, later) == sft_fingerprint(pool, CONFIG)
    used = replace(later, policy=replace(later.policy, later_option=True))
    assert sft_fingerprint(pool, used) != sft_fingerprint(pool, CONFIG)
    spaced = replace(CONFIG, policy=replace(CONFIG.policy, space_tokens=True))
    assert sft_fingerprint(pool, spaced) != sft_fingerprint(pool, CONFIG)
