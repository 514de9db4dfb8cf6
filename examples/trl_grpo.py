"""EnvSched choosing the prompts of TRL's GRPOTrainer, on CPU, from a fresh clone.

Generates a small pool of executable environments, builds its dual-relation graph
(offline MiniLM), builds the built-in tool-calling policy (untrained unless ``--model``),
and trains it with TRL's ``GRPOTrainer`` for ``--steps`` steps, EnvSched choosing each
step's B tasks and the environment runtime scoring every completion; prints each step's
scheduler metrics. The pool, ``graph.json`` and the policy stay in ``--out``, so the same
run can be repeated with ``envsched-gnn train grpo`` (docs/results/integrations.md compares
the two).

    python examples/trl_grpo.py --steps 5
    python examples/trl_grpo.py --multi-turn       # TRL's environment_factory, tool messages
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/trl-grpo", help="folder for pool, graph, run")
    parser.add_argument("--envs", type=int, default=4, help="generated environments")
    parser.add_argument("--tasks-per-env", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4, help="B, tasks per step")
    parser.add_argument("--group-size", type=int, default=4, help="K, completions per task")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--scheduler", default="envsched", help="any scheduler of the registry")
    parser.add_argument("--model", help="a local HF causal LM folder (default: built-in)")
    parser.add_argument("--multi-turn", action="store_true", help="TRL's environment_factory")
    parser.add_argument("--lr", type=float, default=1e-4, help="learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    from transformers import PrinterCallback
    from trl import GRPOConfig

    from envsched_gnn.envs.generator import generate_pool, write_pool_files
    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.graph.task_graph import write_graph
    from envsched_gnn.graph_build.builder import GraphConfig, build_graph
    from envsched_gnn.integrations.schedulers import adapter_scheduler
    from envsched_gnn.integrations.trl import (
        EnvSchedGRPOTrainer,
        RoundRewards,
        RuntimeReward,
        environment_factories,
        pool_dataset,
    )
    from envsched_gnn.json_files import write_json_atomically
    from envsched_gnn.training.policy import PolicyConfig, build_default_policy, load_policy

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    pool = generate_pool(args.envs, args.tasks_per_env, seed=args.seed, test_per_env=2)
    write_pool_files(pool, out / "pool")
    graph = build_graph(pool, GraphConfig(show_progress=False))
    write_graph(out / "graph.json", graph)
    train_ids = [task.task_id for task in pool.split("train")]
    model_dir = args.model or build_default_policy(
        pool, PolicyConfig(seed=args.seed), out / "policy"
    )
    model, tokenizer = load_policy(model_dir)
    tokenizer.padding_side = "left"
    if args.multi_turn and args.model is None:
        import trl

        # the built-in ChatML template cannot render tool messages; TRL's Qwen2.5 can
        template = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
        tokenizer.chat_template = template.read_text()

    rewards = RoundRewards()
    scheduler = adapter_scheduler(
        "trl",
        args.scheduler,
        graph.subgraph(train_ids),
        batch_size=args.batch_size,
        seed=args.seed,
        pool=pool,
    )
    config = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=args.batch_size * args.group_size,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        max_steps=args.steps,
        learning_rate=args.lr,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),
        seed=args.seed,
        disable_tqdm=True,
        log_level="warning",
        max_tool_calling_iterations=4 if args.multi_turn else None,
    )
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        if args.multi_turn:
            source = {"environment_factory": environment_factories(pool, runtime, rewards)}
        else:
            source = {"reward_funcs": RuntimeReward(runtime, rewards)}
        trainer = EnvSchedGRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=pool_dataset(pool, tools_in_prompt=not args.multi_turn),
            scheduler=scheduler,
            rewards=rewards,
            print_steps=True,
            **source,
        )
        trainer.remove_callback(PrinterCallback)  # our per-step line replaces TRL's log dicts
        trainer.train()
    steps = trainer.envsched.step_metrics
    write_json_atomically(out / "trl_steps.json", steps, indent=2)
    print(json.dumps({"out": str(out), "steps": len(steps), "batches": trainer.envsched.batches}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
