"""r2s2r bring-up: graph definitions, the graph supervisor and the ``r2s2r`` command line."""
