"""Batched multi-turn rollouts of a causal-LM policy in the environment runtime.

Live episodes share one KV cache (:mod:`kv_cache`) and advance turn by turn: *feed* (left
padded, positions over real tokens), *decode* to end-of-turn or ``max_new_tokens``, *act*
(tool calls in one ``runtime.call``). Sampling is per episode (:mod:`.sampling`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.training.agent_format import (
    AgentConfig,
    ChatFormat,
    error_result,
    format_tool_responses,
    parse_assistant,
    system_message,
    user_message,
)
from envsched_gnn.training.call_grammar import CallGrammar, State
from envsched_gnn.training.constrained import ConstrainedDecoding, MaskTable
from envsched_gnn.training.kv_cache import growing_cache
from envsched_gnn.training.sampling import episode_seed, sample_tokens

FINISH_REASONS = ("answer", "max_turns", "turn_length", "context_limit", "reset_error")


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to run: the task and the sample index within its group."""

    task_id: str
    sample: int = 0


@dataclass
class Episode:
    """One finished episode; ``token_ids``, ``policy_mask`` and ``old_logprobs`` have length L,
    ``old_logprobs[t] = log softmax(z_t / T)[token_ids[t]]`` at policy tokens (else 0).
    """

    task_id: str
    sample: int
    token_ids: torch.Tensor
    """(L,) int64: prompt, assistant turns, tool responses."""
    policy_mask: torch.Tensor
    """(L,) bool: True exactly at tokens the policy sampled (assistant text and end-of-turn)."""
    old_logprobs: torch.Tensor
    """(L,) float32: log-probability of each sampled token at sampling time; 0 elsewhere."""
    prompt_length: int
    reward: float
    checks: tuple[bool, ...]
    tool_calls: list[ToolCall]
    malformed_calls: int
    num_turns: int
    finish_reason: str
    """One of ``FINISH_REASONS``."""
    texts: list[str] = field(default_factory=list)
    """The assistant turns as text."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds of the rollout batch this episode ran in (shared by its batch)."""
    allowed_ids: torch.Tensor | None = None
    """(L,) int64: each policy token's :attr:`allowed_table` mask id (-1 elsewhere), or None."""
    allowed_table: MaskTable | None = None
    """The masks ``allowed_ids`` refer to (shared by the engine's episodes)."""

    def allowed_masks(self) -> torch.Tensor | None:
        """``(n, V)`` bool: the allowed set of each of the n policy tokens, in order (None when
        unconstrained)."""
        if self.allowed_ids is None or self.allowed_table is None:
            return None
        return self.allowed_table.stack(self.allowed_ids[self.policy_mask])


@dataclass
class _Live:
    """Book-keeping of one running episode."""

    spec: EpisodeSpec
    runtime_id: str
    uniforms: list[float]
    ids: list[int]
    mask: list[int]
    logps: list[float]
    prompt_length: int
    drawn: int = 0
    turns: int = 0
    pending: list[int] = field(default_factory=list)
    generated: list[int] = field(default_factory=list)
    allowed: list[int] = field(default_factory=list)
    grammar: CallGrammar | None = None
    state: State = ()
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    malformed: int = 0
    finish: str | None = None


class RolloutEngine:
    """Runs a policy in the environments (module docstring).

    Args:
        policy: a causal LM (``forward(input_ids, attention_mask, position_ids, cache,
            use_cache, logits_to_keep)`` -> ``.logits``, ``.cache``), e.g. any transformers 5 one.
        tokenizer: its tokenizer, with a chat template.
        runtime: an entered ``EnvRuntime`` (``reset`` / ``call`` / ``score`` / ``release``).
        agent_config: turn and token limits, temperature, top_p.
        device: where the policy runs; on CUDA forward passes use bf16 autocast.
        pool: the pool the runtime serves (default: ``runtime.pool``).
    """

    def __init__(
        self,
        policy: Any,
        tokenizer: Any,
        runtime: Any,
        agent_config: AgentConfig | None = None,
        device: str | torch.device = "cpu",
        pool: Pool | None = None,
    ) -> None:
        self.policy = policy
        self.tokenizer = tokenizer
        self.runtime = runtime
        self.config = agent_config or AgentConfig()
        self.device = torch.device(device)
        self.pool = pool if pool is not None else runtime.pool
        self.format = ChatFormat(tokenizer)
        self.pad_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.format.eot_id
        )
        self._episode_counter = itertools.count()
        self._constraints: ConstrainedDecoding | None = None

    def with_agent(self, agent_config: AgentConfig) -> RolloutEngine:
        """An engine of the same policy, runtime and device with another agent format."""
        return RolloutEngine(
            self.policy, self.tokenizer, self.runtime, agent_config, self.device, self.pool
        )

    def rollout(self, task_ids: Sequence[str], k: int = 1, seed: int = 0) -> list[Episode]:
        """``k`` samples of every entry of ``task_ids``; a repeated task id continues its
        sample numbering. Episodes come back in order: entry by entry, sample by sample."""
        counts: dict[str, int] = {}
        specs = []
        for task_id in task_ids:
            for _ in range(k):
                specs.append(EpisodeSpec(task_id, counts.get(task_id, 0)))
                counts[task_id] = counts.get(task_id, 0) + 1
        return self.rollout_episodes(specs, seed)

    def rollout_episodes(self, specs: Sequence[EpisodeSpec], seed: int = 0) -> list[Episode]:
        """Run the given episodes as one batch (see the module docstring)."""
        if not specs:
            return []
        timings = dict.fromkeys(("feed_s", "decode_s", "tools_s", "score_s"), 0.0)
        start = time.perf_counter()
        episodes = self._start(specs, seed)
        with torch.inference_mode(), self._autocast():
            self._run(episodes, timings)
        finished = self._finish(episodes, timings)
        timings["total_s"] = time.perf_counter() - start
        timings["episodes"] = float(len(specs))
        timings["policy_tokens"] = float(sum(int(e.policy_mask.sum()) for e in finished))
        for episode in finished:
            episode.timings = dict(timings)
        return finished

    def _grammar(self, env_id: str) -> CallGrammar | None:
        """The environment's call grammar when decoding is constrained."""
        if not self.config.constrained:
            return None
        if self._constraints is None:
            self._constraints = ConstrainedDecoding(
                self.tokenizer, _logits_width(self.policy, self.tokenizer), self.format.stop_ids
            )
        return self._constraints.grammar(env_id, self.pool.envs[env_id].tools)

    def _constrain(self, rows: list[_Live], active: torch.Tensor, logits: torch.Tensor):
        """``logits`` with ``-inf`` outside each active row's allowed set, and the mask ids."""
        constraints = self._constraints
        if constraints is None:
            return logits, None
        ids = [
            constraints.mask_id(e.grammar, e.state) if live else -1
            for e, live in zip(rows, active.tolist(), strict=True)
        ]
        masks = torch.ones((len(rows), logits.shape[-1]), dtype=torch.bool)
        live_rows = [i for i, mask_id in enumerate(ids) if mask_id >= 0]
        if live_rows:
            masks[live_rows] = constraints.table.stack(torch.tensor([ids[i] for i in live_rows]))
        return logits.masked_fill(~masks.to(logits.device), float("-inf")), ids

    def _autocast(self) -> AbstractContextManager:
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _start(self, specs: Sequence[EpisodeSpec], seed: int) -> list[_Live]:
        draws = self.config.max_turns * self.config.max_new_tokens
        prompts: dict[str, list[int]] = {}
        episodes = []
        for spec in specs:
            task = self.pool.task(spec.task_id)
            if spec.task_id not in prompts:
                env = self.pool.envs[task.env_id]
                prompts[spec.task_id] = self.format.prompt_ids(
                    system_message(env, self.config.tool_format), user_message(task)
                )
            generator = torch.Generator().manual_seed(episode_seed(seed, spec.task_id, spec.sample))
            prompt = prompts[spec.task_id]
            episodes.append(
                _Live(
                    grammar=self._grammar(task.env_id),
                    spec=spec,
                    runtime_id=f"rollout-{next(self._episode_counter)}",
                    uniforms=torch.rand(draws, generator=generator, dtype=torch.float64).tolist(),
                    ids=list(prompt),
                    mask=[0] * len(prompt),
                    logps=[0.0] * len(prompt),
                    allowed=[-1] * len(prompt),
                    prompt_length=len(prompt),
                    pending=list(prompt),
                )
            )
        resets = self.runtime.reset([(e.runtime_id, e.spec.task_id) for e in episodes])
        for episode, result in zip(episodes, resets, strict=True):
            if not result.get("success", False):
                episode.finish = "reset_error"
        return episodes

    def _run(self, episodes: list[_Live], timings: dict[str, float]) -> None:
        rows = [e for e in episodes if e.finish is None and self._fits(e)]
        cache: Any = None
        attention = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        positions = torch.zeros(0, dtype=torch.long, device=self.device)
        while rows:
            tick = time.perf_counter()
            logits, cache, attention, positions = self._feed(rows, cache, attention, positions)
            timings["feed_s"] += time.perf_counter() - tick
            tick = time.perf_counter()
            cache, attention, positions = self._decode(rows, logits, cache, attention, positions)
            timings["decode_s"] += time.perf_counter() - tick
            tick = time.perf_counter()
            self._act(rows)
            timings["tools_s"] += time.perf_counter() - tick
            keep = [i for i, e in enumerate(rows) if e.finish is None and self._fits(e)]
            if len(keep) < len(rows) and keep:
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                attention, positions = attention[index], positions[index]
            rows = [rows[i] for i in keep]

    def _fits(self, episode: _Live) -> bool:
        if len(episode.ids) > self.config.max_prompt_tokens:
            episode.finish = "context_limit"
            return False
        return True

    def _forward(self, input_ids, attention, positions, cache) -> tuple[torch.Tensor, Any]:
        out = self.policy(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float(), out.cache

    def _feed(self, rows, cache, attention, positions):
        """Append every row's pending segment, left-padded to the longest."""
        first = cache is None
        segments = [e.pending for e in rows]
        if first:
            # the K samples of a task share their prompt: compute it once per task
            unique: dict[tuple[int, ...], int] = {}
            owner = [unique.setdefault(tuple(s), len(unique)) for s in segments]
            segments = [list(s) for s in unique]
            positions = torch.zeros(len(segments), dtype=torch.long, device=self.device)
            attention = torch.zeros((len(segments), 0), dtype=torch.long, device=self.device)
        width = max(len(s) for s in segments)
        block = torch.full((len(segments), width), self.pad_id, dtype=torch.long)
        block_mask = torch.zeros((len(segments), width), dtype=torch.long)
        for i, segment in enumerate(segments):
            block[i, width - len(segment) :] = torch.tensor(segment, dtype=torch.long)
            block_mask[i, width - len(segment) :] = 1
        block, block_mask = block.to(self.device), block_mask.to(self.device)
        block_positions = positions.unsqueeze(1) + torch.cumsum(block_mask, dim=1) - 1
        block_positions = block_positions.clamp_(min=0)
        attention = torch.cat([attention, block_mask], dim=1)
        if first:
            cache = growing_cache()
        logits, cache = self._forward(block, attention, block_positions, cache)
        positions = positions + block_mask.sum(dim=1)
        if first:
            index = torch.tensor(owner, device=self.device)
            if owner != list(range(len(rows))):
                cache.batch_select_indices(index)
            logits, attention, positions = logits[index], attention[index], positions[index]
        for episode in rows:
            episode.pending = []
        return logits, cache, attention, positions

    def _decode(self, rows, logits, cache, attention, positions):
        """Sample until every row has ended its turn (or ``max_new_tokens``)."""
        config = self.config
        active = torch.ones(len(rows), dtype=torch.bool)
        stops = torch.tensor(sorted(self.format.stop_ids), dtype=torch.long)
        for episode in rows:
            if episode.grammar is not None:
                episode.state = episode.grammar.start
        for step in range(config.max_new_tokens):
            uniforms = torch.tensor(
                [e.uniforms[e.drawn] for e in rows], dtype=torch.float64, device=logits.device
            )
            logits, mask_ids = self._constrain(rows, active, logits)
            tokens, logps = sample_tokens(logits, uniforms, config.temperature, config.top_p)
            tokens, logps = tokens.cpu(), logps.cpu()
            for row, (episode, live, token, logp) in enumerate(
                zip(rows, active.tolist(), tokens.tolist(), logps.tolist(), strict=True)
            ):
                if live:
                    episode.drawn += 1
                    episode.generated.append(token)
                    episode.ids.append(token)
                    episode.mask.append(1)
                    episode.logps.append(logp)
                    episode.allowed.append(-1 if mask_ids is None else mask_ids[row])
                    if mask_ids is not None and token not in self.format.stop_ids:
                        episode.state = self._constraints.advance(
                            episode.grammar, episode.state, token
                        )
            active &= ~torch.isin(tokens, stops)
            if not active.any() or step == config.max_new_tokens - 1:
                break
            fed = torch.where(active, tokens, self.pad_id).unsqueeze(1).to(self.device)
            fed_mask = active.long().unsqueeze(1).to(self.device)
            attention = torch.cat([attention, fed_mask], dim=1)
            logits, cache = self._forward(fed, attention, positions.unsqueeze(1), cache)
            positions = positions + fed_mask.squeeze(1)
        for i, episode in enumerate(rows):
            if active[i]:
                episode.finish = "turn_length"
            # the last sampled token (end-of-turn) is not in the cache yet: it goes first
            # into the next feed, so the cache holds exactly episode.ids
            elif episode.generated:
                episode.pending = [episode.generated[-1]]
        return cache, attention, positions

    def _act(self, rows: list[_Live]) -> None:
        """Parse each finished turn, run the tool calls (one batched call), queue responses."""
        config = self.config
        requests: list[tuple[str, ToolCall]] = []
        plans: list[tuple[_Live, list[dict | int]]] = []
        for episode in rows:
            eot = episode.generated[-1] if episode.generated else None
            text_ids = episode.generated[:-1] if eot in self.format.stop_ids else episode.generated
            text = self.format.decode(text_ids)
            episode.texts.append(text)
            episode.turns += 1
            episode.generated = []
            if episode.finish is not None:
                continue
            parsed = parse_assistant(text)
            if parsed.is_final:
                episode.finish = "answer"
                continue
            plan: list[dict | int] = []
            for number, item in enumerate(parsed.calls):
                if item.call is None:
                    episode.malformed += 1
                    plan.append(error_result(item.error or "malformed tool call"))
                elif number >= config.max_calls_per_turn:
                    plan.append(
                        error_result(f"refused: at most {config.max_calls_per_turn} calls a turn")
                    )
                else:
                    episode.calls.append(item.call)
                    plan.append(len(requests))
                    requests.append((episode.runtime_id, item.call))
            plans.append((episode, plan))
        results = self.runtime.call(requests) if requests else []
        for episode, plan in plans:
            responses = [results[p] if isinstance(p, int) else p for p in plan]
            if episode.turns >= config.max_turns:
                episode.finish = "max_turns"
                continue
            text = format_tool_responses(responses, config.tool_response_max_chars)
            more = self.format.continuation_ids(text)
            episode.pending += more
            episode.ids += more
            episode.mask += [0] * len(more)
            episode.logps += [0.0] * len(more)
            episode.allowed += [-1] * len(more)

    def _finish(self, episodes: list[_Live], timings: dict[str, float]) -> list[Episode]:
        tick = time.perf_counter()
        scored = [e for e in episodes if e.finish != "reset_error"]
        scores = self.runtime.score([e.runtime_id for e in scored]) if scored else []
        by_id = {e.runtime_id: s for e, s in zip(scored, scores, strict=True)}
        self.runtime.release([e.runtime_id for e in episodes])
        timings["score_s"] += time.perf_counter() - tick
        finished = []
        for e in episodes:
            score = by_id.get(e.runtime_id)
            finished.append(
                Episode(
                    task_id=e.spec.task_id,
                    sample=e.spec.sample,
                    token_ids=torch.tensor(e.ids, dtype=torch.long),
                    policy_mask=torch.tensor(e.mask, dtype=torch.bool),
                    old_logprobs=torch.tensor(e.logps, dtype=torch.float32),
                    prompt_length=e.prompt_length,
                    reward=float(score.reward) if score is not None else 0.0,
                    checks=tuple(score.checks) if score is not None else (),
                    tool_calls=list(e.calls),
                    malformed_calls=e.malformed,
                    num_turns=e.turns,
                    finish_reason=e.finish or "answer",
                    texts=list(e.texts),
                    allowed_ids=None
                    if self._constraints is None
                    else torch.tensor(e.allowed, dtype=torch.long),
                    allowed_table=None if self._constraints is None else self._constraints.table,
                )
            )
        return finished


def _logits_width(policy: Any, tokenizer: Any) -> int:
    """Width of the policy's logits: its output embedding's rows, else the vocabulary size."""
    head = getattr(policy, "get_output_embeddings", lambda: None)()
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None else len(tokenizer)
