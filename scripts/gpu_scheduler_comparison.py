"""Does EnvSched pay on a GPU? One call: a from-scratch policy, its SFT in bf16, then GRPO with
several schedulers x seeds side by side on the one GPU, and the table.

    python scripts/gpu_scheduler_comparison.py [--seeds 3] [--steps 40] [--hidden 512 --layers 8]
        [--competence-by environment|task] [--no-start]

1. the paper's pool (51 environments x 50 tasks, 10 held out each, tasks of at most the demo
   preset's calls) and its graph, built here;
2. the built-in policy at ``--hidden`` x ``--layers`` (512 x 8: about 29 M parameters; no
   weights are downloaded anywhere), SFT on fresh generated tasks only (never the pool's
   splits), bf16 autocast on CUDA; then the demo preset's start recipe: fine-tuned on
   imperfect demonstrations at its competence profile's rates (per environment and mistake
   kind, or per task with ``--competence-by task``: the null-world profile), so that the
   start is sometimes right, as the main job's is (``--no-start``: GRPO from the SFT policy);
3. the start evaluated once: every held-out task x 4 and every train task x K;
4. GRPO at B = 64, K = 8 from that start with each of ``--schedulers`` and each seed, all runs
   side by side in their own processes on the one GPU (``--parallel``), the same rollout
   budget for all, evaluated again at the end;
5. the table: per scheduler the held-out and pool reward at the start and at the end, the
   change (paired by seed), and each scheduler minus random (paired by seed), 95 % intervals.

``--tiny`` shrinks everything (4 environments, a 40 k-parameter policy, 2 steps) so that the
suite runs the script on a CPU; the numbers are then meaningless, the code path is the same.
Meant to finish in under 10 minutes on one H200 at the defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envsched_gnn.envs.generator import generate_pool  # noqa: E402
from envsched_gnn.envs.runtime_config import RuntimeConfig  # noqa: E402
from envsched_gnn.eval.stats import format_ci, mean_ci  # noqa: E402
from envsched_gnn.graph_store.builder import GraphConfig, build_graph  # noqa: E402
from envsched_gnn.pipeline.presets import PRESETS  # noqa: E402
from envsched_gnn.training.grpo_config import LaunchConfig  # noqa: E402
from envsched_gnn.training.grpo_runs import GRPORun, SharedStart, train_runs  # noqa: E402
from envsched_gnn.training.policy import (  # noqa: E402
    count_parameters,
    load_agent_config,
    load_policy,
)
from envsched_gnn.training.sft import SFTConfig, run_sft  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="GRPO seeds per scheduler (3)")
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps per run (40)")
    parser.add_argument(
        "--schedulers", nargs="+", default=["envsched", "random", "rho0"], help="compared"
    )
    parser.add_argument("--sft-steps", type=int, default=1500, help="SFT steps (1500)")
    parser.add_argument("--hidden", type=int, default=512, help="policy width (512)")
    parser.add_argument("--layers", type=int, default=8, help="policy blocks (8)")
    parser.add_argument("--lr", type=float, default=3e-5, help="GRPO learning rate (3e-5)")
    parser.add_argument("--parallel", type=int, default=0, help="runs at once (0: all)")
    parser.add_argument("--out", type=Path, default=None, help="folder (default: a temp one)")
    parser.add_argument(
        "--competence-by",
        choices=("environment", "task"),
        default=None,
        help="rates of the start's imperfect demonstrations (default: the demo preset's)",
    )
    parser.add_argument("--no-start", action="store_true", help="GRPO from the SFT policy")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, for a CPU check")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    import torch

    args = parse_args(argv)
    cuda = torch.cuda.is_available() and not args.tiny
    demo, paper = PRESETS["demo"], PRESETS["paper"]
    envs, tasks, test, batch, group = 51, 50, 10, paper.grpo.batch_size, paper.grpo.group_size
    hidden, layers, heads = args.hidden, args.layers, max(4, args.hidden // 64)
    sft_batch, extra = (64, 100) if cuda else (16, 100)
    if args.tiny:
        envs, tasks, test, batch, group, hidden, layers, heads = 3, 6, 2, 3, 2, 32, 2, 2
        sft_batch, extra = 4, 2
    print(json.dumps({"device": torch.cuda.get_device_name(0) if cuda else "cpu"}), flush=True)
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-scheduler-comparison-"))
    pool = generate_pool(envs, tasks, 0, test, max_calls=demo.max_calls)
    graph = build_graph(pool, GraphConfig(show_progress=False))
    policy = replace(
        demo.policy, hidden_size=hidden, num_layers=layers, num_heads=heads, num_kv_heads=heads,
        intermediate_size=3 * hidden, vocab_size=600 if args.tiny else demo.policy.vocab_size,
    )  # fmt: skip
    sft = SFTConfig(
        max_steps=args.sft_steps,
        batch_size=sft_batch,
        learning_rate=1e-3,
        warmup_steps=min(100, args.sft_steps // 10 + 1),
        extra_tasks_per_env=extra,
        include_train_split=False,
        accelerator="gpu" if cuda else "cpu",
        agent=demo.agent,
        policy=policy,
    )
    tick = time.perf_counter()
    policy_dir = run_sft(pool, None, sft, out / "sft")
    parameters = count_parameters(load_policy(policy_dir)[0])
    print(f"SFT: {parameters / 1e6:.2f} M parameters, {args.sft_steps} steps in "
          f"{time.perf_counter() - tick:.0f} s", flush=True)  # fmt: skip
    if demo.start is not None and not args.no_start:
        profile = demo.start.competence
        if args.competence_by is not None:
            profile = replace(profile, by=args.competence_by)
        start = replace(
            sft, max_steps=2 if args.tiny else demo.start.steps,
            learning_rate=demo.start.learning_rate, warmup_steps=1 if args.tiny else 20,
            extra_tasks_per_env=extra, competence=profile,
        )  # fmt: skip
        tick = time.perf_counter()
        policy_dir = run_sft(pool, policy_dir, start, out / "start")
        print(f"start: {start.max_steps} steps on imperfect demonstrations (rates per "
              f"{profile.by}, mean {profile.mean}) in {time.perf_counter() - tick:.0f} s",
              flush=True)  # fmt: skip
    agent = load_agent_config(policy_dir)
    recipe = replace(
        demo.grpo, batch_size=batch, group_size=group, steps=args.steps, lr=args.lr,
        eval_every=args.steps, eval_tasks=0, eval_samples=4, pool_eval_samples=group,
    )  # fmt: skip
    launch = LaunchConfig(accelerator="gpu" if cuda else "cpu", print_steps=not args.tiny)
    runtime = RuntimeConfig(workers=2)
    initial = start_evaluation(pool, policy_dir, recipe, agent, runtime, cuda)
    pool_start = initial["pool"]["mean_reward"]
    print(f"start: held-out {initial['mean_reward']:.3f}, pool {pool_start:.3f}", flush=True)
    runs = [
        GRPORun(
            replace(recipe, scheduler=name, seed=seed), out / "grpo" / f"{name}-seed{seed}", graph
        )
        for name in args.schedulers
        for seed in range(args.seeds)
    ]
    workers = args.parallel or len(runs)
    tick = time.perf_counter()
    shared = SharedStart(pool, policy_dir, agent, runtime, launch, initial, eval_seed=0)
    results = list(train_runs(shared, runs, 1 if args.tiny else workers))
    print(f"GRPO: {len(runs)} runs, {workers} at a time, {time.perf_counter() - tick:.0f} s")
    table = comparison_table(args.schedulers, args.seeds, results)
    print(render_table(table, args.schedulers))
    (out / "comparison.json").write_text(json.dumps(table, indent=2) + "\n")
    return table


def start_evaluation(pool, policy_dir, recipe, agent, runtime, cuda: bool) -> dict:
    """The start's held-out and pool evaluation, shared by every run."""
    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.training.held_out import policy_evaluator
    from envsched_gnn.training.rollout import RolloutEngine

    device = "cuda" if cuda else "cpu"
    model, tokenizer = load_policy(policy_dir, device=device)
    evaluate = policy_evaluator(
        pool, 0, recipe.eval_samples, recipe.pool_eval_samples, 0, recipe.pool_eval_tasks
    )
    with EnvRuntime(pool, runtime) as env_runtime:
        return evaluate(RolloutEngine(model, tokenizer, env_runtime, agent, device, pool), 0)


def comparison_table(schedulers, seeds: int, results) -> dict:
    """Per scheduler: start and end held-out / pool reward, change and minus random, paired by
    seed (95 % intervals over seeds)."""
    by_run = {(r.scheduler, r.config["seed"]): r for r in results}
    table: dict = {}
    for part in ("heldout", "pool"):
        final = {
            (name, s): _reward(by_run[name, s].evals[-1], part)
            for name in schedulers
            for s in range(seeds)
        }
        start = _reward(results[0].evals[0], part)
        for name in schedulers:
            row = table.setdefault(name, {})
            row[f"{part}_start"] = start
            row[f"{part}_end"] = mean_ci([final[name, s] for s in range(seeds)])
            row[f"{part}_change"] = mean_ci([final[name, s] - start for s in range(seeds)])
            if "random" in schedulers and name != "random":
                row[f"{part}_minus_random"] = mean_ci(
                    [final[name, s] - final["random", s] for s in range(seeds)]
                )
    return table


def _reward(entry: dict, part: str) -> float:
    return float((entry if part == "heldout" else entry["pool"])["mean_reward"])


def render_table(table: dict, schedulers) -> str:
    header = "| scheduler | held-out end | change | - random | pool end | change | - random |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for name in schedulers:
        row = table[name]
        cells = [name]
        for part in ("heldout", "pool"):
            cells += [
                format_ci(row[f"{part}_end"]),
                format_ci(row[f"{part}_change"]),
                format_ci(row.get(f"{part}_minus_random")),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
    sys.exit(0)
