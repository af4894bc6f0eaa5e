"""fl: declarative congestion-control and AQM experiments.

Pipeline, one subpackage or module per stage:
scenario (YAML → validated model) → cells (matrix expansion, names, hashes)
→ testbed (Ansible: namespaces or ssh hosts, probe) → run (per-cell Flent, capture,
logs, resume) → results (cell.json, atomic commit).
"""
from pathlib import Path

__version__ = "0.1.0"

#: Top of the checkout: scenarios/, roles/, playbooks/, inventory.ini live here.
REPO = Path(__file__).resolve().parent.parent
