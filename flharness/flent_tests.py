"""The Flent tests fl knows how to drive: how many flows each has and which way they go."""
from __future__ import annotations

from dataclasses import dataclass

#: Flent's default lead-in and lead-out (-d), seconds: its ping runs alone this long
#: before the flows start and after they end (a scenario's `lead:` changes it).
FLENT_LEAD_S = 5


@dataclass(frozen=True)
class FlentTest:
    name: str
    up: int  # TCP flows cli → srv
    down: int  # TCP flows srv → cli
    per_flow: bool  # accepts per-flow lists (cc_algos, markings, stream_delays)
    streams_param: str | None = None  # test parameter giving the flow count (tcp_nup)

    @property
    def flows(self) -> int:
        return self.up + self.down


def _catalog() -> dict[str, FlentTest]:
    tests = [
        FlentTest("tcp_1up", 1, 0, per_flow=True),
        FlentTest("tcp_1down", 0, 1, per_flow=False),
        FlentTest("tcp_bidirectional", 1, 1, per_flow=False),
        FlentTest("rrul", 4, 4, per_flow=False),
        FlentTest("rrul_be", 4, 4, per_flow=False),
        FlentTest("tcp_nup", 0, 0, per_flow=True, streams_param="upload_streams"),
        FlentTest("tcp_ndown", 0, 0, per_flow=True, streams_param="download_streams"),
    ]
    for n in (2, 4, 6, 8, 12):
        tests.append(FlentTest(f"tcp_{n}up", n, 0, per_flow=True))
        tests.append(FlentTest(f"tcp_{n}down", 0, n, per_flow=True))
    return {t.name: t for t in tests}


FLENT_TESTS = _catalog()
#: What Flent runs in a cell whose flows are all schemes' (user-space programs): its ping
#: alone, over the lead-in, the test and the lead-out (ping.conf has no lead of its own).
PING = FlentTest("ping", 0, 0, per_flow=False)


def flow_count(test: FlentTest, flows: int | None) -> int:
    """Flows of a cell: fixed by the test, or given by the scenario for tcp_nup/tcp_ndown."""
    if test.streams_param:
        assert flows is not None, f"{test.name} needs its flow count"  # cells/resolve.py checks it
        return flows
    return test.flows
