"""A cell's folder, named once: every file the hosts and fl write into it, as the writers
(the scripts rendered for the hosts, the fetch, cell_logs) and the readers (CellFiles, the
cache, the checks) name it. docs/results.md describes each."""
from __future__ import annotations

from ..hosts import ENDPOINTS

CELL = "cell.json"  # the cell's record (cell_record.py)
METRICS = "metrics.json"  # what the analysis found (cell_metrics.py)
SERIES = "series.npz"  # its time series (cell_series.py)
SETUP_LOG = "setup.log"  # each host's setup, as it ran
TEARDOWN_LOG = "teardown.log"  # each host's state after the test (teardown_format.py)
FLENT_LOG = "flent.log"  # Flent's output and its exit status
#: flent.log's first line: FLENT_EXIT then Flent's exit status (testbed/flent_script.py
#: writes it, flent_exit reads it), then "# command: …", then what Flent printed.
FLENT_EXIT = "# exit status: "
QUEUE_LOG = "mid.qdisc.log"  # the middlebox's queue samples
#: QUEUE_LOG's first line: this, then one NAME=DEV per sampled port (queue_device), in the
#: order of each sample's arrays (fl-qdisc-sample prints its arguments after it).
QUEUE_DEVICES_HEADER = "# devices "
UDP_LOG = "udp.log"  # the competing UDP flow's server report
VIDEO_LOG = "video.log"  # the video flow's sender (iperf), for people
PROBE = "probe.json.gz"  # the latency probe's samples (irtt)
PROBE_LOG = "probe.log"  # what the probe's client printed, for people
COMPRESSED = ".xz"  # a capture once its cell is done


FLENT_DATA = ".flent.gz"


def flent_data(cell: str) -> str:
    """Flent's data file of the cell named CELL."""
    return cell + FLENT_DATA


def capture(host: str, compressed: bool = True) -> str:
    """HOST's capture: compressed once the cell is done, plain while it runs."""
    return f"{host}.pcap" + (COMPRESSED if compressed else "")


def ss_log(host: str) -> str:
    """HOST's socket sampler's log."""
    return f"{host}.ss.log"


SCHEME_PREFIX = "scheme-"


def scheme_log(flow: int, side: str) -> str:
    """What a scheme flow's SIDE (sender, receiver) printed."""
    return f"{SCHEME_PREFIX}{int(flow)}.{side}.log"


def scheme_events(flow: int, side: str) -> str:
    """A scheme flow's SIDE: its start, CPU time and exit, as JSON lines."""
    return f"{SCHEME_PREFIX}{int(flow)}.{side}.json"


CAPTURES = tuple(capture(h) for h in ENDPOINTS)
FLENT_DATA_GLOB = flent_data("*")
RAW_CAPTURE_GLOB = capture("*", compressed=False)
SS_LOGS = tuple(ss_log(h) for h in ENDPOINTS)
#: What a host that keeps a cell's files in its own folder (an ssh host without the
#: controller's filesystem) holds of them, as glob patterns: fl fetches these
#: (roles/cell/tasks/fetch.yml, through TestbedVars' fl_cell_files), every other file of
#: the cell fl writes itself.
HOST_WRITTEN = (FLENT_DATA_GLOB, FLENT_LOG, UDP_LOG, VIDEO_LOG, PROBE, PROBE_LOG, capture("*"), ss_log("*"),
                QUEUE_LOG, f"{SCHEME_PREFIX}*")


def queue_device(name: str, dev: str) -> str:
    """The queue sampler's argument for port DEV: NAME (its direction) and the device; the
    sampler's QUEUE_DEVICES_HEADER line lists them (queue_devices reads it)."""
    return f"{name}={dev}"


def queue_devices(line: str) -> list[tuple[str | None, str]] | None:
    """The sampled devices of a QUEUE_DEVICES_HEADER line, in the samples' order, as (NAME,
    DEV) (a word without NAME= has None: an old sampler's); None if LINE is no header."""
    if not line.startswith(QUEUE_DEVICES_HEADER):
        return None
    words = line.removeprefix(QUEUE_DEVICES_HEADER).split()
    return [(name, dev) if sep else (None, name) for name, sep, dev in (w.partition("=") for w in words)]


def flent_exit(first_line: str) -> int | None:
    """Flent's exit status from flent.log's first line, None if the line is not one."""
    status = first_line.removeprefix(FLENT_EXIT)
    return int(status) if status != first_line and status.isdigit() else None
