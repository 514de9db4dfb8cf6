"""The Lightning trainer that SFT and GRPO share: seeded, bf16 on a GPU, logging in the run
folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import Logger

from envsched_gnn.training.policy_engine import on_gpu


def lightning_trainer(
    out: Path, seed: int, accelerator: str, logger: Logger | list[Logger], **settings: Any
) -> L.Trainer:
    """Seeds everything with ``seed``, then a ``Trainer`` (``bf16-mixed`` on GPU, else ``32-true``)
    on ``accelerator`` writing under ``out`` to ``logger``; ``settings`` are extra arguments.
    """
    L.seed_everything(seed, workers=True, verbose=False)
    return L.Trainer(
        accelerator=accelerator,
        precision="bf16-mixed" if on_gpu(accelerator) else "32-true",
        max_epochs=-1,
        logger=logger,
        enable_model_summary=False,
        default_root_dir=out,
        **settings,
    )
