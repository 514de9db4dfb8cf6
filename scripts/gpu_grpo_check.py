"""GPU check of the paper preset's GRPO: a larger built-in policy, a short SFT, a few GRPO steps
of B = 64 tasks x K = 8 rollouts with EnvSched, on CUDA in bf16.

    python scripts/gpu_grpo_check.py [--steps 3] [--sft-steps 300] [--hidden 512 --layers 8]

Prints the device, the policy's size, SFT's speed, and per GRPO step the rollout and update
seconds, sampled tokens/s of the rollout and sequence tokens/s of the update, and the peak GPU
memory. ``--small`` shrinks everything so the script can be checked on a CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envsched_gnn.envs.generator import generate_pool  # noqa: E402
from envsched_gnn.graph_build.builder import GraphConfig, build_graph  # noqa: E402
from envsched_gnn.pipeline.presets import PRESETS  # noqa: E402
from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig  # noqa: E402
from envsched_gnn.training.grpo.train import train_grpo  # noqa: E402
from envsched_gnn.training.policy import PolicyConfig, count_parameters, load_policy  # noqa: E402
from envsched_gnn.training.sft import SFTConfig, run_sft  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (3)")
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT steps (300)")
    parser.add_argument("--hidden", type=int, default=512, help="policy width (512)")
    parser.add_argument("--layers", type=int, default=8, help="policy blocks (8)")
    parser.add_argument("--small", action="store_true", help="tiny sizes, for a CPU check")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    paper = PRESETS["paper"]
    envs, tasks, test = (paper.envs, paper.tasks_per_env, paper.test_per_env)
    batch, group = paper.grpo.batch_size, paper.grpo.group_size
    hidden, layers = args.hidden, args.layers
    if args.small:
        envs, tasks, test, batch, group, hidden, layers = 4, 10, 2, 4, 2, 64, 2
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0) if cuda else "cpu",
                "torch": torch.__version__,
                "bf16": bool(cuda and torch.cuda.is_bf16_supported()),
            }
        ),
        flush=True,
    )
    scratch = Path(tempfile.mkdtemp(prefix="gpu-grpo-check-"))
    pool = generate_pool(envs, tasks, 0, test)
    graph = build_graph(pool, GraphConfig(show_progress=False))
    policy_config = PolicyConfig(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(4, hidden // 64),
        num_kv_heads=max(4, hidden // 64),
        intermediate_size=3 * hidden,
    )
    sft = SFTConfig(
        max_steps=args.sft_steps,
        batch_size=32 if cuda else 8,
        learning_rate=1e-3,
        extra_tasks_per_env=0,
        policy=policy_config,
    )
    tick = time.perf_counter()
    policy_dir = run_sft(pool, None, sft, scratch / "sft")
    summary = json.loads((scratch / "sft" / "sft_summary.json").read_text())
    model, _ = load_policy(policy_dir)
    print(
        f"SFT: {count_parameters(model) / 1e6:.1f} M parameters, {summary['steps']} steps in "
        f"{time.perf_counter() - tick:.0f} s ({summary['tokens_per_s']:.0f} tokens/s), loss "
        f"{summary['first_loss']:.2f} -> {summary['final_loss']:.2f}",
        flush=True,
    )
    del model
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    config = replace(
        GRPOConfig(),
        batch_size=batch,
        group_size=group,
        steps=args.steps,
        lr=1e-5,
        micro_batch_size=paper.grpo.micro_batch_size,
        eval_every=0,
    )
    result = train_grpo(
        pool,
        graph,
        policy_dir,
        config,
        scratch / "grpo",
        launch=LaunchConfig(progress_bar=False),
    )
    for step in result.steps:
        rollout_s, update_s = step["time/rollout_s"], step["time/update_s"]
        print(
            f"GRPO step {int(step['step'])}: {batch} x {group} rollouts in {rollout_s:.2f} s "
            f"({step['rollout/policy_tokens_per_s']:.0f} sampled tokens/s), "
            f"update {update_s:.2f} s ({step['train/tokens_per_s']:.0f} tokens/s), "
            f"schedule {step['time/schedule_s'] * 1e3:.0f} ms, mean reward "
            f"{step['batch/mean_reward']:.3f}",
            flush=True,
        )
    if cuda:
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
