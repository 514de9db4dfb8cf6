"""The TRL callback that closes the loop: rewards to ``scheduler.observe``, state to checkpoints.

After every optimiser step it takes the round's rewards from :class:`RoundRewards`, gathered
over ranks, and hands them to ``scheduler.observe`` on every rank (each holds an identical
scheduler) and, on the main process, to the store through an :class:`ObservationSink`.
``on_save`` writes ``envsched_state.json`` into TRL's ``checkpoint-N``; :meth:`load` reads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from envsched_gnn.integrations.rewards import Round, RoundRewards
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import Observation, observations_from_rewards
from envsched_gnn.training.observation_sink import ObservationSink

STATE_FILE = "envsched_state.json"


class EnvSchedCallback(TrainerCallback):
    """Observes each round's rewards and checkpoints the scheduler (see the module docstring).

    Args:
        scheduler: the scheduler choosing every batch (``envsched_gnn.scheduler``).
        rewards: the rounds the trainer opens and the reward code fills.
        write_observations: e.g. ``GraphStore.write_observations`` or a ``StoreWriter``;
            called from a background thread on the main process (default: no store).
        print_steps: print one line of scheduler metrics per step (default False).
        flush_timeout_s: at the end of training, how long to wait for the store (default 60).
    """

    def __init__(
        self,
        scheduler: Any,
        rewards: RoundRewards,
        write_observations: Callable[[Sequence[Observation]], object] | None = None,
        print_steps: bool = False,
        flush_timeout_s: float = 60.0,
    ) -> None:
        self.scheduler = scheduler
        self.rewards = rewards
        self.write_observations = write_observations
        self.print_steps = print_steps
        self.flush_timeout_s = flush_timeout_s
        self.next_step = 0
        self.batches: list[list[str]] = []
        self.observed: list[dict[str, list[float]]] = []
        self.step_metrics: list[dict[str, float]] = []
        self.sink: ObservationSink | None = None
        self.unwritten: list[Observation] = []
        self._pending_rows: list[dict] = []
        self._step_started = 0.0

    # -- the trainer's side ----------------------------------------------------------------
    def choose(self, group_size: int) -> list[str]:
        """The batch of the next step, chosen now (after every earlier step was observed)."""
        step = self.next_step
        batch = list(self.scheduler.next_batch(step))
        self.rewards.open(step, batch, group_size)
        self.batches.append(batch)
        return batch

    # -- TrainerCallback ---------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if self.write_observations is not None and state.is_world_process_zero:
            self.sink = ObservationSink(self.write_observations)
            if self._pending_rows:
                self.sink.load_state_dict({"pending": self._pending_rows})
        self._pending_rows = []

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        current = self.rewards.take()
        if current is None:
            return
        if args.world_size > 1:
            from accelerate.utils import gather_object

            current.rewards = list(gather_object(current.rewards))
        self._observe(current, state.global_step, time.perf_counter() - self._step_started)

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            write_json_atomically(folder / STATE_FILE, self.state_dict(), indent=None)

    def on_train_end(self, args, state, control, **kwargs):
        if self.sink is not None:
            self.unwritten = self.sink.close(timeout=self.flush_timeout_s)
            self.sink = None

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        pending = self.sink.state_dict()["pending"] if self.sink is not None else []
        return {
            "next_step": self.next_step,
            "scheduler": self.scheduler.state_dict(),
            "batches": self.batches,
            "unwritten_observations": pending,
        }

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.next_step = int(state["next_step"])
        self.batches = [list(batch) for batch in state["batches"]]
        self._pending_rows = list(state["unwritten_observations"])

    def load(self, checkpoint: str | Path) -> None:
        """Restore from a TRL checkpoint folder written by :meth:`on_save`."""
        path = Path(checkpoint) / STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: no EnvSched state in this checkpoint (was it written by "
                "EnvSchedGRPOTrainer?); cannot resume the scheduler"
            )
        self.load_state_dict(json.loads(path.read_text()))

    # -- helpers -------------------------------------------------------------------------------
    def _observe(self, current: Round, global_step: int, step_s: float) -> None:
        groups = current.groups()
        self.scheduler.observe(current.step, groups)
        self.observed.append(groups)
        if self.sink is not None:
            self.sink.put(observations_from_rewards(current.step, groups))
        self.next_step = current.step + 1
        metrics = {"step": float(current.step), "time/step_s": step_s, **self.scheduler.metrics()}
        self.step_metrics.append(metrics)
        if self.print_steps:
            shown = ", ".join(
                f"{name} {value:.4g}" for name, value in metrics.items() if name != "step"
            )
            print(f"step {current.step} (optimiser step {global_step}): {shown}", flush=True)
