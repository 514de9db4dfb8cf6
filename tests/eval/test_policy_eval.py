"""Held-out evaluation: the summary is the group statistics of the episodes it ran."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.policy_commands import register
from envsched_gnn.eval.policy_eval import evaluate_policy
from envsched_gnn.training.agent_format import AgentConfig, format_tool_call
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.rollout import RolloutEngine
from tests.envs.handmade_pool import handmade_pool, write_handmade_pool
from tests.training.scripted_policy import ScriptedLM
from tests.training.tiny_policy import trained_policy_dir, untrained_policy_dir

POOL = handmade_pool()
TASKS = [t.task_id for t in POOL.tasks]


def _script(task_id: str) -> list[str]:
    return [format_tool_call(c) for c in POOL.task(task_id).reference_solution] + ["Done."]


@pytest.fixture(scope="module")
def runtime():
    with EnvRuntime(POOL, RuntimeConfig(workers=2)) as rt:
        yield rt


def _engine(runtime, scripts) -> RolloutEngine:
    _, tokenizer = load_policy(untrained_policy_dir())
    model = ScriptedLM(tokenizer, POOL, scripts)
    return RolloutEngine(model, tokenizer, runtime, AgentConfig(max_new_tokens=96), pool=POOL)


def test_a_policy_that_always_solves_scores_one_without_spread(runtime):
    engine = _engine(runtime, {t: [_script(t)] for t in TASKS})
    result = evaluate_policy(engine, TASKS, k=2, seed=0, tasks_per_batch=4)
    assert result["mean_reward"] == 1.0 and result["full_success_rate"] == 1.0
    assert result["zero_variance_share"] == 1.0 and result["mean_reward_variance"] == 0.0
    assert result["episodes"] == 2 * len(TASKS) and result["malformed_call_rate"] == 0.0
    assert result["finish_reasons"] == {"answer": 2 * len(TASKS)}
    assert result["per_env"]["library"]["tasks"] == 3 and result["per_env"]["clinic"]["tasks"] == 3


def test_summary_matches_the_group_statistics_of_the_episodes(runtime):
    engine = _engine(runtime, {t: [_script(t), ["Done."]] for t in TASKS})
    result = evaluate_policy(engine, TASKS, k=8, seed=4, tasks_per_batch=64)
    episodes = engine.rollout(TASKS, k=8, seed=4)
    rewards = np.array([e.reward for e in episodes]).reshape(len(TASKS), 8)
    m, v = rewards.mean(axis=1), rewards.var(axis=1)
    assert result["mean_reward"] == pytest.approx(m.mean())
    assert result["mean_reward_variance"] == pytest.approx(v.mean())
    assert result["zero_variance_share"] == pytest.approx(np.mean(v == 0))
    assert result["full_success_rate"] == pytest.approx(np.mean(rewards == 1.0))
    assert 0 < result["mean_reward"] < 1 and result["zero_variance_share"] < 1
    library = [i for i, t in enumerate(TASKS) if t.startswith("library")]
    assert result["per_env"]["library"]["mean_reward"] == pytest.approx(m[library].mean())


def test_evaluation_rejects_bad_requests(runtime):
    engine = _engine(runtime, {t: [_script(t)] for t in TASKS})
    with pytest.raises(ValueError, match="k must be"):
        evaluate_policy(engine, TASKS, k=0, seed=0)
    with pytest.raises(ValueError, match="distinct"):
        evaluate_policy(engine, [TASKS[0], TASKS[0]], k=1, seed=0)


def _run_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    root = parser.add_subparsers()
    register({"eval": root.add_parser("eval").add_subparsers()})
    args = parser.parse_args(argv)
    return args.func(args)


def test_eval_policy_command_writes_the_result(tmp_path, capsys):
    pool_dir = write_handmade_pool(tmp_path / "pool")
    out = tmp_path / "eval.json"
    argv = ["eval", "policy", "--pool", str(pool_dir), "--model", str(trained_policy_dir())]
    argv += ["--k", "2", "--device", "cpu", "--workers", "1", "--out", str(out)]
    assert _run_command(argv) == 0
    result = json.loads(out.read_text())
    assert result["tasks"] == len(POOL.split("test")) and result["k"] == 2
    assert "mean reward" in capsys.readouterr().out


def test_eval_policy_on_an_empty_split_is_a_one_line_error(tmp_path, capsys):
    pool_dir = write_handmade_pool(tmp_path / "pool")
    model = tmp_path / "model"  # a model folder as far as the cheap checks look
    model.mkdir()
    (model / "config.json").write_text("{}")
    argv = ["eval", "policy", "--pool", str(pool_dir), "--model", str(model)]
    argv += ["--split", "nosuchsplit", "--out", str(tmp_path / "eval.json")]
    assert _run_command(argv) == 2
    assert capsys.readouterr().err == (
        f"error: pool {pool_dir} has no task in split 'nosuchsplit'\n"
    )
    assert not (tmp_path / "eval.json").exists()
