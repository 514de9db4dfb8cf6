"""The default policy: a small Qwen3-architecture causal LM (0.82 M parameters, what learned to
call tools within minutes of SFT on 2 CPU cores) and a BPE tokenizer for a pool, written as
an ordinary Hugging Face folder that :func:`load_policy` loads like a downloaded one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from envsched_gnn.envs.pool import Pool
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.training.agent_format import (
    FORMAT_TOKENS,
    AgentConfig,
    format_tool_call,
    system_message,
    user_message,
)
from envsched_gnn.validation import PathError, check_bounds, check_paths, config_error

AGENT_CONFIG_FILE = "agent_config.json"
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, *FORMAT_TOKENS)
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass
class PolicyConfig:
    """Architecture and tokenizer of the built-in policy."""

    hidden_size: int = 128
    """Width of the residual stream (probe: 128 learns in minutes; 256 stays untrained)."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads (head_dim = hidden_size / num_heads)."""
    num_kv_heads: int = 4
    """Key/value heads (grouped-query attention when fewer than num_heads)."""
    intermediate_size: int = 384
    """Width of the SwiGLU MLP."""
    max_positions: int = 4096
    """Longest sequence (rotary positions) the model is configured for."""
    vocab_size: int = 3072
    """Target BPE vocabulary, special tokens included (3072: most 3-digit numbers one token)."""
    space_tokens: bool = False
    """Whitespace runs are tokens of their own, so a word is one token everywhere."""
    min_frequency: int = 2
    """A BPE merge needs a pair seen at least this often."""
    rope_theta: float = 10000.0
    """Rotary embedding base."""
    seed: int = 0
    """Seed of the weight initialisation."""

    def __post_init__(self) -> None:
        sizes = (
            "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
            "max_positions", "vocab_size", "min_frequency",
        )  # fmt: skip
        check_bounds(
            self,
            integers=(*sizes, "seed"),
            at_least=dict.fromkeys(sizes, 1),
            positive=("rope_theta",),
            non_negative=("seed",),
        )
        if self.hidden_size % self.num_heads:
            raise config_error(
                self,
                "hidden_size",
                self.hidden_size,
                f"a multiple of num_heads (= {self.num_heads})",
            )
        if self.num_heads % self.num_kv_heads:
            raise config_error(
                self,
                "num_heads",
                self.num_heads,
                f"a multiple of num_kv_heads (= {self.num_kv_heads})",
            )


def pool_corpus(pool: Pool, agent: AgentConfig | None = None) -> Iterator[str]:
    """The pool's text as the agent sees and writes it: system prompts, instructions,
    reference tool calls, initial states (what tool responses echo) and the final message."""
    agent = agent or AgentConfig()
    for env in pool.envs.values():
        yield system_message(env, agent.tool_format)
    for task in pool.tasks:
        yield user_message(task)
        yield json.dumps(task.init_config, ensure_ascii=False)
        for call in task.reference_solution or ():
            yield format_tool_call(call)
    yield agent.final_message


def train_tokenizer(corpus: Iterator[str], config: PolicyConfig) -> Any:
    """A byte-level BPE tokenizer with a ChatML template; numbers are cut into chunks of at most 3
    digits (``33000`` -> ``330 00``) and, with ``config.space_tokens``, whitespace runs too, so
    ids and words are copied as single tokens.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    splits = [pre_tokenizers.Split(Regex(r"\d{1,3}"), behavior="isolated")]
    if config.space_tokens:
        splits.append(pre_tokenizers.Split(Regex(r"\s+"), behavior="isolated"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=ENDOFTEXT,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def build_model(config: PolicyConfig, tokenizer: Any) -> torch.nn.Module:
    """A randomly initialised ``Qwen3ForCausalLM`` sized by ``config`` for ``tokenizer``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        head_dim=config.hidden_size // config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        rope_parameters={"rope_theta": config.rope_theta, "rope_type": "default"},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return Qwen3ForCausalLM(model_config)


def build_default_policy(
    pool: Pool, config: PolicyConfig, out_dir: str | Path, agent: AgentConfig | None = None
) -> Path:
    """Train the tokenizer on ``pool``'s text as ``agent``'s format shows it, build the model,
    save both to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(pool_corpus(pool, agent), config)
    model = build_model(config, tokenizer)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json_atomically(out / "policy_config.json", asdict(config), indent=2)
    return out


def check_policy_folder(path: str | Path, name: str = "policy") -> None:
    """:class:`PathError` unless ``path`` is a local Hugging Face model folder (it holds
    ``config.json``); ``name`` is what the user knows the path by (``--model``)."""
    check_paths(folders={name: path})
    if not (Path(path) / "config.json").is_file():
        raise PathError(
            f"{name} {str(path)!r}: expected a Hugging Face model folder (no config.json)"
        )


def load_policy(
    path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> tuple[torch.nn.Module, Any]:
    """Load any local HF causal LM folder with a chat template: ``(model, tokenizer)``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(path)
    check_policy_folder(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{folder}: the tokenizer has no chat template")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=True, dtype=dtype or torch.float32
    )
    model.to(device)
    model.eval()
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def save_agent_config(folder: str | Path, agent: AgentConfig) -> Path:
    """Write the agent format a policy was trained with next to its weights."""
    path = Path(folder) / AGENT_CONFIG_FILE
    return write_json_atomically(path, asdict(agent), indent=2)


def load_agent_config(folder: str | Path, **overrides: Any) -> AgentConfig:
    """The agent format saved with a policy (:func:`save_agent_config`), else the defaults;
    ``overrides`` that are not None replace fields (e.g. the sampling temperature)."""
    path = Path(folder) / AGENT_CONFIG_FILE
    fields = json.loads(path.read_text()) if path.is_file() else {}
    if not isinstance(fields, dict):
        raise ValueError(f"{path}: expected a JSON object of AgentConfig fields")
    known = set(AgentConfig.__dataclass_fields__)
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"{path}: unknown AgentConfig fields {unknown}")
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return AgentConfig(**fields)
