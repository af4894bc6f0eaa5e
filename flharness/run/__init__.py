"""Running cells: the per-run loop with resume and progress, and the per-cell checks."""
