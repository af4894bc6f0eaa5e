"""The latency probe's figures from an irtt JSON file built here: known delays, lost
round trips, and the clock rule (one-way delay only where the ends share a clock)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from flharness.analysis.probe import load, probe_flow
from flharness.results import cell_folder
from flharness.results.cell_record import ProbeConfig
from flharness.scenario.features import parse_probe

CONFIG = ProbeConfig(codepoint="ect1")
BASE_UP_MS, BASE_DOWN_MS = 2.0, 3.0


def _write(cell: Path, up_ms: list[float], lost: set[int]) -> None:
    """Round trip i: UP_MS[i] client → server (BASE_DOWN_MS back), lost if i is in LOST."""
    trips = []
    for i, up in enumerate(up_ms):
        if i in lost:
            trips.append({"seqno": i, "lost": "true_up", "timestamps": {}})
            continue
        delay = {"send": int(up * 1e6), "receive": int(BASE_DOWN_MS * 1e6), "rtt": int((up + BASE_DOWN_MS) * 1e6)}
        sent = {"client": {"send": {"wall": int((1e9 + i * 0.01) * 1e9)}}}
        trips.append({"seqno": i, "lost": "false", "delay": delay, "timestamps": sent})
    data = {"config": {"remote_address": "10.71.2.1:2112"}, "round_trips": trips}
    with gzip.open(cell / cell_folder.PROBE, "wt") as f:
        json.dump(data, f)


def test_queueing_delay_is_above_the_cells_minimum_with_its_tail(tmp_path):
    queued = np.concatenate([np.zeros(10), np.linspace(0, 20, 980), [50.0] * 10])  # ms above the path's
    _write(tmp_path, list(BASE_UP_MS + queued), lost={3, 500})
    p = probe_flow(load(tmp_path / cell_folder.PROBE), CONFIG, shared_clock=True)
    assert not isinstance(p, str), p
    kept = np.delete(queued, [3, 500])
    assert p.sent == 1000 and p.lost_pct == pytest.approx(0.2) and p.queueing_from == "one-way"
    assert p.queueing_ms is not None and p.owd_up_ms is not None and p.rtt_ms is not None
    assert p.queueing_ms.n == 998 and p.queueing_ms.max == pytest.approx(50, abs=1e-3)
    assert p.queueing_ms.p99 == pytest.approx(np.percentile(kept, 99), abs=1e-3)
    assert p.queueing_ms.p999 == pytest.approx(np.percentile(kept, 99.9), abs=1e-3)
    assert p.owd_up_ms.median == pytest.approx(BASE_UP_MS + np.median(kept), abs=1e-3)
    assert p.rtt_ms.median == pytest.approx(BASE_UP_MS + BASE_DOWN_MS + np.median(kept), abs=1e-3)
    samples = load(tmp_path / cell_folder.PROBE)
    assert not isinstance(samples, str) and samples.port == 2112
    assert len(samples.t) == 998 and samples.t[1] - samples.t[0] == pytest.approx(0.01, abs=1e-6)


def test_without_a_shared_clock_the_round_trip_is_used(tmp_path):
    _write(tmp_path, [BASE_UP_MS + x for x in (0, 1, 2, 3)], lost=set())
    p = probe_flow(load(tmp_path / cell_folder.PROBE), CONFIG, shared_clock=False)
    assert not isinstance(p, str) and p.owd_up_ms is None and p.queueing_from == "round trip"
    assert p.queueing_ms is not None and p.queueing_ms.max == pytest.approx(3, abs=1e-6)


def test_a_missing_or_broken_file_is_said(tmp_path):
    assert "no readable probe.json.gz" in str(probe_flow(load(tmp_path / cell_folder.PROBE), CONFIG, True))
    (tmp_path / cell_folder.PROBE).write_bytes(b"not gzip")
    assert "no readable" in str(probe_flow(load(tmp_path / cell_folder.PROBE), CONFIG, True))


def test_the_scenario_key():
    p, label = parse_probe({"codepoint": "ect1"})
    assert p is not None and p.interval == "10ms" and p.tos == 1 and label == "probe-ect1-10ms"
    p, label = parse_probe({"codepoint": "not-ect", "dscp": 46, "interval": "20ms"})
    assert p is not None and p.tos == 46 << 2 and label == "probe-not-ect-20ms-dscp46"
    assert parse_probe("none") == (None, "noprobe")
    for raw, words in (({"codepoint": "ect1", "interval": "2s"}, "1ms-1s"), ({"interval": "10ms"}, "codepoint missing"),
                       ({"codepoint": "ect1", "every": 1}, "unknown key 'every'"), ("ect1", "mapping")):
        with pytest.raises(ValueError, match=words):
            parse_probe(raw)
