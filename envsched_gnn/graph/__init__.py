"""The dual-relation task graph (spec sections 3 and 8), apart from the store that persists it.

``task_graph``: ``TaskGraph`` (nodes, typed ``within`` / ``cross`` edges), ``RELATIONS`` and the
``graph.json`` snapshot; ``hetero``: its PyTorch Geometric ``HeteroData`` view. Models and the
scheduler import this package; ``graph_store`` builds and persists the graph.
"""
