"""A run's folder (results/<run>/), named once: the files fl writes beside its scenarios'
folders and reads back, as the runner, the testbeds and `fl plot` name them; a cell's
folder is cell_folder.py's. docs/results-folder.md describes each."""
from __future__ import annotations

from ..log import DEBUG_LOG

RUN_RECORD = "run.json"  # one entry per `fl run` (run_record.py)
FL_LOG = "fl.log"  # what fl printed, every invocation
SCENARIO = "scenario.yml"  # in each scenario's folder: the scenario as it ran
CHARTS = "charts"  # in each scenario's folder: fl plot's charts
DATASET = "dataset.csv"  # fl plot: one row per cell × flow
SUMMARY = "summary.json"  # fl plot: the run's numbers per scenario
INDEX = "README.md"  # fl plot: the results index
INDEX_HTML = "index.html"  # the same as a page

__all__ = ["CHARTS", "DATASET", "DEBUG_LOG", "FL_LOG", "INDEX", "INDEX_HTML", "RUN_RECORD", "SCENARIO", "SUMMARY",
           "vm_kernel_log"]


def vm_kernel_log(testbed_id: str) -> str:
    """A VM guest's kernel messages (--vm), one file per testbed."""
    return f"vm-kernel-{testbed_id}.log"
