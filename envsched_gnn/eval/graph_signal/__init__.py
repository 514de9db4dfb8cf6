"""``eval graph-signal``: does the graph predict reward variance here, and its report."""
