"""r2s2r_view: the cell seen in a browser through Rerun's web viewer (live or from a bag)."""
