"""Fixtures of the graph tests: one offline MiniLM encoder per session, quiet configs."""

from __future__ import annotations

import pytest

from envsched_gnn.graph_store.builder import GraphConfig
from envsched_gnn.graph_store.embeddings import Embedder, EmbeddingConfig


class CountingEmbedder(Embedder):
    """The real encoder, counting how many texts it was asked to encode."""

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        self.encoded = 0

    def encode(self, texts):
        self.encoded += len(texts)
        return super().encode(texts)


@pytest.fixture(scope="session")
def embedder() -> CountingEmbedder:
    return CountingEmbedder(EmbeddingConfig(show_progress=False))


@pytest.fixture
def config() -> GraphConfig:
    return GraphConfig(show_progress=False)
