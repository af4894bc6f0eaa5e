"""Per-cell analysis of a results folder: flows, metrics from Flent's data and the pcaps."""
