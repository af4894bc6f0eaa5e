"""Analysis and report building blocks with fake inputs: captures written with dpkt (an
encoder independent of fl's numpy reader) for retransmissions in TCP sequence space,
goodput from the receiver's ACKs and one-way delay and loss; flow matching, confidence
intervals, the fairness table, starved flows and impossible goodput flagged (not
dropped), table-safe text in the index, the tidy dataset; the bottleneck queue from the
middlebox's samples (tc's JSON as fl-qdisc-sample writes it)."""
from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path
from types import SimpleNamespace

import dpkt
import numpy as np

from flharness.analysis import delivery, link, metrics, queue, ss_samples
from flharness.analysis.cell_files import CellFiles
from flharness.analysis.flent_data import delivered_mbit, first_data_s
from flharness.analysis.flows import FlowInfo, declared_flows, match_connections
from flharness.analysis.metrics import Settings
from flharness.analysis.pcap import Conn, load
from flharness.cells import expand
from flharness.report import charts
from flharness.report.collect import CellResult, RunResult, ScenarioResult
from flharness.report.dataset import rows
from flharness.report.index import environment, table_safe
from flharness.report.tables import fairness_table, stat
from flharness.results import cell_folder, files
from flharness.results.cell_metrics import Capacity, CellMetrics, FlowMetrics, QueueSummary, Spread
from flharness.results.cell_record import BottleneckPorts, CellConfig, CellRecord, Endpoints
from flharness.results.flags import Flag
from flharness.results.run_record import RunRecord
from flharness.scenario import load_scenario
from flharness.scenario.schema import Scenario

CLI, SRV = "10.71.1.1", "10.71.2.1"
LINK = {"rate": "10mbit", "rate_bps": 10e6, "qdisc": "pfifo limit 100", "self_shaping": False}
HOST = {"kind": "host", "testbed": "netns", "inventory": "inventory.ini", "clock": "real"}


def _config(**changes) -> CellConfig:
    """A cell.json config: two upload flows at 10 Mbit/s, with CHANGES."""
    return CellConfig.model_validate({
        "format": 1, "test": "tcp_2up", "length": 20, "step_size": 0.2, "repetition": 1,
        "flows": [{"direction": "up", "cc": "cubic", "rtt": "20ms", "tos": None}] * 2,
        "bottleneck": {"up": LINK, "down": LINK}, "sysctls": {}, **changes})


def _record(name: str = "a", status: str = "ok", **changes) -> CellRecord:
    return CellRecord.model_validate({"scenario": "s", "cell": name, "config_hash": "x", "status": status,
                                      "config": _config(), "backend": HOST, **changes})


def _write_pcap(path: Path, packets: list[tuple]) -> Path:
    """PACKETS: (time, sender, sport, receiver, dport, seq, ack, payload bytes, tos, ip id)."""
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=128)
        for ts, a, sport, b, dport, seq, ack, size, tos, ipid in sorted(packets):
            tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=dpkt.tcp.TH_ACK, data=b"x" * size)
            ip = dpkt.ip.IP(src=socket.inet_aton(a), dst=socket.inet_aton(b), p=6, tos=tos, id=ipid, data=tcp)
            ip.len = 20 + len(bytes(tcp))
            w.writepkt(bytes(dpkt.ethernet.Ethernet(type=0x0800, data=ip))[:128], ts=ts)
    return path


def test_retransmissions_in_wrapping_sequence_space(tmp_path):
    seqs = (0xFFFFF000, 0xFFFFF5A8, 0x00000150, 0xFFFFF5A8, 0x000006F8)  # wraps past 2^32; 4th resent
    pk, conns = load(_write_pcap(tmp_path / "c.pcap", [(1 + i, CLI, 40001, SRV, 5001, s, 1, 1448, 0x02, i)
                                                       for i, s in enumerate(seqs)]))
    c = conns[(CLI, 40001, SRV, 5001)]
    assert c.data == 5 and c.retrans == 1 and c.ecn == {"ect0": 5} and len(pk) == 5


def test_goodput_is_what_the_receiver_acknowledged(tmp_path):
    """ACKs advance 1448 bytes per ms across the 2^32 wrap: 11.584 Mbit/s in any window;
    data the sender wrote beyond them (its socket buffer) does not count."""
    base = 2**32 - 500 * 1448
    acks = [(10 + k / 1000, SRV, 5001, CLI, 40001, 7, (base + k * 1448) % 2**32, 0, 0, k) for k in range(2000)]
    data = [(10, CLI, 40001, SRV, 5001, base, 8, 1448, 0, 0)]
    pk, conns = load(_write_pcap(tmp_path / "srv.pcap", acks + data))
    c = conns[(CLI, 40001, SRV, 5001)]
    assert abs(delivery.received_mbit(pk, c, 10.2, 11.2) - 11.584) < 0.02
    assert delivery.received_mbit(pk, c, 13.0, 14.0) == 0.0  # after the last ACK


def _arrived_in(packets: list[tuple], t_from: float, t_to: float) -> int:
    """The test's own count: payload bytes whose first copy reached the receiver in
    [T_FROM, T_TO) (PACKETS as _write_pcap takes them: one data connection of whole,
    aligned segments, so a segment is known by its sequence number)."""
    seen, total = set(), 0
    for ts, _, _, _, _, seq, _, size, _, _ in sorted(packets):
        if size and seq not in seen:
            seen.add(seq)
            total += size if t_from <= ts < t_to else 0
    return total


def test_goodput_counts_only_bytes_that_arrived_in_its_window(tmp_path):
    """Segments 0-9 arrive before the window (0.90-0.99 s) but #2 is lost: the ACK stays
    at #2 until its retransmission arrives at 1.05 s, then jumps past #9; #10-19 arrive
    and are acknowledged at 1.10-1.19 s. The ACKs advance by 18 segments in [1, 2) s, but
    only 11 segments' payload arrived in it: goodput counts those 11 (what arrived, the
    test's own count), never the bytes that were held before the window (in VMs flows
    start ~0.28 s before their declared start: 9.58 Mbit/s from ACKs against 9.50
    arriving). Per 0.5 s: 9, 11 and 0 segments, as they arrived (the 7 held above the
    hole at 1.0 s count when they came, not when the ACK passed them); sequence numbers
    wrap past 2^32."""
    base, mss = 2**32 - 5 * 1448, 1448
    seg = lambda k, t, ipid: (t, CLI, 40001, SRV, 5001, (base + k * mss) % 2**32, 1, mss, 0, ipid)  # noqa: E731
    ack = lambda k, t: (t + 1e-4, SRV, 5001, CLI, 40001, 1, (base + k * mss) % 2**32, 0, 0, 0)  # noqa: E731
    data = [seg(k, 0.90 + k / 100, k) for k in range(10) if k != 2] + [seg(2, 1.05, 10)]
    data += [seg(k, 1.0 + k / 100, k + 1) for k in range(10, 20)]
    acks = [ack(0, 0.85)] + [ack(min(k + 1, 2), 0.90 + k / 100) for k in range(10) if k != 2]
    acks += [ack(10, 1.05)] + [ack(k + 1, 1.0 + k / 100) for k in range(10, 20)]
    pk, conns = load(_write_pcap(tmp_path / "srv.pcap", data + acks))
    c = conns[(CLI, 40001, SRV, 5001)]
    arrived = _arrived_in(data, 1.0, 2.0)
    assert arrived == 11 * mss
    assert delivery.received_mbit(pk, c, 1.0, 2.0) == arrived * 8 / 1e6
    halves = [(0.5, 1.0), (1.0, 1.5), (1.5, 2.0)]
    assert list(delivery.delivered_bytes(pk, c, np.array([0.5, 1.0, 1.5, 2.0]))) == [_arrived_in(data, a, b) for a, b in halves]
    assert [_arrived_in(data, a, b) // mss for a, b in halves] == [9, 11, 0]


def test_the_link_rate_in_force_and_its_payload_capacity():
    """2 Mbit/s, 6 from t = 7 s: over 5-10 s the link carries 2 s × 2 + 3 s × 6 = 22 Mbit
    of frames, × 1448/1514 of payload; the highest rate in force in any span."""
    six = {**LINK, "rate": "6mbit", "rate_bps": 6e6}
    config = _config(bottleneck={"up": {**LINK, "rate": "2mbit", "rate_bps": 2e6}, "down": LINK},
                     rate_schedule=[{"at": "7s", "up": six, "down": six}])
    assert np.isclose(link.capacity_bits(config, "up", 5, 10), 22e6 * 1448 / 1514)
    assert np.isclose(link.capacity_bits(config, "up", 7.5, 8), 3e6 * 1448 / 1514)
    assert np.isclose(link.capacity_bits(config, "down", 0, 1), 10e6 * 1448 / 1514)
    assert list(link.rate_at(np.array([6.9, 7.0]), config, "up")) == [2e6, 6e6]
    assert list(link.highest_rate(np.array([5.0, 6.5, 7.5]), np.array([6.0, 7.5, 8.0]), config, "up")) == [2e6, 6e6, 6e6]


def test_utilisation_is_over_one_window_at_the_rate_in_force():
    """Utilisation is the data delivered over the window from the first flow's start to
    the end of the test, against what the link carries in it. A 5 s flow through 2 Mbit/s
    stepping to 6 at t = 7 s (lead-in 5 s) that delivered 4.189 Mbit/s: 4.189 × 5 Mbit of
    the 22 × 1448/1514 the link could carry (99.5 %; against 2 Mbit/s alone it was
    reported as 219 %, "impossible"). Two flows of a 4 s test on 8 Mbit/s, the second
    from 2 s: 7.345 Mbit/s over 4 s and 0.51 over its 2 s are 30.4 Mbit in 4 s (99.3 %;
    adding the two means gave 102.7 %)."""
    payload = 1448 / 1514
    six = {**LINK, "rate": "6mbit", "rate_bps": 6e6}
    stepped = _config(bottleneck={"up": {**LINK, "rate": "2mbit", "rate_bps": 2e6}, "down": LINK}, length=5,
                      flows=[{"direction": "up", "cc": "cubic", "rtt": "0ms", "tos": None}],
                      rate_schedule=[{"at": "7s", "up": six, "down": six}])
    caps = {"up": link.capacity(stepped, "up", 5.0, 10.0)}
    u = metrics._utilisation([_flow(1, 4.189)], caps, 5.0, 5)
    assert np.isclose(u["up"], 4.189 * 5 / (22 * payload)) and u["up"] < 1
    eight = {**LINK, "rate": "8mbit", "rate_bps": 8e6}
    delayed = _config(bottleneck={"up": eight, "down": eight}, length=4)
    flows = [_flow(1, 7.345), _flow(2, 0.51, start_s=2.0)]
    caps = {"up": link.capacity(delayed, "up", 5.0, 9.0)}
    u = metrics._utilisation(flows, caps, 5.0, 4)
    assert np.isclose(u["up"], (7.345 * 4 + 0.51 * 2) / (4 * 8 * payload)) and u["up"] < 1
    assert metrics._flags(_record(config=delayed), flows, u, {}, caps, {}, []) == []


def socket_figures(rs: _Samples, config: CellConfig, length: float, index: int, window: float) -> metrics.Sampled:
    """metrics.socket_figures for upload flow INDEX of a cell of CONFIG (lead-in 5 s)."""
    flow = FlowInfo(index, f"TCP upload::{index}", "up", "cubic", 20.0, None, 0.0)
    files = CellFiles("cell", config, Path("/nonexistent"), SRV)
    test = metrics.Recorded(_record(config=config), files, rs, 5.0, length, [flow])
    return metrics.socket_figures(test, flow, None, window)


class _Samples:
    """The little of a Flent ResultSet that the socket statistics read: per series, raw
    samples (t on Flent's axis, tcp_delivery_rate Mbit/s, tcp_rtt ms)."""
    def __init__(self, t0: float, raw: dict[str, list[tuple[float, float, float]]]):
        self.t0, self.raw = t0, raw

    def raw_series(self, name: str, raw_key: str) -> list[tuple[float, float]]:
        i = {"tcp_delivery_rate": 1, "tcp_rtt": 2}[raw_key]
        return [(s[0], s[i]) for s in self.raw.get(name, [])]


def test_delivery_rate_samples_above_the_link_rate_are_left_out(tmp_path):
    """D_SS over the window (2 s ending 1 s before the last sample; a sample on
    a bound, 7.0 s, is in it) without the samples above the link's rate: a slow-start sample of 156.5 Mbit/s on a 10 Mbit/s link is
    left out and counted. A window that a step down to 5 Mbit/s (at 6.5 s) crosses begins
    a sample's span after it: the samples before are not in it, and 7.5 Mbit/s 1.4 s after
    the step is left out. A D_SS still above 1.01 × the payload capacity (9.9 Mbit/s samples:
    above 9.56, below the link's 10) is flagged as a measurement error, of D_SS and the
    fairness built on it. A step within a span of the window's end leaves no window: no
    D_SS, and a flag that says so."""
    t = [5.2, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0]
    rs = _Samples(1000.0, {"TCP upload::1": [(5.2, 156.5, 3.0), *((x, 4.0, 50.0) for x in t[1:])],
                           "TCP upload::2": [(x, 9.9, 50.0) for x in t]})
    one, two = (socket_figures(rs, _config(), 3, i, 2.0) for i in (1, 2))
    assert (one.steady_mbit, one.steady_excluded, one.samples) == (4.0, 1, 7)
    assert one.source == "Flent (cli)" and one.tcp_rtt.median == 50.0 and one.flag is None
    assert np.isclose(two.steady_mbit, 9.9) and two.steady_excluded == 0
    assert (two.flag.kind, two.flag.code) == ("measurement_error", "steady_over_capacity")
    assert two.flag.text == "flow 2 (cubic (20 ms)): D_SS 9.9 Mbit/s is 103.5% of the payload capacity, impossible"
    assert two.flag.metrics == ["dss_mbit", "jain", "ratio"]
    five = {**LINK, "rate": "5mbit", "rate_bps": 5e6}
    stepped = _config(rate_schedule=[{"at": "6.5s", "up": five, "down": five}])
    rs = _Samples(1000.0, {"TCP upload::1": [(5.5, 4.0, 50.0), (6.6, 7.5, 50.0), (7.0, 4.5, 50.0), (7.6, 4.2, 50.0),
                                             (7.9, 7.5, 50.0), (9.0, 4.0, 50.0)]})
    one = socket_figures(rs, stepped, 4, 1, 3.0)
    assert one.steady_excluded == 1 and np.isclose(one.steady_mbit, 4.2) and one.flag is None
    late = _config(rate_schedule=[{"at": "7.5s", "up": five, "down": five}])  # window: 8.5-8.0 s
    one = socket_figures(rs, late, 4, 1, 3.0)
    assert one.steady_mbit is None and (one.flag.kind, one.flag.code) == ("incomplete", "steady_window_empty")
    assert one.flag.text == ("flow 1 (cubic (20 ms)): no D_SS: no socket sample in its steady window, "
                             "8.0-8.0 s (after the rate schedule's last step)")
    rs = _Samples(1000.0, {"TCP upload::1": [(x, 15.0, 50.0) for x in t]})  # all above the 10 Mbit/s link
    one = socket_figures(rs, _config(), 3, 1, 2.0)
    assert one.steady_mbit is None and one.steady_excluded == 5 and one.flag.code == "steady_window_empty"
    assert "all 5 socket samples in its steady window, 5.0-7.0 s, are above the link's rate" in one.flag.text


#: The server's samples of a tcp_bidirectional cell (srv.ss.log, as fl-ss-sample writes
#: them): the download flow's sending socket, netperf's control connection, and the
#: upload flow's receiving socket (no delivery rate); IPv4-mapped addresses in the last.
SRV_SS = """# 1795498782.955156
% cpu0 1 2 3 4 5 6 7 8 9 10
ESTAB 0      110048 10.71.2.1:40147 10.71.1.1:32863
\t cubic wscale:10,10 rto:284 rtt:82.514/0.584 mss:1448 cwnd:31 bytes_acked:322904 pacing_rate 5222432bps delivery_rate 4192896bps delivered:224
ESTAB 0      0      10.71.2.1:12865 10.71.1.1:34169
\t bbr wscale:10,10 rto:228 rtt:25.941/10.861 mss:1448 cwnd:11 bytes_acked:656 delivery_rate 375792bps delivered:2 app_limited
ESTAB 2896   0      10.71.2.1:39987 10.71.1.1:38089
\t cubic wscale:10,10 rto:236 rtt:33.817/16.908 mss:1448 cwnd:10 bytes_received:363368 delivered:1 app_limited rcv_rtt:82.836
# 1795498783.959287
ESTAB 0      165072 10.71.2.1:40147 10.71.1.1:32863
\t cubic wscale:10,10 rto:292 rtt:89.967/0.577 mss:1448 cwnd:51 bytes_acked:890520 delivery_rate 5556096bps delivered:616
# 1795498784.963835
ESTAB 0      337384 [::ffff:10.71.2.1]:40147 [::ffff:10.71.1.1]:32863
\t cubic wscale:10,10 rto:284 rtt:83.271/0.853 mss:1448 cwnd:53 bytes_acked:1711536 delivery_rate 6561032bps delivered:1183
"""


def test_a_download_flows_socket_statistics_are_its_senders(tmp_path):
    """Flent samples the client's sockets, where a download flow only receives: its D_SS
    and TCP RTT come from the server's ss samples of its connection (the key of the
    sender's capture: server address and port, client address and port). Flent's t = 0
    at 1795498777.46266: samples at 5.49, 6.50 and 7.50 s; the window of 2 s ends at
    6.50 s, so D_SS is the mean of 4.192896 and 5.556096 Mbit/s (strictly inside); RTT
    over the flow's 3 s: 82.514, 89.967, 83.271 ms."""
    (tmp_path / "srv.ss.log").write_text(SRV_SS)
    samples = ss_samples.samples(tmp_path / "srv.ss.log")
    assert samples[(SRV, 40147, CLI, 32863)][2] == (1795498784.963835, 6.561032, 83.271)
    assert samples[(SRV, 39987, CLI, 38089)] == [(1795498782.955156, None, 33.817)]
    rs = _Samples(1795498777.46266, {})
    flow = FlowInfo(1, "TCP download", "down", "cubic", 20.0, None, 0.0)
    record = _record()
    test = metrics.Recorded(record, CellFiles("cell", record.config, tmp_path, SRV), rs, 5.0, 3, [flow])
    down = metrics.socket_figures(test, flow, (SRV, 40147, CLI, 32863), 2.0)
    assert down.source == "srv.ss.log" and down.samples == 3
    assert np.isclose(down.steady_mbit, (4.192896 + 5.556096) / 2) and down.steady_excluded == 0
    assert down.tcp_rtt.median == 83.271 and down.tcp_rtt.n == 3
    unmatched = metrics.socket_figures(test, flow, None, 2.0)
    assert unmatched.steady_mbit is None and unmatched.samples == 0


def test_one_way_delay_and_loss_match_segments_by_sequence_and_ip_id(tmp_path):
    """100 segments, each 10 ms (+ k µs) on the way; #20 is lost and resent (a new IP id)
    and arrives; #99 is still queued when the capture ends (neither lost nor delivered)."""
    sent = [(1 + k / 100, CLI, 40001, SRV, 5001, 1000 + k * 1448, 1, 1448, 0, k) for k in range(100)]
    sent.append((1.505, CLI, 40001, SRV, 5001, 1000 + 20 * 1448, 1, 1448, 0, 100))  # the retransmission
    arrived = [(t + 0.010 + k * 1e-6, *rest) for k, (t, *rest) in enumerate(sent) if k not in (20, 99)]
    s_pk, s_conns = load(_write_pcap(tmp_path / "cli.pcap", sent))
    r_pk, r_conns = load(_write_pcap(tmp_path / "srv.pcap", arrived))
    key = (CLI, 40001, SRV, 5001)
    owd = delivery.one_way(s_pk, s_conns[key], r_pk, r_conns[key], 0, 10)
    assert owd.n == 99 and owd.sent == 100  # settled: sent before the last arrival
    assert abs(owd.loss - 0.01) < 1e-9
    assert abs(owd.median - 10.049) < 0.002 and owd.p99 < 10.2
    assert np.isclose(delivery.one_way(s_pk, s_conns[key], r_pk, r_conns[key], 0, 1.5).n, 50)


def test_declared_flows_follow_flent_series_per_direction():
    config = _config(flows=[{"direction": "up", "cc": "cubic", "rtt": "80ms", "tos": 76},
                            {"direction": "up", "cc": "prague", "rtt": "20ms", "tos": 140, "start": "10s"}])
    flows = declared_flows(config, ["Ping (ms) ICMP", "TCP upload avg", "TCP upload::1", "TCP upload::2",
                                    "TCP upload::1::tcp_rtt", "TCP upload sum"])
    assert [(f.series, f.cc, f.rtt_ms, f.start_s) for f in flows] == [
        ("TCP upload::1", "cubic", 80.0, 0.0), ("TCP upload::2", "prague", 20.0, 10.0)]
    assert flows[1].label == "prague (20 ms)"


def test_goodput_counts_only_data_delivered_in_the_test():
    """netperf samples cover `dur` s up to their stamp: a sample straddling the window's edge
    counts in part; a flow silent in the window counts 0, and what it sent after the test
    does not count (netperf's end-of-test mean would report it at full rate)."""
    t0 = 1000.0
    steady = [{"t": t0 + 6 + k, "dur": 1.0, "val": 8.0} for k in range(10)]  # data 5..15 s
    assert delivered_mbit(steady, t0, 5, 15) == 8.0
    assert delivered_mbit(steady, t0, 5.5, 15) == 8.0
    assert delivered_mbit([{"t": t0 + 6, "dur": 2.0, "val": 8.0}], t0, 5, 15) == 0.8  # 1 s of 2 in window
    late = [{"t": t0 + 19 + k, "dur": 0.25, "val": 9.0} for k in range(6)]
    ss_sample = {"t": t0 + 7, "tcp_cwnd": 10.0}  # socket statistics share the list
    assert delivered_mbit(late + [ss_sample], t0, 5, 15) == 0.0
    assert first_data_s(late + [ss_sample], t0) == 18.75
    assert delivered_mbit([ss_sample], t0, 5, 15) is None and first_data_s([], t0) is None


def _conn(first: float, dscp: int, n: int = 50) -> Conn:
    return Conn(first, dscp, n, 0, {"not_ect": n}, np.arange(n), np.arange(0))


def test_connections_matched_by_dscp_then_start_order():
    srv = "10.71.2.1"
    ends = Endpoints(server=srv, netperf_port=12865)
    conns = {("10.71.1.1", 40001, srv, 5001): _conn(2.0, 35), ("10.71.1.1", 40002, srv, 5002): _conn(1.0, 19),
             ("10.71.1.1", 40003, srv, 12865): _conn(0.5, 0)}  # netperf control: never a flow
    marked = [FlowInfo(1, "TCP upload::1", "up", "cubic", 80, 0x4c, 0), FlowInfo(2, "TCP upload::2", "up", "cubic", 20, 0x8c, 0)]
    assert match_connections(marked, "up", conns, ends, None) == {1: ("10.71.1.1", 40002, srv, 5002),
                                                                   2: ("10.71.1.1", 40001, srv, 5001)}
    same = [FlowInfo(1, "TCP upload::1", "up", "cubic", 0, None, 0), FlowInfo(2, "TCP upload::2", "up", "cubic", 0, None, 10)]
    assert match_connections(same, "up", conns, ends, None)[1] == ("10.71.1.1", 40002, srv, 5002)  # started first


def test_netperf_control_port_and_server_come_from_cell_json():
    """An inventory with another fl_netperf_port: its control connection (the earliest,
    with data) is left out, and a flow on 12865 is a flow; the server's address tells
    uploads from downloads."""
    srv, cli = "10.71.18.1", "10.71.17.1"  # a second parallel testbed's addresses
    conns = {(cli, 40001, srv, 12865): _conn(1.0, 0), (cli, 40002, srv, 23456): _conn(0.5, 0),
             (srv, 5001, cli, 40003): _conn(0.2, 0)}  # a download
    flows = [FlowInfo(1, "TCP upload::1", "up", "cubic", 0, None, 0)]
    ends = Endpoints(server=srv, netperf_port=23456)
    assert match_connections(flows, "up", conns, ends, None) == {1: (cli, 40001, srv, 12865)}
    down = [FlowInfo(1, "TCP download::1", "down", "cubic", 0, None, 0)]
    assert match_connections(down, "down", conns, ends, None) == {1: (srv, 5001, cli, 40003)}
    assert match_connections(flows, "up", conns, Endpoints(server="10.71.2.1", netperf_port=23456), None) == {}


def test_confidence_interval():
    s = stat([10.0, 12.0, 11.0, 13.0, 9.0])
    assert s.n == 5 and abs(s.mean - 11) < 1e-9
    assert abs(s.ci - 2.776445 * (2.5 ** 0.5) / 5 ** 0.5) < 1e-5  # t(0.975, 4) · s / √n
    assert stat([4.0]).ci is None and stat([]) is None


def _flow(i: int, mean: float | None, steady: float | None = None, **changes) -> FlowMetrics:
    return FlowMetrics.model_validate({
        "index": i, "series": f"TCP upload::{i}", "direction": "up", "cc": "cubic", "rtt_ms": 20.0, "start_s": 0.0,
        "label": "cubic (20 ms)", "mean_mbit": mean, "goodput_source": "receiver (srv capture)",
        "netperf_mbit": mean, "first_data_s": 5.0, "steady_mbit": mean if steady is None else steady,
        "tcp_rtt_ms": None, "socket_samples": 40, **changes})


def _cell(name: str, qdisc: str, rep: int, steady: list[float]) -> CellResult:
    flows = [_flow(i + 1, s) for i, s in enumerate(steady)]
    jain = sum(steady) ** 2 / (len(steady) * sum(x * x for x in steady))
    coords = {"cc": "cubic-vs-cubic", "qdisc": qdisc, "rate": "10mbit", "repetition": f"r{rep}"}
    record = _record(name, config=_config(repetition=rep),
                     coordinates={a: {"label": label, "value": label} for a, label in coords.items()})
    return CellResult("s", Path(name), record, CellMetrics(cell=name, flows=flows, jain=jain, steady_window_s=40))


def test_fairness_table_folds_repetitions():
    scenario = Scenario.model_validate({"test": "tcp_2up", "rate": "10mbit", "cc": "cubic-vs-cubic",
                                        "repetitions": 2, "matrix": {"qdisc": ["pfifo", "bfifo"]}})
    s = ScenarioResult("s", Path("s"), scenario, [_cell("a-r1", "pfifo", 1, [4.0, 6.0]),
                                                   _cell("a-r2", "pfifo", 2, [5.0, 5.0]),
                                                   _cell("b-r1", "bfifo", 1, [5.0, 5.0])])
    table = fairness_table(s)
    assert table["axes"] == ["qdisc"] and table["nflows"] == 2 and table["window"] == 40
    pfifo = next(r for r in table["rows"] if r["axes"] == ["pfifo"])
    assert pfifo["n"] == 2 and pfifo["flows"][0]["steady"].mean == 4.5
    assert abs(pfifo["fairness"].mean - (0.9615384615384616 + 1.0) / 2) < 1e-12


class _Flent:
    """The little of a Flent ResultSet that the checks read."""
    def meta(self, key: str) -> None:
        return None


def test_a_starved_flow_is_a_flagged_result_and_missing_data_makes_a_cell_invalid():
    record = _record(checks={"late_start_s": {"TCP upload::2": 14.1}})
    flows = [_flow(1, 9.5, 9.6), _flow(2, 0.04, 0.0)]
    assert metrics._fairness(flows) == (0.5, None)  # one flow has it all
    caps = {"up": link.capacity(record.config, "up", 5.0, 25.0)}
    u = metrics._utilisation(flows, caps, 5.0, 20)
    assert abs(u["up"] - 9.54 / (10 * 1448 / 1514)) < 1e-9  # of the payload capacity
    assert metrics._problems(flows, _Flent(), record.config) == []
    flags = metrics._flags(record, flows, u, {}, caps, {}, [])
    assert [(f.kind, f.code) for f in flags] == [("finding", "starved"), ("finding", "late_start")]
    assert [str(f) for f in flags] == ["flow 2 (cubic (20 ms)): starved, 0.04 Mbit/s in the test",
                                       "flow 2 (cubic (20 ms)): data began 14.1 s late"]
    flows[1].socket_samples = 0  # a flow that never ran in the test has none
    assert metrics._problems(flows, _Flent(), record.config) == []
    flows[0].socket_samples = 0  # but a flow that did: the sampler failed
    flows[1].mean_mbit = None
    assert metrics._problems(flows, _Flent(), record.config) == ["flow 1: no socket statistics (tcp_delivery_rate)",
                                                                 "flow 2: no goodput measured"]
    starved = _cell("a", "pfifo", 1, [9.6, 0.0])
    starved.metrics.flags = [Flag(kind="finding", code="starved", text="flow 2: starved")]
    starved.metrics.capacity, starved.metrics.utilisation = CAP10, {"up": 0.96}
    scenario = Scenario.model_validate({"test": "tcp_2up", "rate": "10mbit", "cc": "cubic-vs-cubic", "qdisc": "pfifo"})
    table = fairness_table(ScenarioResult("s", Path("s"), scenario, [starved]))
    assert starved.valid and table["rows"][0]["flows"][1]["steady"].mean == 0.0
    table["rows"][0]["link"] = "a/plot.svg"
    text = environment().from_string('{% import "tables.md.j2" as t %}{{ t.fairness(f) }}').render(f=table)
    assert "| [10mbit](a/plot.svg) ⚑ | pfifo | cubic (20 ms) | 9.60 | cubic (20 ms) | 0.00 | 0.500 | 9.56 | 96.0 | 1 |" in text


def test_bar_chart_data_over_cells_with_different_numbers_of_flows():
    """Cells of one CC and qdisc with 4 and then 2 flows (tcp_4up and tcp_bidirectional in
    one scenario): flows 1-2 averaged over both, 3-4 from the first alone."""
    four, two = _cell("a", "pfifo", 1, [1.0, 2.0, 3.0, 4.0]), _cell("b", "pfifo", 1, [3.0, 4.0])
    bars = charts._bar_data([four, two])["cubic-vs-cubic"]["pfifo"]
    assert [(label, mean) for label, mean, _ in bars] == [("cubic (20 ms)", 2.0), ("cubic (20 ms)", 3.0),
                                                          ("cubic (20 ms)", 3.0), ("cubic (20 ms)", 4.0)]


def test_table_text_is_escaped():
    assert table_safe("<script>x</script> | y") == "&lt;script&gt;x&lt;/script&gt; \\| y"
    assert table_safe(None) == "–"


def test_dataset_has_one_row_per_flow_and_skipped_cells():
    ok = _cell("a", "pfifo", 1, [4.0, 6.0])
    skipped = CellResult("s", Path("b"), _record("b", "skipped", reason="kernel lacks sch_fq_codel",
                                                 coordinates={"qdisc": {"label": "fq_codel", "value": "fq_codel"}}))
    scenario = Scenario.model_validate({"test": "tcp_2up", "rate": "10mbit", "cc": "cubic-vs-cubic", "qdisc": "pfifo"})
    run = RunResult("r", Path("r"), RunRecord(run="r"), [ScenarioResult("s", Path("s"), scenario, [ok, skipped])])
    data = rows(run)
    assert [(r["cell"], r.get("flow")) for r in data] == [("a", 1), ("a", 2), ("b", None)]
    assert data[2]["reason"] == "kernel lacks sch_fq_codel" and data[0]["axis_qdisc"] == "pfifo"
    assert Settings().window(180) == 60 and Settings().window(60) == 40 and Settings(20).window(60) == 20


def _qdisc_log(path: Path, samples: list[tuple[float, list, list]], header: str = "# devices up=mid.r down=mid.l") -> Path:
    """A mid.qdisc.log as fl-qdisc-sample writes it: (epoch, up port's qdiscs, down's)."""
    lines = [header]
    for t, up, down in samples:
        lines += [f"# {t}", json.dumps(up), json.dumps(down)]
    path.write_text("\n".join(lines) + "\n[{\"kind\":\"htb\",")  # the last sample cut short
    return path


def _htb(child: dict) -> list[dict]:
    return [{"kind": "htb", "handle": "1:", "root": True, "backlog": 10**6, "qlen": 999, "drops": 0},
            {"handle": "10:", "parent": "1:1", **child}]


def test_the_bottleneck_queue_as_drain_time_at_the_rate_in_force(tmp_path):
    """The declared qdisc (10: under HTB, not HTB's own total) each sample; its backlog as
    the time the link takes to send it, at 10 Mbit/s, then 5 Mbit/s after the schedule's
    step at 10 s; drops and marks counted inside the window only; a cut-off last sample
    left out."""
    t0 = 1000.0
    fq = [_htb({"kind": "fq_codel", "backlog": 1514 * n, "qlen": n, "drops": d, "ecn_mark": m})
          for n, d, m in ((0, 0, 0), (10, 1, 5), (20, 2, 9), (20, 4, 20), (0, 4, 20))]
    cake = [{"kind": "cake", "handle": "1:", "root": True, "backlog": 0, "qlen": 0, "drops": 0,
             "tins": [{"ecn_mark": 3, "avg_delay_us": 2000}, {"ecn_mark": 4, "avg_delay_us": 500}]}]
    log = _qdisc_log(tmp_path / "mid.qdisc.log", [(t0 + t, up, cake) for t, up in zip((1, 6, 9, 12, 20), fq)])
    series = queue.load(log)
    up, down = series["up"], series["down"]
    assert list(up.backlog_pkts) == [0, 10, 20, 20, 0] and up.kind == "fq_codel"
    assert list(down.marks) == [7] * 5 and list(down.own["delay_avg"]) == [2.0] * 5
    slow = {**LINK, "rate": "5mbit", "rate_bps": 5e6}
    config = _config(rate_schedule=[{"at": "10s", "up": slow, "down": slow}])
    drain = queue.drain_ms(up, t0, config, "up")
    assert np.allclose(drain, [0, 12.112, 24.224, 48.448, 0])
    s = queue.summary(up, t0, (5, 15), config, "up")
    assert s.samples == 3 and s.drops == 3 and s.marks == 15
    assert np.isclose(s.delay_ms.max, 48.448) and np.isclose(s.backlog_pkts.mean, 50 / 3)
    assert "delay_c_ms" not in s.model_dump() and "pkts_in_l" not in s.model_dump()  # dualpi2's only
    assert queue.summary(up, t0, (30, 40), config, "up") is None


#: The middlebox's part of a teardown log: a FIFO under fl's HTB on each port.
TEARDOWN = """\
======== mid ========
$ tc -s -d qdisc show dev mid.l; tc -s -d class show dev mid.l
qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 ver 3.17 direct_qlen 1000
 Sent 5000 bytes 50 pkt (dropped 0, overlimits 0 requeues 0)
qdisc pfifo 10: parent 1:1 limit 100p
 Sent 5000 bytes 50 pkt (dropped 2, overlimits 0 requeues 0)

$ tc -s -d qdisc show dev mid.r; tc -s -d class show dev mid.r
qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 ver 3.17 direct_qlen 1000
 Sent 90000 bytes 60 pkt (dropped 0, overlimits 9 requeues 0)
qdisc pfifo 10: parent 1:1 limit 100p
 Sent 90000 bytes 60 pkt (dropped 7, overlimits 0 requeues 0)
"""


def test_a_cells_bottleneck_ports_are_its_records_and_an_older_cells_its_samples_header(tmp_path):
    """A cell whose cell.json names its ports, its samples' header only their devices,
    reads as an older cell whose header names the directions: the same queue samples and
    qdisc totals. The record's ports decide even where the header's names say otherwise;
    a port neither log has gives no series and no totals, not an error."""
    up_port = [_htb({"kind": "pfifo", "backlog": 1514 * n, "qlen": n, "drops": n}) for n in range(3)]
    down_port = [_htb({"kind": "pfifo", "backlog": 0, "qlen": 0, "drops": 10 + n}) for n in range(3)]
    samples = [(1000.0 + n, up, down) for n, (up, down) in enumerate(zip(up_port, down_port))]

    def cell(name: str, header: str, ports: BottleneckPorts | None) -> CellFiles:
        d = tmp_path / name
        d.mkdir()
        _qdisc_log(d / cell_folder.QUEUE_LOG, samples, header)
        (d / "teardown.log").write_text(TEARDOWN)
        return CellFiles("cell", _config(), d, SRV, ports=ports)

    def seen(files: CellFiles) -> tuple:
        queues = {d: (q.kind, list(q.t), list(q.backlog_pkts), list(q.drops)) for d, q in files.queues.items()}
        return files.bottleneck_ports, queues, metrics._qdisc_totals(files)

    old = cell("old", "# devices up=mid.r down=mid.l", None)
    new = cell("new", "# devices mid.r mid.l", BottleneckPorts(up="mid.r", down="mid.l"))
    assert seen(new) == seen(old)
    ports, queues, totals = seen(new)
    assert ports == {"up": "mid.r", "down": "mid.l"}
    assert queues["up"][2:] == ([0, 1, 2], [0, 1, 2]) and queues["down"][3] == [10, 11, 12]
    assert (totals["up"].sent_pkts, totals["up"].drops, totals["down"].drops) == (60, 7, 2)
    swapped = cell("swapped", "# devices up=mid.r down=mid.l", BottleneckPorts(up="mid.l", down="mid.r"))
    assert list(swapped.queues["up"].drops) == [10, 11, 12] and metrics._qdisc_totals(swapped)["up"].drops == 2
    absent = cell("absent", "# devices mid.r mid.l", BottleneckPorts(up="mid.x", down="mid.l"))
    assert set(absent.queues) == set(metrics._qdisc_totals(absent)) == {"down"}
    gone = cell("gone", "# devices mid.r mid.l", BottleneckPorts(up="mid.x", down="mid.y"))
    assert gone.queues == {} and metrics._qdisc_totals(gone) == {}


def test_dualpi2_reports_both_queues():
    """dualpi2's own sojourn times (µs in tc's JSON) and its L-queue counters."""
    rows = [{"t": float(t), "kind": "dualpi2", "backlog": 0, "qlen": 0, "drops": 0, "ecn-mark": 2 * t,
             "step-mark": t, "delay-c": 15000, "delay-l": 800, "pkts-in-c": 10 * t, "pkts-in-l": 30 * t}
            for t in range(3)]
    s = queue.summary(queue._series(rows), 0.0, (0, 2), _config(), "up")
    assert s.marks == 4 and s.step_marks == 2 and s.pkts_in_l == 60 and s.pkts_in_c == 20
    assert s.delay_c_ms.p95 == 15.0 and np.isclose(s.delay_l_ms.mean, 0.8)
    assert {"delay_c_ms", "delay_l_ms", "pkts_in_c", "pkts_in_l", "step_marks"} <= s.model_dump().keys()


CAP10 = {"up": Capacity(mean_mbit=10 * 1448 / 1514, peak_mbit=10 * 1448 / 1514)}  # a 10 Mbit/s link's


def test_bulk_flows_that_never_fill_the_link_are_flagged():
    """The best 1 s of aggregate goodput (two flows' bytes delivered per second) against 90 % of the
    payload capacity (9.56 Mbit/s at 10 Mbit/s), judged only where nothing but the rate
    limits bulk TCP flows."""
    edges = np.arange(0.0, 4.0)
    peak = delivery.peak_mbit([np.diff([0, 1e6, 2e6, 2.5e6]), np.diff([0, 0, 0.1e6, 0.2e6])], edges)
    assert np.isclose(peak, 8.8)
    config = _config()
    assert metrics._unfilled({"up": 8.8}, CAP10, config, {}) == []  # 92 %
    (unfilled,) = metrics._unfilled({"up": 8.0}, CAP10, config, {})
    assert (unfilled.kind, unfilled.code) == ("calibration", "link_unfilled")
    assert str(unfilled) == ("calibration: up goodput peaked at 8 Mbit/s (84% of the payload capacity) in its best "
                             "1 s: bulk TCP flows should fill the link")
    for other in ({"client_qdisc": "tbf rate 5mbit"}, {"udp": "5mbit"}, {"rate_schedule": []}, {"test": "rrul"},
                  {"tunnel": "wireguard"}, {"netem": {"up": ["loss", "1%"], "down": []}}):
        assert metrics._unfilled({"up": 1.0}, CAP10, _config(**other), {}) == [], other


def test_an_unfilled_link_with_a_standing_queue_blames_the_shaper():
    """A queue that stays backlogged while the link goes unfilled: the shaper (the middlebox's
    CPU) sent too little, not the flows (seen in CI: 573 packets on average, 86 % of the rate)."""
    def queue_of(mean_pkts: float) -> QueueSummary:
        spread = Spread(mean=mean_pkts, p95=mean_pkts, max=mean_pkts)
        return QueueSummary(kind="pfifo", samples=80, interval_s=0.1, backlog_bytes=None, backlog_pkts=spread,
                            delay_ms=None, drops=0, marks=0)
    (standing,) = metrics._unfilled({"up": 8.0}, CAP10, _config(), {"up": queue_of(573)})
    assert (standing.kind, standing.code) == ("calibration", "shaper_short")
    assert standing.text == ("up goodput peaked at 8 Mbit/s (84% of the payload capacity) in its best 1 s: its queue "
                             "held 573 packets on average meanwhile, so the shaper sent below its rate (the middlebox "
                             "short of CPU), not the flows")
    assert metrics._unfilled({"up": 8.0}, CAP10, _config(), {"up": queue_of(2)})[0].code == "link_unfilled"


def test_a_steady_window_across_a_rate_step_begins_after_it(scenario_file):
    """Steady state is at one rate: s2's window (40 s ending at 64 s) crosses its step at
    30 s, so D_SS is taken from a sample's span after the step; a window the step does not
    cross is kept whole, and a step after the window's end changes nothing."""
    path = scenario_file("test: tcp_1up\nrate: 50mbit\nqdisc: pfifo\ncc: cubic\nlength: 60\n"
                         "rate_schedule: [{at: 30s, rate: 1mbit}]\n")
    (cell,) = expand(load_scenario(path), path)
    assert metrics.steady_start(24.0, 64.0, cell.config) == 30.0 + metrics.RATE_SAMPLE_SPAN
    assert metrics.steady_start(31.5, 64.0, cell.config) == 31.5
    assert metrics.steady_start(10.0, 29.0, cell.config) == 10.0
    assert metrics.steady_start(24.0, 30.5, cell.config) == 30.5  # never past the window's end


def test_the_dataset_names_the_fl_commit_and_the_cc_modules_each_row_ran_with():
    """A run resumed across commits: each row says its cell's fl commit, and its congestion
    controls' modules with the parameters of the one fl built (tcp_prague's sha256, each
    parameter, a value with spaces quoted), read from the recorded cell of the corpus."""
    corpus = Path(__file__).parents[1] / "fixtures" / "corpus" / "vm-dualpi2-prague"
    rec = files.read(CellRecord, corpus / "cell.json")
    prague = rec.cc_modules["prague"]
    cell = CellResult("s", corpus, rec.model_copy(update={"fl": rec.fl.model_copy(update={"dirty": True})}))
    run = RunResult("r", Path("r"), RunRecord(run="r"), [ScenarioResult("s", corpus, SimpleNamespace(), [cell])])
    (row,) = {r["cell"]: r for r in rows(run)}.values()
    assert row["fl_commit"] == rec.fl.commit and row["fl_dirty"] is True
    words = dict(w.split("=", 1) for w in shlex.split(row["cc_modules"].split("; ")[1]) if "=" in w)
    assert row["cc_modules"].startswith("tcp_cubic") and f"sha256:{prague.sha256[:12]}" in row["cc_modules"]
    assert words == prague.parameters and words["implementation"].startswith("fl tcp_prague")
