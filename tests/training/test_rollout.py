"""The rollout engine on the hand-made pool, in the real runtime's worker processes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from envsched_gnn.envs.pool import Check, Environment, Pool, Task
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.agent_format import AgentConfig, format_tool_call
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.rollout import EpisodeSpec, RolloutEngine
from tests.envs.handmade_pool import handmade_pool
from tests.training.scripted_policy import ScriptedLM
from tests.training.tiny_policy import trained_policy_dir, untrained_policy_dir

BROKEN = Environment(
    env_id="broken",
    env_class_code="class Broken:\n    def __init__(self):\n        raise RuntimeError('down')\n",
    tools=[],
)


def _pool() -> Pool:
    pool = handmade_pool()
    broken = Task(
        task_id="broken-task",
        env_id="broken",
        env_class_name="Broken",
        init_config={},
        task="Nothing works here.",
        checklist_with_func=[Check("never", "def check_func(final_state):\n    return True\n")],
    )
    return Pool(envs={**pool.envs, "broken": BROKEN}, tasks=[*pool.tasks, broken])


POOL = _pool()
TASKS = [t.task_id for t in POOL.tasks if t.env_id != "broken"]
LONG = AgentConfig(max_turns=6, max_new_tokens=96)


@pytest.fixture(scope="module")
def runtime():
    with EnvRuntime(POOL, RuntimeConfig(workers=2)) as rt:
        yield rt


@pytest.fixture(scope="module")
def tokenizer():
    return load_policy(untrained_policy_dir())[1]


def reference_script(task_id: str) -> list[str]:
    return [format_tool_call(c) for c in POOL.task(task_id).reference_solution] + ["Done."]


def scripted_engine(tokenizer, runtime, scripts, config=LONG) -> RolloutEngine:
    model = ScriptedLM(tokenizer, POOL, scripts)
    return RolloutEngine(model, tokenizer, runtime, config, "cpu", pool=POOL)


def test_reference_scripts_reach_reward_one(tokenizer, runtime):
    engine = scripted_engine(tokenizer, runtime, {t: [reference_script(t)] for t in TASKS})
    episodes = engine.rollout(TASKS, k=2, seed=3)
    assert [(e.task_id, e.sample) for e in episodes] == [(t, s) for t in TASKS for s in (0, 1)]
    for episode in episodes:
        reference = POOL.task(episode.task_id).reference_solution
        assert episode.reward == 1.0 and all(episode.checks)
        assert episode.finish_reason == "answer"
        assert episode.tool_calls == reference
        assert episode.num_turns == len(reference) + 1
        assert episode.texts == reference_script(episode.task_id)
        assert episode.malformed_calls == 0


def test_mask_and_logprobs_cover_exactly_the_sampled_tokens(tokenizer, runtime):
    engine = scripted_engine(tokenizer, runtime, {t: [reference_script(t)] for t in TASKS})
    fmt = engine.format
    for episode in engine.rollout(TASKS[:2], k=1, seed=0):
        ids, mask = episode.token_ids, episode.policy_mask
        assert ids.dtype == torch.long and mask.dtype == torch.bool
        assert episode.old_logprobs.dtype == torch.float32
        assert len(ids) == len(mask) == len(episode.old_logprobs)
        assert not mask[: episode.prompt_length].any()
        assert torch.all(episode.old_logprobs[~mask] == 0)
        # forced tokens: probability one
        assert torch.allclose(episode.old_logprobs[mask], torch.zeros(int(mask.sum())))
        policy_ids = ids[mask].tolist()
        expected = [i for text in episode.texts for i in fmt.assistant_ids(text)]
        assert policy_ids == expected
        assert "<tool_response>" in fmt.decode(ids[~mask].tolist())


def test_sampled_alternatives_get_their_own_rewards(tokenizer, runtime):
    scripts = {t: [reference_script(t), ["Done."]] for t in TASKS}
    engine = scripted_engine(tokenizer, runtime, scripts)
    empty = {
        t: s.reward for t, s in zip(TASKS, runtime.replay([(t, []) for t in TASKS]), strict=True)
    }
    episodes = engine.rollout(TASKS, k=8, seed=11)
    solved = [e for e in episodes if e.tool_calls]
    assert 0 < len(solved) < len(episodes)
    for episode in episodes:
        if episode.tool_calls:
            assert episode.reward == 1.0 and episode.num_turns > 1
        else:
            assert episode.reward == empty[episode.task_id] < 1.0 and episode.num_turns == 1
        assert episode.old_logprobs[episode.policy_mask][0] == pytest.approx(-0.6931, abs=1e-3)


def test_malformed_call_gets_an_error_response_and_the_episode_goes_on(tokenizer, runtime):
    task_id = "clinic-cancel"
    script = ['<tool_call>{"name": "cancel_appointment", oops}</tool_call>'] + reference_script(
        task_id
    )
    engine = scripted_engine(tokenizer, runtime, {task_id: [script]})
    (episode,) = engine.rollout([task_id], seed=0)
    assert episode.malformed_calls == 1
    assert episode.reward == 1.0 and episode.finish_reason == "answer"
    context = engine.format.decode(episode.token_ids[~episode.policy_mask].tolist())
    assert "malformed tool call: invalid JSON" in context


def test_unknown_tool_gets_the_runtime_error(tokenizer, runtime):
    task_id = "clinic-cancel"
    script = ['<tool_call>{"name": "teleport", "arguments": {}}</tool_call>', "Done."]
    engine = scripted_engine(tokenizer, runtime, {task_id: [script]})
    (episode,) = engine.rollout([task_id], seed=0)
    assert episode.malformed_calls == 0 and episode.tool_calls[0].name == "teleport"
    assert '"success": false' in engine.format.decode(episode.token_ids.tolist())
    assert episode.reward < 1.0


@pytest.mark.parametrize(
    ("config", "reason", "turns"),
    [
        (dataclasses.replace(LONG, max_turns=2), "max_turns", 2),
        (dataclasses.replace(LONG, max_new_tokens=5), "turn_length", 1),
        (dataclasses.replace(LONG, max_prompt_tokens=10), "context_limit", 0),
    ],
)
def test_limits_end_episodes_and_the_state_reached_is_scored(
    tokenizer, runtime, config, reason, turns
):
    task_id = "library-checkout"
    engine = scripted_engine(tokenizer, runtime, {task_id: [reference_script(task_id)]}, config)
    (episode,) = engine.rollout([task_id], seed=0)
    assert episode.finish_reason == reason
    assert episode.num_turns == turns
    executed = POOL.task(task_id).reference_solution[: len(episode.tool_calls)]
    assert episode.tool_calls == executed
    (expected,) = runtime.replay([(task_id, executed)])
    assert episode.reward == expected.reward


def test_environment_that_fails_to_start_scores_zero(tokenizer, runtime):
    engine = scripted_engine(tokenizer, runtime, {"broken-task": [["Done."]]})
    (episode,) = engine.rollout(["broken-task"], seed=0)
    assert episode.finish_reason == "reset_error" and episode.reward == 0.0
    assert episode.num_turns == 0


def test_repeated_task_ids_continue_the_sample_numbering(tokenizer, runtime):
    engine = scripted_engine(tokenizer, runtime, {t: [reference_script(t)] for t in TASKS})
    episodes = engine.rollout([TASKS[0], TASKS[1], TASKS[0]], k=1, seed=0)
    assert [(e.task_id, e.sample) for e in episodes] == [
        (TASKS[0], 0),
        (TASKS[1], 0),
        (TASKS[0], 1),
    ]


@pytest.fixture(scope="module")
def trained_engine(runtime):
    model, tokenizer = load_policy(trained_policy_dir(), dtype=torch.float64)
    config = AgentConfig(max_turns=3, max_new_tokens=40, temperature=1.0)
    return RolloutEngine(model, tokenizer, runtime, config, "cpu", pool=POOL)


def _same(a, b) -> bool:
    return (
        torch.equal(a.token_ids, b.token_ids)
        and torch.equal(a.policy_mask, b.policy_mask)
        and torch.allclose(a.old_logprobs, b.old_logprobs, atol=1e-6)
        and (a.reward, a.tool_calls, a.finish_reason) == (b.reward, b.tool_calls, b.finish_reason)
    )


def test_batched_and_one_by_one_give_the_same_episodes(trained_engine):
    batched = trained_engine.rollout(TASKS, k=2, seed=5)
    assert max(e.num_turns for e in batched) >= 2, "the trained policy should call tools"
    for episode in batched:
        (alone,) = trained_engine.rollout_episodes(
            [EpisodeSpec(episode.task_id, episode.sample)], 5
        )
        assert _same(episode, alone), (episode.task_id, episode.sample)


def test_same_seed_same_episodes_other_seed_others(trained_engine):
    first = trained_engine.rollout(TASKS, k=1, seed=1)
    again = trained_engine.rollout(TASKS, k=1, seed=1)
    other = trained_engine.rollout(TASKS, k=1, seed=2)
    assert all(_same(a, b) for a, b in zip(first, again, strict=True))
    assert not all(_same(a, b) for a, b in zip(first, other, strict=True))
