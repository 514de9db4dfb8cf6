"""The Cypher graph store (Neo4j or managed ArcadeDB): the graph written, read back and grown.

The graph is made by :mod:`envsched_gnn.graph_build`; the graph itself lives in
:mod:`envsched_gnn.graph`.
"""
