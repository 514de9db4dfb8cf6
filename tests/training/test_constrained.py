"""Constrained decoding over a real tokenizer: the masks are exactly the tokens whose units the
grammar accepts, rollouts of a barely trained policy only make well-formed calls, and the update
recomputes the log-probabilities the rollouts recorded (the tiny policy after 40 SFT steps,
which unconstrained often breaks the format)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.agent_format import AgentConfig, format_tool_call
from envsched_gnn.training.constrained import ConstrainedDecoding, token_units
from envsched_gnn.training.grpo.batch import UpdateItem, collate, policy_log_probs
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.rollout import RolloutEngine
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import trained_policy_dir

POOL = handmade_pool()
TASKS = [task.task_id for task in POOL.tasks]
CONSTRAINED = AgentConfig(max_turns=3, max_new_tokens=64, constrained=True)


@pytest.fixture(scope="module")
def policy():
    return load_policy(trained_policy_dir())


@pytest.fixture(scope="module")
def decoding(policy):
    model, tokenizer = policy
    from envsched_gnn.training.agent_format import ChatFormat

    fmt = ChatFormat(tokenizer)
    width = model.get_output_embeddings().weight.shape[0]
    return ConstrainedDecoding(tokenizer, width, fmt.stop_ids), fmt


def test_units_spell_each_token(policy):
    _, tokenizer = policy
    units = token_units(tokenizer)
    special = {int(i) for i in tokenizer.added_tokens_decoder}
    for token, spelled in enumerate(units):
        if token in special:
            assert spelled == (tokenizer.decode([token]),)
        else:
            text = bytes(spelled).decode("utf-8", errors="replace")
            assert text == tokenizer.decode([token])


def test_masks_are_the_tokens_the_grammar_accepts(decoding):
    constraints, fmt = decoding
    env = next(iter(POOL.envs.values()))
    grammar = constraints.grammar(env.env_id, env.tools)
    call = format_tool_call(POOL.tasks[0].reference_solution[0])
    # states along the reference call's own tokens, and the end of the call
    states, state = [grammar.start], grammar.start
    for token in fmt.encode(call):
        state = constraints.advance(grammar, state, token)
        states.append(state)
    assert grammar.can_end(state)
    for state in states[::3] + [states[-1]]:
        mask = constraints.table.stack(torch.tensor([constraints.mask_id(grammar, state)]))[0]
        brute = torch.zeros_like(mask)
        for token, units in enumerate(constraints.units):
            if units is None or token in constraints.stop_ids:
                continue
            walked = state
            for unit in units:
                walked = grammar.advance(walked, unit)
                if walked is None:
                    break
            brute[token] = walked is not None
        brute[constraints.stop_ids] = grammar.can_end(state)
        assert torch.equal(mask, brute), state
    # cached: the same state, the same mask id
    assert constraints.mask_id(grammar, states[1]) == constraints.mask_id(grammar, states[1])


@pytest.fixture(scope="module")
def episodes(policy):
    model, tokenizer = policy
    with EnvRuntime(POOL, RuntimeConfig(workers=2)) as runtime:
        free = RolloutEngine(
            model, tokenizer, runtime, dataclasses.replace(CONSTRAINED, constrained=False)
        )
        engine = RolloutEngine(model, tokenizer, runtime, CONSTRAINED)
        return free.rollout(TASKS, k=8, seed=0), engine.rollout(TASKS, k=8, seed=0)


def test_a_barely_trained_policy_makes_only_well_formed_calls_when_constrained(episodes):
    free, constrained = episodes
    tools = {
        env_id: {t["function"]["name"]: t for t in env.tools} for env_id, env in POOL.envs.items()
    }
    assert sum(e.malformed_calls for e in free) > 0  # unconstrained, it babbles
    assert sum(e.malformed_calls for e in constrained) == 0
    assert any(e.tool_calls for e in constrained)
    for episode in constrained:
        env_tools = tools[POOL.task(episode.task_id).env_id]
        for call in episode.tool_calls:
            schema = env_tools[call.name]["function"]["parameters"]
            assert set(call.arguments) <= set(schema["properties"])
            assert set(schema.get("required", [])) <= set(call.arguments)
        assert episode.allowed_ids is not None
        assert torch.all((episode.allowed_ids >= 0) == episode.policy_mask)


def test_the_update_recomputes_the_constrained_log_probabilities(policy, episodes):
    model, _ = policy
    _, constrained = episodes
    for task_id in TASKS:
        items = [UpdateItem(1.0, e) for e in constrained if e.task_id == task_id]
        batch = collate(items)
        assert batch.allowed is not None and batch.allowed.shape[0] == batch.policy_tokens
        # every sampled token lies in its allowed set
        targets = batch.ids[batch.policy]
        assert torch.all(batch.allowed[torch.arange(len(targets)), targets])
        with torch.no_grad():
            logp, entropy = policy_log_probs(model, batch, CONSTRAINED.temperature)
            unconstrained, _ = policy_log_probs(
                model, dataclasses.replace(batch, allowed=None), CONSTRAINED.temperature
            )
        torch.testing.assert_close(logp, batch.old_logp, rtol=0, atol=2e-4)
        assert torch.all(torch.isfinite(entropy))
        # the constrained distribution puts more mass on the sampled tokens
        assert torch.all(logp >= unconstrained - 1e-6) and torch.any(logp > unconstrained + 0.1)
