"""Built-in datasets: generated (synthetic clusters, GPM) and real (from the data dir)."""
