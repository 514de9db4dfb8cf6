"""The Lightning trainer that SFT and GRPO share: seeded, bf16 on a GPU, logging in the run
folder; and the Lightning messages no user of this project can act on, kept off their screen
(each with its reason: a warning a user can act on still shows)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import Logger

from envsched_gnn.training.policy_engine import on_gpu

NOT_ACTIONABLE = (
    # the data are made in the training process (rollouts; SFT examples in memory): loader
    # workers would only copy them
    ".*does not have many workers.*",
    # the GRPO stream is an IterableDataset whose length is its steps, in the main process
    ".*IterableDataset.*has `__len__`.*",
    # GRPOModule.training_step takes the dataloader_iter by design: the scheduler chooses each
    # batch inside the step, after the previous step's observations (scheduled_batches.py)
    ".*`dataloader_iter`.*",
    # Lightning 2.6 calls a torch.utils._pytree API that torch 2.13 deprecates
    ".*isinstance\\(treespec, LeafSpec\\)` is deprecated.*",
)
"""Warnings of ``Trainer.fit`` that say nothing a user can change (regular expressions)."""
RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"
"""The logger of Lightning's ``rank_zero_info`` lines."""


class _NoAdvertisement(logging.Filter):
    """Drops the Trainer's "Tip" for a cloud logging service: runs here make no network calls."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip: For seamless cloud logging" not in record.getMessage()


def lightning_trainer(
    out: Path, seed: int, accelerator: str, logger: Logger | list[Logger], **settings: Any
) -> L.Trainer:
    """Seeds everything with ``seed``, then a ``Trainer`` (``bf16-mixed`` on GPU, else ``32-true``)
    on ``accelerator`` writing under ``out`` to ``logger``; ``settings`` are extra arguments.
    """
    L.seed_everything(seed, workers=True, verbose=False)
    advertisement = _NoAdvertisement()
    logging.getLogger(RANK_ZERO_LOGGER).addFilter(advertisement)
    try:
        return L.Trainer(
            accelerator=accelerator,
            precision="bf16-mixed" if on_gpu(accelerator) else "32-true",
            max_epochs=-1,
            logger=logger,
            enable_model_summary=False,
            default_root_dir=out,
            **settings,
        )
    finally:
        logging.getLogger(RANK_ZERO_LOGGER).removeFilter(advertisement)


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """The block (a ``Trainer.fit``) without the warnings of :data:`NOT_ACTIONABLE`."""
    with warnings.catch_warnings():
        for message in NOT_ACTIONABLE:
            warnings.filterwarnings("ignore", message=message)
        yield
