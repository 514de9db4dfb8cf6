"""Building the dual-relation task graph from a pool (spec section 3): the six TF-IDF views,
sentence embeddings of abstracts, kNN or ANN with the pair-hash tie rule, and where the pieces
run. It needs no store: :mod:`envsched_gnn.graph_store` writes what it builds, and the
simulator and the benchmarks use it directly."""
