"""series.npz beside metrics.json: each flow's per-packet one-way delay and its goodput per
interval, from the captures (analysis/delivery.py), on Flent's time axis (s after t0).
Written with the metrics, so the figures drawn from it (report/owd_plot.py, the box plots)
never read a capture again. float32: µs over a test of minutes, a millionth of a Mbit/s."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
_FIELDS = ("owd_t", "owd_ms", "goodput_t", "goodput_mbit")


@dataclass
class FlowSeries:
    owd_t: FloatArray  # departure of each matched data packet (s, Flent's axis), increasing
    owd_ms: FloatArray  # its one-way delay
    goodput_t: FloatArray  # start of each interval (s, Flent's axis)
    goodput_mbit: FloatArray  # payload first delivered to the receiver in it, Mbit/s


@dataclass
class CellSeries:
    interval_s: float = 0.0  # the goodput intervals' width
    flows: dict[int, FlowSeries] = field(default_factory=dict)  # flow index (from 1) → its series

    def write(self, path: Path) -> None:
        arrays = {f"{name}_{i}": np.asarray(getattr(s, name), np.float32)
                  for i, s in self.flows.items() for name in _FIELDS}
        tmp = path.with_name(f".{path.name}.tmp.npz")
        np.savez_compressed(tmp, interval_s=np.float64(self.interval_s), **arrays)
        tmp.replace(path)


def read_series(path: Path) -> CellSeries:
    with np.load(path) as z:
        flows = sorted({int(k.rsplit("_", 1)[1]) for k in z.files if k != "interval_s"})
        return CellSeries(float(z["interval_s"]),
                          {i: FlowSeries(*(z[f"{name}_{i}"] for name in _FIELDS)) for i in flows})
