"""The results contract: the files of a run folder as pydantic models, read and written
through them by the run, the analysis and the report.

* cell_record: cell.json (what ran, its configuration, backend, testbed, checks);
* cell_metrics: metrics.json (the analysis of a cell; a cache);
* run_record: run.json (one entry per `fl run` invocation);
* flags: a cell's cautions (kind, code, text), selected by kind and code, never text;
* files: base models, versioned reading (a file of another version is one clear error),
  atomic writing;
* store: a scenario's folder of cells, committed atomically.
"""
from .cell_metrics import METRICS_VERSION, CellMetrics
from .cell_record import CELL_VERSION, Backend, BottleneckPorts, CellConfig, CellRecord, Checks, Endpoints
from .files import VersionError, read, write
from .flags import MISMEASURED, Flag, FlagCode, FlagKind
from .run_record import RUN_VERSION, Invocation, RunRecord
from .store import ScenarioFolder

__all__ = ["CELL_VERSION", "METRICS_VERSION", "MISMEASURED", "RUN_VERSION", "Backend", "BottleneckPorts",
           "CellConfig", "CellMetrics", "CellRecord", "Checks", "Endpoints", "Flag", "FlagCode", "FlagKind", "Invocation", "RunRecord",
           "ScenarioFolder", "VersionError", "read", "write"]
