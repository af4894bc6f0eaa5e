"""The video flow took effect (scenario key video): in the captures, frames left the
client at the declared frame rate (±2 %) and mean rate (±5 %) with the declared ECN
codepoint on at least 99 % of their datagrams, and frames reached the server."""
from __future__ import annotations

from ...analysis.cell_files import CellFiles
from ...analysis.video import video_flow
from ...results.cell_record import Effect

FPS_TOLERANCE, RATE_TOLERANCE, CODEPOINT_MIN_PCT = 0.02, 0.05, 99.0


def check(files: CellFiles) -> list[Effect]:
    video = files.config.video
    if video is None:
        return []
    flow = video_flow(files.datagrams("cli"), files.datagrams("srv"), video)
    if isinstance(flow, str):
        return [Effect(feature="video flow", ok=False, evidence=flow)]
    problems = []
    if abs(flow.sent_fps - video.fps) > FPS_TOLERANCE * video.fps:
        problems.append(f"{flow.sent_fps:.2f} frames/s sent, not {video.fps}")
    if abs(flow.sent_mbit - flow.declared_mbit) > RATE_TOLERANCE * flow.declared_mbit:
        problems.append(f"{flow.sent_mbit:.3f} Mbit/s sent, not {video.rate}")
    if flow.codepoint_pct < CODEPOINT_MIN_PCT:
        problems.append(f"{video.codepoint} on only {flow.codepoint_pct:.1f} % of its datagrams")
    if not flow.frames_received:
        problems.append("no frame reached the server whole")
    evidence = (f"{flow.frames_sent} frames sent at {flow.sent_fps:.2f}/s, {flow.sent_mbit:.3f} Mbit/s, "
                f"{video.codepoint} on {flow.codepoint_pct:.1f} %; {flow.frames_received} arrived whole")
    return [Effect(feature="video flow", ok=not problems, evidence="; ".join(problems) or evidence)]
