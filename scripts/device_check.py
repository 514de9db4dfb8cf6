"""Device check in one call (GPU machine): load a policy, one SFT step, one 64 x 8 rollout.

    python scripts/device_check.py [MODEL_DIR] [--pool DIR] [--tasks 64] [--k 8]

MODEL_DIR: a local HF causal LM folder with a chat template; without it (or when the folder
does not exist) the built-in policy is built for the pool. The pool defaults to a freshly
generated one (51 environments x 50 tasks). Prints device, bf16 support, parameter count,
the SFT step time and peak memory, and the rollout timings. Meant to finish in < 10 min.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envsched_gnn.envs.runtime import EnvRuntime  # noqa: E402
from envsched_gnn.envs.runtime_config import RuntimeConfig  # noqa: E402
from envsched_gnn.training.agent_format import AgentConfig, ChatFormat  # noqa: E402
from envsched_gnn.training.policy import (  # noqa: E402
    PolicyConfig,
    build_default_policy,
    count_parameters,
    load_policy,
)
from envsched_gnn.training.rollout import RolloutEngine  # noqa: E402
from envsched_gnn.training.sft import policy_token_loss  # noqa: E402
from envsched_gnn.training.sft_data import (  # noqa: E402
    SFTDataset,
    pad_collate,
    render_references,
    run_references,
)


def load_or_generate_pool(pool_dir: str | None, seed: int):
    if pool_dir:
        from envsched_gnn.envs.pool_io import load_pool

        return load_pool(pool_dir)
    from envsched_gnn.envs.generator import generate_pool

    return generate_pool(seed=seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="local HF model folder (default: built-in)")
    parser.add_argument("--pool", help="pool folder (default: generate the 51 x 50 pool)")
    parser.add_argument("--tasks", type=int, default=64, help="tasks in the rollout batch")
    parser.add_argument("--k", type=int, default=8, help="samples per task")
    parser.add_argument("--batch-size", type=int, default=16, help="SFT step batch size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    info = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "bf16_supported": bool(cuda and torch.cuda.is_bf16_supported()),
        "cpu_threads": torch.get_num_threads(),
    }
    print(json.dumps(info), flush=True)

    tick = time.perf_counter()
    pool = load_or_generate_pool(args.pool, args.seed)
    print(
        f"pool: {len(pool.envs)} envs, {len(pool.tasks)} tasks, {time.perf_counter() - tick:.1f} s",
        flush=True,
    )
    scratch = Path(tempfile.mkdtemp(prefix="device-check-"))
    model_dir = args.model if args.model and Path(args.model).is_dir() else None
    if model_dir is None:
        model_dir = build_default_policy(pool, PolicyConfig(seed=args.seed), scratch / "policy")
    tick = time.perf_counter()
    model, tokenizer = load_policy(model_dir, device=device)
    print(
        f"model {model_dir}: {count_parameters(model) / 1e6:.2f} M parameters, "
        f"vocab {len(tokenizer)}, loaded in {time.perf_counter() - tick:.1f} s",
        flush=True,
    )

    agent = AgentConfig()
    train = pool.split("train")[: args.batch_size * 4]
    with EnvRuntime(pool, RuntimeConfig(workers=4)) as runtime:
        runs = run_references(runtime, train)
        examples = render_references(ChatFormat(tokenizer), pool, runs, agent)
        dataset = SFTDataset(examples, max_length=4096)
        group = max(dataset.groups, key=len)[: args.batch_size]
        batch = pad_collate(int(tokenizer.pad_token_id))([dataset[i] for i in group])
        batch = {key: value.to(device) for key, value in batch.items()}
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        for step in range(2):  # the first step includes kernel warm-up
            if cuda:
                torch.cuda.synchronize()
            tick = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                loss = policy_token_loss(model, batch)
            loss.backward()
            loss = loss.detach()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize()
            print(
                f"SFT step {step}: batch {tuple(batch['input_ids'].shape)}, loss "
                f"{float(loss):.3f}, {time.perf_counter() - tick:.2f} s",
                flush=True,
            )
        if cuda:
            print(f"SFT peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
        model.eval()

        engine = RolloutEngine(model, tokenizer, runtime, agent, device)
        tasks = [task.task_id for task in pool.split("test")][: args.tasks]
        tick = time.perf_counter()
        episodes = engine.rollout(tasks, k=args.k, seed=args.seed)
        wall = time.perf_counter() - tick
    rewards = [e.reward for e in episodes]
    timings = {key: round(value, 2) for key, value in engine.last_timings.items()}
    print(
        f"rollout {len(tasks)} x {args.k}: {wall:.1f} s, mean reward "
        f"{sum(rewards) / len(rewards):.3f}, timings {json.dumps(timings)}",
        flush=True,
    )
    if cuda:
        print(f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
