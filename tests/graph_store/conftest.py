"""Fixtures of the graph tests: one offline MiniLM encoder per session, quiet configs."""

from __future__ import annotations

import numpy as np
import pytest

from envsched_gnn.graph_build.builder import GraphConfig
from envsched_gnn.graph_build.embeddings import Embedder, EmbeddingConfig


class MemoEmbedder(Embedder):
    """The real encoder, remembering each text's vector across tests and counting requests.

    Memoising is exact because an embedding is a pure function of its text (tested in
    ``test_embedding_of_a_text_does_not_depend_on_its_batch``, which bypasses the memo).
    """

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        self.encoded = 0
        self.memo: dict[str, np.ndarray] = {}

    def encode(self, texts):
        self.encoded += len(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if new:
            self.memo.update(zip(new, super().encode(new), strict=True))
        return np.stack([self.memo[t] for t in texts]) if texts else super().encode(texts)


@pytest.fixture(scope="session")
def embedder() -> MemoEmbedder:
    return MemoEmbedder(EmbeddingConfig(show_progress=False))


@pytest.fixture
def config() -> GraphConfig:
    return GraphConfig(show_progress=False)
