#!/bin/sh
# Runs first inside an fl VM guest, then execs the fl command given as arguments.
# virtme-ng shares the host's / read-only over 9p without caching, so every Python
# start re-reads its modules from the host. fl adds a second, cached (cache=loose)
# read-only share of / (mount tag "flro") and binds the read-mostly trees over it:
# Python, Flent, tools and the virtualenv then load from the guest's page cache.
# The results folder (a virtme-ng --rwdir) and /tmp, /run are left as they are.
set -u
ro=/run/fl-ro
mkdir -p "$ro" /tmp/fl-home
if mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000,ro flro "$ro" 2>/dev/null; then
    # The virtualenv by its real path: a symlinked one would lead back to the uncached share.
    for dir in /usr "$(readlink -f "$FL_VENV")"; do
        [ -d "$ro$dir" ] && mount --bind "$ro$dir" "$dir"
    done
fi
# The guest kernel's messages go to the results folder as they happen (FL_VM_KLOG), so
# a guest that dies leaves its last words behind.
if [ -n "${FL_VM_KLOG:-}" ]; then
    { echo "=== boot $(date -u +%FT%TZ): $(uname -r)"; dmesg -w; } >>"$FL_VM_KLOG" 2>&1 &
fi
export HOME=/tmp/fl-home MPLCONFIGDIR=/tmp/fl-home/mpl PYTHONDONTWRITEBYTECODE=1
exec "$@"
