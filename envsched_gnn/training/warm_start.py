"""The main job's warm start: the packaged SFT policy when :func:`sft_fingerprint` (SHA-256 of
SFT's inputs as canonical JSON) matches its manifest, else SFT now.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from envsched_gnn.config_defaults import non_default_fields
from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.json_files import canonical_sha256, write_json_atomically
from envsched_gnn.training.sft_config import SFTConfig

MANIFEST = "manifest.json"
PACKAGED_DEMO_POLICY = Path(__file__).resolve().parents[1] / "data" / "demo_sft"
PACKAGED_DEMO_START = Path(__file__).resolve().parents[1] / "data" / "demo_start"
# how SFT runs, not what it learns: left out of the fingerprint
_RUN_ONLY_FIELDS = ("accelerator", "threads", "runtime_workers", "checkpoint_every_steps")


def sft_fingerprint(pool: Pool, config: SFTConfig) -> str:
    """SHA-256 of SFT's inputs: the pool's environments and tasks, the fresh SFT tasks, and
    the config (architecture and agent format included; how it runs left out)."""
    from envsched_gnn.training.sft import sft_tasks

    _, tasks = sft_tasks(pool, config)
    recipe = {k: v for k, v in non_default_fields(config).items() if k not in _RUN_ONLY_FIELDS}
    inputs = {
        "envs": {env_id: asdict(env) for env_id, env in sorted(pool.envs.items())},
        "pool_tasks": [_sft_view(t) for t in sorted(pool.tasks, key=lambda t: t.task_id)],
        "sft_tasks": [_sft_view(t) for t in tasks],
        "config": recipe,
    }
    return canonical_sha256(inputs)


def _sft_view(task: Task) -> dict:
    """A task as SFT sees it: every field but ``abstract`` (which no prompt or target contains)."""
    view = asdict(task)
    del view["abstract"]
    return view


def packaged_policy(fingerprint: str, package: Path = PACKAGED_DEMO_POLICY) -> Path | None:
    """The packaged policy folder when its manifest's fingerprint is ``fingerprint``."""
    manifest = package / MANIFEST
    if not manifest.is_file():
        return None
    recorded = json.loads(manifest.read_text()).get("fingerprint")
    return package if recorded == fingerprint else None


def chained_fingerprint(base: str, own: str) -> str:
    """The fingerprint of SFT that continues a fingerprinted policy: SHA-256 of both."""
    return hashlib.sha256(f"{base}:{own}".encode()).hexdigest()


def warm_start(
    pool: Pool,
    model_dir: str | Path | None,
    config: SFTConfig,
    out_dir: str | Path,
    log: Callable[[str], None] = print,
    package: Path = PACKAGED_DEMO_POLICY,
    base_fingerprint: str | None = None,
) -> tuple[Path, dict]:
    """The SFT policy of a run in ``out_dir/policy``: the packaged one when its manifest matches
    this SFT's fingerprint, else :func:`~envsched_gnn.training.sft.run_sft`; returns the folder
    and what was done.
    """
    out = Path(out_dir)
    fingerprint = None
    if model_dir is None:
        fingerprint = sft_fingerprint(pool, config)
    elif base_fingerprint is not None:
        fingerprint = chained_fingerprint(base_fingerprint, sft_fingerprint(pool, config))
    if fingerprint is not None:
        found = packaged_policy(fingerprint, package)
        if found is not None:
            if (out / "policy").exists():
                shutil.rmtree(out / "policy")
            shutil.copytree(found, out / "policy")
            manifest = json.loads((found / MANIFEST).read_text())
            log(
                f"warm start: the packaged SFT policy {package.name} ({manifest['sft']['steps']} "
                f"steps, built by `{manifest['command']}`) matches this run's SFT inputs "
                f"(fingerprint {fingerprint[:12]})"
            )
            return out / "policy", {"source": "packaged", **manifest, "fingerprint": fingerprint}
        log(
            f"warm start: no packaged SFT policy {package.name} for these inputs (fingerprint "
            f"{fingerprint[:12]}): running SFT ({config.max_steps} steps)"
        )
    from envsched_gnn.training.sft import run_sft

    start = time.perf_counter()
    policy = run_sft(pool, model_dir, config, out)
    summary = json.loads((out / "sft_summary.json").read_text())
    seconds = time.perf_counter() - start
    return policy, {"source": "sft", "fingerprint": fingerprint, "seconds": seconds, "sft": summary}


def package_policy(
    pool: Pool,
    config: SFTConfig,
    out_dir: str | Path,
    command: str,
    model_dir: str | Path | None = None,
    base_fingerprint: str | None = None,
) -> Path:
    """Run SFT and leave the policy in ``out_dir`` with its ``manifest.json``."""
    import tempfile

    from envsched_gnn.training.sft import run_sft

    if (model_dir is None) != (base_fingerprint is None):
        raise ValueError("package_policy: a base model needs its fingerprint, and only then")
    fingerprint = sft_fingerprint(pool, config)
    if base_fingerprint is not None:
        fingerprint = chained_fingerprint(base_fingerprint, fingerprint)
    out = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="envsched-demo-sft-") as scratch:
        policy = run_sft(pool, model_dir, config, scratch)
        summary = json.loads((Path(scratch) / "sft_summary.json").read_text())
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(policy, out)
    manifest = {
        "fingerprint": fingerprint,
        "command": command,
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "sft": {
            key: summary[key]
            for key in ("steps", "epochs", "examples", "train_s", "first_loss", "final_loss")
        },
    }
    write_json_atomically(out / MANIFEST, manifest, indent=2)
    return out
