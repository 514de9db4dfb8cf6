"""The Cypher graph store (Neo4j or managed ArcadeDB), the graph builder, and the HeteroData loader."""
