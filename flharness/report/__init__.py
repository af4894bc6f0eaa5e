"""`fl plot`: from a run's results folder to metrics, plots, tables, a dataset and an index."""
