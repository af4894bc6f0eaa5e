"""The `fl` command line: list, run, check, clean, plot, compare, push, image."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import REPO, log
from .errors import FlError

if TYPE_CHECKING:
    from .testbed.vm import VmConfig


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    log.setup(getattr(args, "verbose", False))
    try:
        rc: int = args.func(args)  # the subcommand's cmd_*
        return rc
    except FlError as e:
        print(f"fl: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `fl list … | head` (an OSError: first)
        sys.stderr.close()
        return 0
    except OSError as e:  # the machine's refusal (a full disk, a name too long, no permission)
        from .run.space import disk_full
        where = f": {str(e.filename)[:100]!r}" if e.filename else ""
        print(f"fl: error: {disk_full(e) or (e.strerror or type(e).__name__) + where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fl: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fl", description="Declarative congestion-control and AQM "
                                "experiments: scenario matrix → Ansible testbed → Flent.")
    sub = p.add_subparsers(dest="command", required=True)

    lst = sub.add_parser("list", help="print scenarios' cells, their count and estimated time")
    lst.add_argument("names", nargs="*", metavar="NAME",
                     help="scenarios in scenarios/ or paths (one probe for all); none lists the scenarios")
    _common(lst)
    lst.add_argument("--parallel", type=int, default=None, metavar="N",
                     help="estimate for N testbeds at once, as fl run --parallel N")
    _vm_options(lst)
    lst.set_defaults(func=cmd_list)

    run = sub.add_parser("run", help="run scenarios' cells (resumes: completed cells are kept)")
    run.add_argument("names", nargs="+", metavar="NAME",
                     help="scenario in scenarios/ or a path to a scenario file (one or more)")
    _common(run)
    run.add_argument("--dry-run", action="store_true", help="print what would be done, touch nothing")
    run.add_argument("--force", action="store_true", help="re-run cells that already completed")
    run.add_argument("--parallel", type=int, default=None, metavar="N",
                     help="run N testbeds at once: namespace testbeds or VMs (one per core), or the "
                     "inventory's ssh testbeds (default: 1; all of an ssh inventory's)")
    run.add_argument("--load-modules", action="store_true",
                     help="load fl's modules (TCP Prague, dualpi2: fl modules build) into the testbeds' kernels "
                     "first, built for each kernel's release where not yet built")
    run.add_argument("--host-wait", type=_seconds, default=60.0, metavar="SECONDS",
                     help="how long an ssh host lost mid-run may take to answer again (a reboot, say) before "
                     "its testbed takes no more cells (default: 60)")
    _vm_options(run)
    run.set_defaults(func=cmd_run)

    chk = sub.add_parser("check", help="tools, kernel qdiscs and congestion controls, privileges")
    _vm_options(chk)
    chk.set_defaults(func=cmd_check)

    cln = sub.add_parser("clean", help="remove what a killed run left (only what fl created)")
    cln.add_argument("--forget", metavar="ID", action="append", default=[],
                     help="drop testbed ID's state without reaching its hosts (hosts gone for good: what fl "
                     "changed on them stays there); repeatable")
    cln.set_defaults(func=cmd_clean)

    plot = sub.add_parser("plot", help="metrics, plots, tables, dataset and the results index of a run")
    plot.add_argument("--run", default="default", help="results/<RUN>/ folder (default: default)")
    plot.add_argument("--results", type=Path, default=REPO / "results", help=argparse.SUPPRESS)
    plot.add_argument("--jobs", type=int, default=None, help="parallel workers (default: one per core)")
    plot.add_argument("--template-dir", type=Path, default=REPO,
                      help="folder with README.md.j2 and templates/ (default: the repository's)")
    plot.add_argument("--junit", type=Path, metavar="FILE", help="write the scenarios' expectations as JUnit XML")
    plot.add_argument("--strict", action="store_true", help="exit 1 when an expectation is missed")
    plot.set_defaults(func=cmd_plot)

    cmp = sub.add_parser("compare", help="compare runs (or one axis within a run) cell by cell: Δ, 95 %% CI, "
                         "verdicts, what differs")
    cmp.add_argument("runs", nargs="+", metavar="RUN", help="run labels (results/RUN/) or run folders: the "
                     "first is the baseline; one run with --by")
    cmp.add_argument("--by", metavar="AXIS", help="compare the values of AXIS within one run (the first as baseline)")
    cmp.add_argument("--baseline", metavar="VALUE", help="with --by: the value compared against (default: the first)")
    cmp.add_argument("--match", metavar="AXES", help="comma-separated axes cells are also matched on (fixed ones too)")
    cmp.add_argument("--ignore", metavar="AXES", help="comma-separated swept axes cells are not matched on")
    cmp.add_argument("--out", help="results/<OUT>/ for the page (default: compare-A-vs-B… or compare-RUN-by-AXIS)")
    cmp.add_argument("--results", type=Path, default=REPO / "results", help=argparse.SUPPRESS)
    cmp.add_argument("--jobs", type=int, default=None, help="parallel workers for metrics (default: one per core)")
    cmp.add_argument("--template-dir", type=Path, default=REPO, help=argparse.SUPPRESS)
    cmp.set_defaults(func=cmd_compare)

    push = sub.add_parser("push", help="publish a run folder and its index to a web server, check its links")
    push.add_argument("--run", default="default", help="results/<RUN>/ folder (default: default)")
    push.add_argument("--results", type=Path, default=REPO / "results", help=argparse.SUPPRESS)
    push.add_argument("--dest", help="local directory or [user@]host:path served by the web server "
                      "(default: the inventory's fl_push_dest)")
    push.add_argument("--url", help="http(s) URL of that directory, to check the pushed links "
                      "(default: the inventory's fl_push_url)")
    push.add_argument("--rsh", help="ssh command rsync uses for user@host:path (default: the inventory's "
                      "fl_push_rsh, else 'ssh -o BatchMode=yes')")
    push.add_argument("--inventory", type=Path, default=REPO / "inventory.ini", help=argparse.SUPPRESS)
    push.set_defaults(func=cmd_push)

    img = sub.add_parser("image", help="kernel-under-test images for --vm NAME (recipes in images/)")
    img_sub = img.add_subparsers(dest="image_command", required=True)
    b = img_sub.add_parser("build", help="build an image from images/NAME.yml into the cache (cached if unchanged)")
    b.add_argument("name", metavar="NAME", help="recipe in images/ or a path to a recipe file")
    b.add_argument("--force", action="store_true", help="rebuild even if the cached image is current")
    b.set_defaults(func=cmd_image_build)
    il = img_sub.add_parser("list", help="built images (kernel, size, what they support, age) and recipes")
    il.set_defaults(func=cmd_image_list)
    rm = img_sub.add_parser("rm", help="remove a built image from the cache")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=cmd_image_rm)

    mods = sub.add_parser("modules", help="fl's modules (an image recipe's: TCP Prague, dualpi2) for a host's kernel")
    mods_sub = mods.add_subparsers(dest="modules_command", required=True)
    mb = mods_sub.add_parser("build", help="build them for a kernel release from its Debian headers (cached); "
                             "fl run --load-modules loads them on the hosts")
    mb.add_argument("--release", metavar="RELEASE", help="the kernel's `uname -r` (default: this machine's)")
    mb.add_argument("--recipe", default="l4s", metavar="NAME", help="the image recipe whose modules (default: l4s)")
    mb.add_argument("--suite", metavar="SUITE", help="the Debian suite holding linux-headers-RELEASE "
                    "(default: the recipe's kernel suite)")
    mb.add_argument("--force", action="store_true", help="rebuild even if built for this recipe")
    mb.set_defaults(func=cmd_modules_build)
    for command in (*sub.choices.values(), *img_sub.choices.values()):
        command.add_argument("-v", "--verbose", action="store_true",
                             help="print debug messages too (fl run and fl plot always write them to debug.log)")
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="default", help="results/<RUN>/ folder (default: default)")
    p.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="only cells matching a glob or substring (repeatable)")
    p.add_argument("--results", type=Path, default=REPO / "results", help=argparse.SUPPRESS)


def _vm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("VM backend (run inside a VM booted with another kernel)")
    g.add_argument("--vm", nargs="?", const="auto", metavar="KERNEL",
                   help="a built image's name (./fl image list), a kernel image, or 'auto' (newest in "
                   "/boot with modules); default: this kernel")
    g.add_argument("--vm-accel", choices=("auto", "kvm", "tcg"),
                   help="kvm when usable, else tcg (default auto)")
    g.add_argument("--vm-clock", choices=("auto", "virtual", "real"),
                   help="virtual: QEMU icount, deterministic and faithful, ~3x slower (default on tcg)")
    g.add_argument("--vm-cpus", type=int, default=None, help="vCPUs (1 with the virtual clock)")
    g.add_argument("--vm-memory", help="guest memory (default 1G)")
    g.add_argument("--vm-append", metavar="WORDS", help="kernel command line words for the guest, e.g. "
                   "'tcp_prague.rtt_indep=1' (a module's parameters at boot)")
    p.add_argument("--inventory", type=Path, default=REPO / "inventory.ini",
                   help="Ansible inventory of the testbed (and its fl_vm_* settings)")


def _seconds(raw: str) -> float:
    """A duration on the command line: 90 or 90s; at least 1 s."""
    from .scenario.values import parse_seconds
    try:
        value: float | str = float(raw)  # a plain number: seconds
    except ValueError:
        value = raw  # with its unit
    try:
        seconds = parse_seconds(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not 1 <= seconds < float("inf"):  # nan too
        raise argparse.ArgumentTypeError(f"{raw!r}: at least 1 s")
    return seconds


def _vm(args: argparse.Namespace) -> VmConfig | None:
    """The VM to use: --vm options, else fl_vm_* settings of the inventory; None for none."""
    from .testbed.inventory import vm_settings
    from .testbed.vm import vm_config
    inv = vm_settings(args.inventory)
    kernel = args.vm or inv.get("kernel")
    if not kernel:
        return None
    cpus = args.vm_cpus or (int(inv["cpus"]) if inv.get("cpus", "").isdigit() else None)
    return vm_config(kernel, args.vm_accel or inv.get("accel", "auto"), args.vm_clock or inv.get("clock", "auto"),
                     cpus, args.vm_memory or inv.get("memory", "1G"), args.vm_append or inv.get("append"))


def cmd_run(args: argparse.Namespace) -> int:
    from .run.context import RunOptions
    from .run.runner import run_scenarios
    from .scenario import find_scenario
    opts = RunOptions(run=args.run, only=args.only, force=args.force, dry_run=args.dry_run,
                      inventory=args.inventory, results=args.results, parallel=args.parallel, vm=_vm(args),
                      load_modules=args.load_modules, host_wait_s=args.host_wait)
    return run_scenarios([find_scenario(name) for name in args.names], opts)


def cmd_list(args: argparse.Namespace) -> int:
    from .listing import list_all, list_cells
    from .scenario import find_scenario
    if not args.names:
        return list_all()
    return list_cells([find_scenario(n) for n in args.names], args.run, args.only, args.results, _vm(args),
                      args.inventory, args.parallel)


def cmd_check(args: argparse.Namespace) -> int:
    from .check import check
    return check(_vm(args), args.inventory)


def cmd_plot(args: argparse.Namespace) -> int:
    from .report.pipeline import build
    from .scenario.values import valid_name
    valid_name(args.run, "run name")
    return build(args.results / args.run, args.jobs, args.template_dir, args.junit, args.strict)


def cmd_compare(args: argparse.Namespace) -> int:
    from .report.compare_cli import CompareRequest, compare_command
    request = CompareRequest(args.runs, args.by, args.baseline, args.match, args.ignore, args.out, args.jobs)
    return compare_command(request, args.results, args.template_dir)


def cmd_push(args: argparse.Namespace) -> int:
    from .report.push import push
    from .scenario.values import valid_name
    from .testbed.inventory import prefixed_settings
    valid_name(args.run, "run name")
    conf = prefixed_settings(args.inventory, "fl_push_") if not (args.dest and args.url and args.rsh) else {}
    dest, url = args.dest or conf.get("dest"), args.url or conf.get("url")
    rsh = args.rsh or conf.get("rsh") or "ssh -o BatchMode=yes"
    if not dest:
        raise FlError("no destination: give --dest or set fl_push_dest in the inventory")
    return push(args.results / args.run, dest, url, rsh)


def cmd_clean(args: argparse.Namespace) -> int:
    from .clean import clean, forget
    return forget(args.forget) if args.forget else clean()


def cmd_image_build(args: argparse.Namespace) -> int:
    from .image.build import build
    build(args.name, args.force)
    return 0


def cmd_modules_build(args: argparse.Namespace) -> int:
    import platform

    from .image.kit import build_kit, kit_folder
    release = args.release or platform.release()
    kit = build_kit(release, args.recipe, args.suite, args.force)
    print(f"modules for {release} ({kit.recipe}; Debian {kit.kernel_version}, {kit.suite}): {kit_folder(release)}")
    for m in kit.modules:
        print(f"  {m.path}  sha256 {m.sha256[:16]}…  {m.source}")
    return 0


def cmd_image_list(args: argparse.Namespace) -> int:
    from .image.listing import print_images
    return print_images()


def cmd_image_rm(args: argparse.Namespace) -> int:
    from .image.store import remove
    remove(args.name)
    print(f"image {args.name}: removed")
    return 0
