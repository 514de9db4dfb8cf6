"""The built-in policy: an ordinary HF model folder with a trained BPE tokenizer."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from envsched_gnn.training.agent_format import FORMAT_TOKENS, AgentConfig
from envsched_gnn.training.policy import (
    PolicyConfig,
    build_default_policy,
    count_parameters,
    load_agent_config,
    load_policy,
    save_agent_config,
)
from envsched_gnn.validation import PathError
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import TINY, untrained_policy_dir


def test_folder_loads_with_the_auto_classes_offline():
    folder = untrained_policy_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert model.config.model_type == "qwen3"
    assert model.config.hidden_size == TINY.hidden_size
    assert model.config.num_hidden_layers == TINY.num_layers
    assert model.config.num_key_value_heads == TINY.num_kv_heads
    assert model.config.vocab_size == len(tokenizer) <= TINY.vocab_size
    assert tokenizer.chat_template
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id is not None


def test_digits_are_single_tokens_and_format_tags_are_whole():
    _, tokenizer = load_policy(untrained_policy_dir())
    assert [tokenizer.decode([t]) for t in tokenizer.encode("M1203")][-4:] == ["1", "2", "0", "3"]
    for tag in FORMAT_TOKENS:
        assert len(tokenizer.encode(tag, add_special_tokens=False)) == 1


def test_tokenizer_round_trips_unseen_text():
    _, tokenizer = load_policy(untrained_policy_dir())
    text = 'Zoë paid 1,234.50 € — {"id": "Q-77"}'
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_default_size_is_about_half_a_million_parameters(tmp_path):
    folder = build_default_policy(handmade_pool(), PolicyConfig(), tmp_path / "p")
    model, tokenizer = load_policy(folder)
    # embeddings tied: vocab x 128 + 2 blocks of (4 x 128 x 128 + 3 x 128 x 384) + norms
    blocks = 2 * (4 * 128 * 128 + 3 * 128 * 384)
    assert count_parameters(model) == pytest.approx(len(tokenizer) * 128 + blocks, rel=0.01)


def test_same_seed_same_weights(tmp_path):
    pool = handmade_pool()
    a, _ = load_policy(build_default_policy(pool, TINY, tmp_path / "a"))
    b, _ = load_policy(build_default_policy(pool, TINY, tmp_path / "b"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name


def test_load_policy_dtype_and_device():
    model, _ = load_policy(untrained_policy_dir(), device="cpu", dtype=torch.float64)
    assert next(model.parameters()).dtype == torch.float64
    assert not model.training


def test_load_policy_names_a_missing_folder(tmp_path):
    with pytest.raises(PathError, match="no config.json"):
        load_policy(tmp_path)
    with pytest.raises(PathError, match="expected an existing folder"):
        load_policy(tmp_path / "nope")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"hidden_size": 100, "num_heads": 3}, "num_heads"), ({"num_kv_heads": 3}, "num_kv_heads")],
)
def test_policy_config_rejects_inconsistent_heads(kwargs, field):
    with pytest.raises(ValueError, match=field):
        PolicyConfig(**kwargs)


def test_agent_config_round_trips_with_the_policy_folder(tmp_path):
    assert load_agent_config(tmp_path) == AgentConfig()
    save_agent_config(tmp_path, AgentConfig(tool_format="json", temperature=1.1))
    assert load_agent_config(tmp_path) == AgentConfig(tool_format="json", temperature=1.1)
    loaded = load_agent_config(tmp_path, temperature=1.6, tool_format=None)
    assert loaded == AgentConfig(tool_format="json", temperature=1.6)
    (tmp_path / "agent_config.json").write_text('{"tool_format": "json", "colour": 1}')
    with pytest.raises(ValueError, match="unknown AgentConfig fields"):
        load_agent_config(tmp_path)
