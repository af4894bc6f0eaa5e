#!/bin/sh
# The first thing an fl VM guest runs (virtme-ng --exec): it readies the guest to be
# driven from the host, then waits. The host's Ansible reaches the guest over ssh, its
# namespaces with the fl_netns_ssh connection; nothing of fl runs in here.
#   vm_guest.sh VM_DIR KERNEL_LOG
# VM_DIR is the VM's folder on the host, shared read-only: sshd's configuration, its host
# key and fl's public key. KERNEL_LOG is in the results folder (shared read-write).
set -u
vm=$1 klog=$2
# What this script says goes to the console and to the kernel log in the results folder:
# in a root without udev (fl's images) nothing loads the virtio-serial driver before it
# starts, so virtme-ng gives it the serial console, which fl does not read.
say() { echo "fl-guest: $*"; echo "fl-guest: $*" >>"$klog"; }
echo "=== boot $(date -u +%FT%TZ): $(uname -r)" >>"$klog"

# virtme-ng shares the guest's root without caching, so every file opened is read from
# the host again: slow, and on the virtual clock host I/O during a test would make its
# timing depend on the host's. fl adds a second, cached (cache=loose) read-only share of
# the root (mount tag "flro") and binds /usr and /etc over it: after their first use,
# programs, libraries and configuration come from the guest's page cache.
ro=/run/fl-ro
mkdir -p "$ro" /run/fl-home
mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000,ro flro "$ro" ||
    { say "no cached share of the root"; exit 1; }
# root's account for sshd: virtme-ng locks root's password (sshd without PAM refuses a
# locked account) and keeps the host's home for root (its shell start-up files would
# run for every command): an unusable password, /bin/sh, and a home of its own.
sed 's#^root:.*#root:x:0:0:root:/run/fl-home:/bin/sh#' "$ro/etc/passwd" > /run/fl-passwd
sed 's/^root:[^:]*:/root:fl-no-password:/' "$ro/etc/shadow" > /run/fl-shadow
chmod 600 /run/fl-shadow
# A kernel tree's modules: virtme-ng links them at /lib/modules/RELEASE on a tmpfs, which
# the bind of /usr hides: link them again (a kernel's own module folder is no link).
release=$(uname -r)
tree_modules=$(readlink "/lib/modules/$release") || tree_modules=""
mount --bind "$ro/usr" /usr
mount --bind "$ro/etc" /etc
if [ -n "$tree_modules" ]; then
    mount -t tmpfs fl-modules /lib/modules && ln -s "$tree_modules" "/lib/modules/$release"
fi
mount --bind /run/fl-passwd /etc/passwd
mount --bind /run/fl-shadow /etc/shadow

# fl.extra_modules=off on the kernel command line (--vm-append): the guest plays a host
# without the image's extra modules (fl image build puts them in updates/fl; a tmpfs hides
# them, so neither the boot settings nor the kernel's own requests load them).
case " $(cat /proc/cmdline) " in
    *" fl.extra_modules=off "*)
        mount -t tmpfs fl-no-extra "/usr/lib/modules/$release/updates" && : > /run/fl-no-boot-modules ;;
esac
# A built image's boot settings (fl image build: the recipe's boot section). A module
# that does not load is said on the console; `fl check --vm` shows what works.
if [ -s /etc/fl/boot-modules ] && [ ! -e /run/fl-no-boot-modules ]; then
    while read -r module; do
        modprobe "$module" || say "modprobe $module failed"
    done < /etc/fl/boot-modules
fi
[ -s /etc/fl/boot-sysctls ] && { sysctl -q -p /etc/fl/boot-sysctls || say "boot sysctls failed"; }

# QEMU's TCG translates code per virtual address: with the same addresses in every
# process, programs started again and again (tc, ip, sh) are translated once.
echo 0 > /proc/sys/kernel/randomize_va_space

# The NIC of QEMU's user-mode network (restrict=on: only the host's ssh forward reaches
# it). Its driver: udev loads it where there is udev (the host's root), else this.
modprobe -q virtio_net || true
ip link set lo up
for dev in /sys/class/net/*; do
    dev=${dev##*/}
    [ "$dev" = lo ] && continue
    ip addr add 10.0.2.15/24 dev "$dev" && ip link set "$dev" up && break
done
# On the virtual clock (QEMU -icount sleep=off) the guest's time leaps to its next timer
# whenever it idles, so while the host's QEMU has yet to pass on ssh's next packet (a busy
# host) minutes of guest time can go by in milliseconds: TCP would give up on the host's
# connection (retransmissions, the SYN-ACK's) and sshd close a login it finds slow. The
# root namespace, sshd's alone (the testbed's namespaces have their own settings), waits.
echo 1000 > /proc/sys/net/ipv4/tcp_retries2
echo 255 > /proc/sys/net/ipv4/tcp_synack_retries
mkdir -p /run/sshd
/usr/sbin/sshd -f "$vm/sshd_config" -E /run/fl-sshd.log || { say "sshd failed: $(cat /run/fl-sshd.log)"; exit 1; }

say ready
# The guest kernel's messages go to the results folder as they happen, so a guest that
# dies leaves its last words behind (after this script's lines: nothing else writes there).
dmesg -w >>"$klog" 2>&1 &
exec sleep 2147483647
