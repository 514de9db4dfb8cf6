"""A GRPO run's checkpoints every N steps: ``checkpoints/step{S}.ckpt`` and ``last.ckpt`` (what a
killed run resumes from), ``S`` the optimiser steps so far, each holding the state after the
step's update.

Lightning's ``ModelCheckpoint`` saves the same files, but under manual optimisation it warns at
every save that the checkpoint holds the state after the optimiser step. For GRPO that is the
state a resumed run must continue from, so the warning could only read as a fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L


class StepCheckpoints(L.pytorch.callbacks.Callback):
    """Saves ``step{S}.ckpt`` and ``last.ckpt`` into ``folder`` whenever the optimiser steps ``S``
    reach a multiple of ``every`` (every rank calls the save; rank 0 writes)."""

    def __init__(self, folder: str | Path, every: int) -> None:
        self.folder, self.every = Path(folder), every
        self.saved_at = -1

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        step = trainer.global_step
        if step == 0 or step % self.every or step == self.saved_at:
            return
        self.saved_at = step
        # the whole state (optimiser, schedulers, loops): a resumed run continues exactly
        trainer.save_checkpoint(self.folder / f"step{step}.ckpt", weights_only=False)
        trainer.save_checkpoint(self.folder / "last.ckpt", weights_only=False)
