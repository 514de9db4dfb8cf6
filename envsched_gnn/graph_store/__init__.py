"""The Cypher graph store (Neo4j or managed ArcadeDB), graph builder and HeteroData loader."""
