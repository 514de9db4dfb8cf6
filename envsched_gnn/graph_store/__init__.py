"""The Cypher graph store (Neo4j or managed ArcadeDB): the graph written, read back and grown."""
