"""The video flow (scenario key `video`) from the two captures: its frames told apart in
the client's, followed into the server's.

iperf numbers its datagrams from 1 (the payload's first word; the one that ends the test
is negated). A frame is a burst: a datagram the client sent less than a quarter of the
frame interval after the one before belongs to that one's frame (iperf writes a frame's
datagrams back to back, then waits for the next frame's time). Datagrams are matched
between the captures by their number, so a frame is received when all of its arrived, at
the time its last one did; its delay runs from its first datagram leaving the client.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..ecn import CE
from ..hosts import VIDEO_PORT
from ..results.cell_metrics import Percentiles, Spread, VideoFlow
from ..results.cell_record import CODEPOINT_WORDS, VideoConfig
from .capture import Datagrams

#: A gap longer than this share of the frame interval starts a new frame.
GAP_SHARE = 0.25


@dataclass(frozen=True)
class Frames:
    """A video flow's frames, in the order sent (one entry per frame)."""

    start: NDArray[np.float64]  # first datagram in the client's capture
    datagrams: NDArray[np.int64]
    payload: NDArray[np.int64]  # UDP payload bytes
    done: NDArray[np.float64]  # last datagram in the server's capture; NaN if one never arrived


def video_datagrams(d: Datagrams) -> Datagrams:
    """The video flow's data datagrams in a capture: to the video port, numbered from 1."""
    return d.take((d.dport == VIDEO_PORT) & (d.first_word > 0))


def frames(sent: Datagrams, received: Datagrams, fps: int) -> Frames:
    """Frames of the datagrams SENT (client's capture, in send order) and the times the
    RECEIVED ones (server's capture) arrived."""
    order = np.argsort(sent.ts, kind="stable")
    ts, number, payload = sent.ts[order], sent.first_word[order], sent.payload[order]
    starts = np.flatnonzero(np.diff(ts, prepend=-np.inf) > GAP_SHARE / fps)
    frame_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(ts))))
    arrived = _arrival(number, received)
    n = len(starts)
    last = np.full(n, -np.inf)
    np.maximum.at(last, frame_of, np.where(np.isnan(arrived), np.inf, arrived))
    return Frames(start=ts[starts], datagrams=np.bincount(frame_of, minlength=n).astype(np.int64),
                  payload=np.bincount(frame_of, weights=payload, minlength=n).astype(np.int64),
                  done=np.where(np.isinf(last), np.nan, last))


def _arrival(number: NDArray[np.int64], received: Datagrams) -> NDArray[np.float64]:
    """When each numbered datagram first appeared in the server's capture (NaN: never)."""
    known, first = np.unique(received.first_word, return_index=True)  # a duplicate counts at its first copy
    out = np.full(len(number), np.nan)
    if len(known):
        pos = np.minimum(np.searchsorted(known, number), len(known) - 1)
        hit = known[pos] == number
        out[hit] = received.ts[first[pos[hit]]]
    return out


def video_flow(cli: Datagrams | str, srv: Datagrams | str, config: VideoConfig) -> VideoFlow | str:
    """The flow's figures from the cell's captured datagrams (CLI's, SRV's), or why there
    are none (text)."""
    if isinstance(cli, str) or isinstance(srv, str):
        return f"{cli if isinstance(cli, str) else srv}: no video figures"
    sent, received = video_datagrams(cli), video_datagrams(srv)
    if len(sent) < 2:
        return "the client's capture has no video datagrams (iperf did not send)"
    f = frames(sent, received, config.fps)
    if len(f.start) < 2:
        return "the client's capture holds a single frame"
    span = (f.start[-1] - f.start[0]) * len(f.start) / (len(f.start) - 1)  # n frame intervals
    complete = ~np.isnan(f.done)
    got = received.first_word
    delay = (f.done - f.start)[complete] * 1e3
    return VideoFlow(
        declared_mbit=config.rate_bps / 1e6, declared_fps=config.fps,
        frames_sent=len(f.start), frames_received=int(complete.sum()),
        frame_loss_pct=100 * float((~complete).mean()),
        datagrams_sent=len(sent), datagrams_received=len(np.unique(got)),
        sent_fps=(len(f.start) - 1) / (f.start[-1] - f.start[0]),
        received_fps=_rate(np.sort(f.done[complete])),
        sent_mbit=float(f.payload.sum()) * 8 / span / 1e6,
        received_mbit=float(received.payload[np.unique(got, return_index=True)[1]].sum()) * 8 / span / 1e6,
        frame_bytes=Spread(mean=float(f.payload.mean()), p95=float(np.percentile(f.payload, 95)), max=float(f.payload.max())),
        codepoint_pct=100 * float(((sent.tos & 3) == CODEPOINT_WORDS[config.codepoint]).mean()),
        ce_pct=100 * float(((received.tos & 3) == CE).mean()) if len(received) else 0.0,
        frame_delay_ms=Percentiles(median=float(np.median(delay)), p95=float(np.percentile(delay, 95)),
                                   p99=float(np.percentile(delay, 99)), n=len(delay)) if len(delay) else None,
        frame_delay_max_ms=float(delay.max()) if len(delay) else None)


def _rate(done: NDArray[np.float64]) -> float | None:
    """Events per second from their sorted times (first to last)."""
    return (len(done) - 1) / (done[-1] - done[0]) if len(done) > 1 and done[-1] > done[0] else None
