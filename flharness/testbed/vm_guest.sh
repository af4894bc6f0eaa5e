#!/bin/sh
# The first thing an fl VM guest runs (virtme-ng --exec): it readies the guest to be
# driven from the host, then waits. The host's Ansible reaches the guest over ssh, its
# namespaces with the fl_netns_ssh connection; nothing of fl runs in here.
#   vm_guest.sh VM_DIR KERNEL_LOG
# VM_DIR is the VM's folder on the host, shared read-only: sshd's configuration, its host
# key and fl's public key. KERNEL_LOG is in the results folder (shared read-write).
set -u
vm=$1 klog=$2

# virtme-ng shares the host's / without caching, so every program start re-reads its
# files from the host. With the host's root, fl adds a second, cached (cache=loose)
# read-only share of / (mount tag "flro") and binds /usr over it.
ro=/run/fl-ro
mkdir -p "$ro"
if mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000,ro flro "$ro" 2>/dev/null; then
    mount --bind "$ro/usr" /usr
fi

# root's account for sshd: virtme-ng binds a /etc/shadow where root is locked (sshd
# without PAM refuses a locked account) and keeps the host's home for root (its shell
# start-up files would run for every command): an unusable password and a home of its own.
mkdir -p /run/fl-home
shadow=$(sed 's/^root:[^:]*:/root:fl-no-password:/' /etc/shadow) && printf '%s\n' "$shadow" > /etc/shadow
sed -i 's#^root:.*#root:x:0:0:root:/run/fl-home:/bin/sh#' /etc/passwd

# QEMU's TCG translates code per virtual address: with the same addresses in every
# process, programs started again and again (tc, ip, sh) are translated once.
echo 0 > /proc/sys/kernel/randomize_va_space

# The NIC of QEMU's user-mode network (restrict=on: only the host's ssh forward reaches it).
ip link set lo up
for dev in /sys/class/net/*; do
    dev=${dev##*/}
    [ "$dev" = lo ] && continue
    ip addr add 10.0.2.15/24 dev "$dev" && ip link set "$dev" up && break
done
mkdir -p /run/sshd
/usr/sbin/sshd -f "$vm/sshd_config" -E /run/fl-sshd.log || { echo "fl-guest: sshd failed"; cat /run/fl-sshd.log; exit 1; }

# The guest kernel's messages go to the results folder as they happen, so a guest that
# dies leaves its last words behind.
{ echo "=== boot $(date -u +%FT%TZ): $(uname -r)"; exec dmesg -w; } >>"$klog" 2>&1 &
echo "fl-guest: ready"
exec sleep 2147483647
