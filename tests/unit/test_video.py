"""The video flow: its scenario key, what iperf gets, and its frames and their delays
from captures built here with known frame boundaries, losses, marks and delays."""
from __future__ import annotations

import socket
from pathlib import Path

import dpkt
import numpy as np
import pytest

from flharness.analysis.capture import read_udp
from flharness.analysis.video import frames, video_datagrams, video_flow
from flharness.hosts import VIDEO_PORT
from flharness.results.cell_record import VideoConfig
from flharness.scenario.features import parse_video

CLI, SRV = "10.9.1.1", "10.9.2.1"
FPS, FRAMES, DATAGRAM = 60, 50, 1472
BASE_DELAY_S, GROWTH_S, SPACING_S = 0.005, 0.0002, 0.0001  # path, queue growth per frame, within a frame
LOST_FRAME, MARKED_FRAME, BLEACHED_FRAME = 7, 10, 20


def _udp_pcap(path: Path, datagrams: list[tuple[float, str, int, str, int, int, int, int]]) -> Path:
    """DATAGRAMS: (time, sender, sport, receiver, dport, first payload word, payload bytes, tos)."""
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=128)
        for ts, a, sport, b, dport, word, size, tos in sorted(datagrams):
            data = word.to_bytes(4, "big", signed=True) + b"\0" * (size - 4)
            udp = dpkt.udp.UDP(sport=sport, dport=dport, data=data)
            udp.ulen = 8 + size
            ip = dpkt.ip.IP(src=socket.inet_aton(a), dst=socket.inet_aton(b), p=17, tos=tos, data=udp)
            ip.len = 20 + 8 + size
            w.writepkt(bytes(dpkt.ethernet.Ethernet(type=0x0800, data=ip))[:128], ts=ts)
    return path


def _frame_sizes(k: int) -> list[int]:
    """Frame K: 1 to 4 datagrams, the last one short."""
    return [DATAGRAM] * (k % 4) + [200 + k]


def _captures(tmp_path: Path) -> tuple[Path, Path]:
    """The client's and server's captures of FRAMES frames at FPS: frame K's datagrams leave
    SPACING_S apart and arrive BASE_DELAY_S + K × GROWTH_S later; one datagram of LOST_FRAME
    never arrives, MARKED_FRAME arrives CE, BLEACHED_FRAME's first datagram left Not-ECT; the
    server sees one datagram twice; iperf's closing datagram (negated number) and the
    server's report travel too."""
    sent, received, number = [], [], 0
    for k in range(FRAMES):
        for j, size in enumerate(_frame_sizes(k)):
            number += 1
            t = 10 + k / FPS + j * SPACING_S
            tos = 0 if (k, j) == (BLEACHED_FRAME, 0) else 1
            sent.append((t, CLI, 40000, SRV, VIDEO_PORT, number, size, tos))
            if (k, j) != (LOST_FRAME, 0):
                received.append((t + BASE_DELAY_S + k * GROWTH_S, CLI, 40000, SRV, VIDEO_PORT, number, size,
                                 3 if k == MARKED_FRAME else tos))
    received.append((received[5][0] + 1e-5, *received[5][1:]))  # a duplicate
    end = 10 + FRAMES / FPS
    sent.append((end, CLI, 40000, SRV, VIDEO_PORT, -(number + 1), DATAGRAM, 1))
    received += [(end + 0.01, CLI, 40000, SRV, VIDEO_PORT, -(number + 1), DATAGRAM, 1),
                 (end + 0.02, SRV, VIDEO_PORT, CLI, 40000, 0, 128, 0)]
    return _udp_pcap(tmp_path / "cli.pcap", sent), _udp_pcap(tmp_path / "srv.pcap", received)


CONFIG = VideoConfig(rate="2mbit", fps=FPS, codepoint="ect1")


def test_frames_are_the_bursts_the_client_sent_and_arrive_with_their_last_datagram(tmp_path):
    cli, srv = _captures(tmp_path)
    f = frames(video_datagrams(read_udp(cli)), video_datagrams(read_udp(srv)), FPS)
    k = np.arange(FRAMES)
    assert list(f.datagrams) == [len(_frame_sizes(i)) for i in k]
    assert list(f.payload) == [sum(_frame_sizes(i)) for i in k]
    assert np.allclose(f.start, 10 + k / FPS, atol=2e-6)
    delay = f.done - f.start
    expected = (f.datagrams - 1) * SPACING_S + BASE_DELAY_S + k * GROWTH_S
    assert np.isnan(delay[LOST_FRAME]) and np.isnan(delay).sum() == 1
    others = k != LOST_FRAME
    assert np.allclose(delay[others], expected[others], atol=3e-6)


def test_the_flows_figures(tmp_path):
    cli, srv = _captures(tmp_path)
    v = video_flow(read_udp(cli), read_udp(srv), CONFIG)
    assert not isinstance(v, str), v
    n_sent = sum(len(_frame_sizes(k)) for k in range(FRAMES))
    assert (v.frames_sent, v.frames_received, v.datagrams_sent, v.datagrams_received) == (FRAMES, FRAMES - 1, n_sent, n_sent - 1)
    assert v.frame_loss_pct == pytest.approx(100 / FRAMES)
    # complete frames over the server's span: the queue stretches it by GROWTH_S a frame
    last, first = FRAMES - 1, 0
    arrivals = last * (1 / FPS + GROWTH_S) + (len(_frame_sizes(last)) - len(_frame_sizes(first))) * SPACING_S
    assert v.sent_fps == pytest.approx(FPS, rel=1e-4) and v.received_fps == pytest.approx((FRAMES - 2) / arrivals, rel=1e-4)
    payload = sum(sum(_frame_sizes(k)) for k in range(FRAMES))
    assert v.sent_mbit == pytest.approx(payload * 8 * FPS / FRAMES / 1e6, rel=1e-4)
    lost = _frame_sizes(LOST_FRAME)[0]
    assert v.received_mbit == pytest.approx((payload - lost) * 8 * FPS / FRAMES / 1e6, rel=1e-4)
    assert v.codepoint_pct == pytest.approx(100 * (n_sent - 1) / n_sent)
    assert v.ce_pct == pytest.approx(100 * len(_frame_sizes(MARKED_FRAME)) / n_sent)  # n_sent - 1 arrived, one twice
    k = np.array([i for i in range(FRAMES) if i != LOST_FRAME])
    delays = ((np.array([len(_frame_sizes(i)) for i in k]) - 1) * SPACING_S + BASE_DELAY_S + k * GROWTH_S) * 1e3
    assert v.frame_delay_ms is not None and v.frame_delay_ms.n == FRAMES - 1
    assert v.frame_delay_ms.median == pytest.approx(np.median(delays), abs=0.01)
    assert v.frame_delay_ms.p99 == pytest.approx(np.percentile(delays, 99), abs=0.01)
    assert v.frame_delay_max_ms == pytest.approx(delays.max(), abs=0.01)


def test_a_missing_flow_is_said(tmp_path):
    empty = _udp_pcap(tmp_path / "e.pcap", [])
    assert "no video datagrams" in str(video_flow(read_udp(empty), read_udp(empty), CONFIG))
    assert "could not be read" in str(video_flow("the cli capture could not be read (gone)", read_udp(empty), CONFIG))


def test_the_scenario_key_and_what_iperf_gets():
    v, label = parse_video({"rate": "1.79mbit", "fps": 30, "sd": "0.3mbit", "codepoint": "ect1", "dscp": 10})
    assert v is not None and label == "video1.79mbit-30fps-ect1-sd0.3mbit-dscp10"
    assert v.isochronous == "30:1790000,300000" and v.tos == 10 << 2 | 1
    fixed, _ = parse_video({"rate": "2mbit", "fps": 60, "codepoint": "not-ect"})
    assert fixed is not None and fixed.isochronous == "60:2000000,0" and fixed.tos == 0
    assert parse_video("none") == (None, "novideo")


@pytest.mark.parametrize("raw, words", [
    ("2mbit", "mapping"),
    ({"rate": "2mbit", "fps": 60}, "codepoint missing"),
    ({"rate": "2mbit", "fps": 0, "codepoint": "ect1"}, "fps 0"),
    ({"rate": "2mbit", "fps": 30.5, "codepoint": "ect1"}, "fps 30.5"),
    ({"rate": "2mbit", "fps": 60, "codepoint": "ce"}, "codepoint 'ce'"),
    ({"rate": "2mbit", "fps": 60, "codepoint": "ect1", "dscp": 64}, "dscp 64"),
    ({"rate": "2mbit", "fps": 60, "codepoint": "ect1", "burst": 3}, "unknown key 'burst'"),
    ({"rate": "2 mbit; reboot", "fps": 60, "codepoint": "ect1"}, "not a tc rate"),
])
def test_bad_video_values_are_refused_with_the_key(raw, words):
    with pytest.raises(ValueError, match=words):
        parse_video(raw)
