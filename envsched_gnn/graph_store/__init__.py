"""The Cypher graph store (Neo4j or managed ArcadeDB) and the graph builder.

The builder makes the task graph (TF-IDF views, embeddings, kNN or ANN, incremental growth);
the graph itself lives in :mod:`envsched_gnn.graph`.
"""
