"""The end-of-run summary: per scenario, ok / failed / skipped cells with reasons."""
from __future__ import annotations

from ..results import CellRecord
from .planning import ScenarioPlan


def print_summary(plans: list[ScenarioPlan], records: list[CellRecord], interrupted: bool,
                  vm_hint: bool = False) -> int:
    for sp in plans:
        mine = [r for r in records if r.scenario == sp.name]
        count = {s: sum(r.status == s for r in mine) for s in ("ok", "failed", "skipped", "interrupted")}
        print(f"\n{sp.name}: {len(sp.planned)} cells — {count['ok']} ok, {count['failed']} failed, "
              f"{count['skipped']} skipped, {len(sp.cells('done'))} already done"
              + (", interrupted" if interrupted else ""))
        for status in ("skipped", "failed", "interrupted"):
            for r in mine:
                if r.status == status:
                    print(f"  {status:<11} {r.cell}: {r.reason}")
        print(f"results: {sp.store.root}")
    skipped = sum(r.status == "skipped" for r in records)
    if vm_hint and skipped:
        _print_vm_hint(skipped)
    if interrupted:
        return 130
    return 1 if any(r.status == "failed" for r in records) else 0


def _print_vm_hint(skipped: int) -> None:
    from ..errors import FlError
    from ..testbed.vm import resolve_kernel
    try:
        _, release = resolve_kernel("auto")
    except FlError:
        return
    print(f"\n{skipped} cell(s) need kernel features this host lacks. A VM kernel is available "
          f"({release}): add --vm to run them there (virtual time: exact, ~3x slower).")
