#!/bin/sh
# Install everything fl needs on Debian 12 (bookworm), then run the demo scenario.
#
#   ./install.sh            # install, then ./fl check and ./fl run demo
#   ./install.sh --no-demo  # install only
#   ./install.sh --no-vm    # without the VM backend (qemu, a distribution kernel, virtme-ng)
#
# What it changes on the system:
#   * adds /etc/apt/sources.list.d/fl-non-free.sources (Debian's non-free component,
#     bookworm + bookworm-updates) if netperf is not installable otherwise: netperf
#     is only packaged in non-free;
#   * apt-get installs the tools listed in PACKAGES below (TEST_PACKAGES are for the test
#     suite: the tests start their own sshd inside their namespaces and their own nginx
#     on loopback, and install.sh keeps the packages from starting system-wide services;
#     chromium checks the published results page headless; SCHEME_PACKAGES, the shipped
#     schemes' programs, ngtcp2's QUIC, whose system service is disabled), and for the VM backend
#     VM_PACKAGES: QEMU and Debian's distribution kernel (linux-image-amd64, which has
#     netem, fq_codel, cake, pie, red, sfq, fq ... as modules) to boot in a VM, and
#     mmdebstrap, which builds kernel-under-test images (./fl image build; it never
#     touches this machine's apt configuration);
#   * creates the virtualenv .venv/ in this checkout (Python deps from pyproject.toml,
#     plus virtme-ng for the VM backend).
set -eu

PACKAGES="flent netperf irtt fping iperf tcpdump xz-utils iproute2 nftables ethtool
          wireguard-tools python3-venv python3-matplotlib python3-numpy python3-scipy rsync"
VM_PACKAGES="qemu-system-x86 linux-image-amd64 busybox-static mmdebstrap"
TEST_PACKAGES="openssh-server openssh-client nginx chromium shellcheck"
# The shipped schemes' programs (schemes/*.yml): QUIC from ngtcp2's example programs. The
# server package installs a system service (ngtcp2d, port 7777): it is not started, and
# disabled.
SCHEME_PACKAGES="ngtcp2-server ngtcp2-client openssl curl make g++"  # and libutp's ucat: schemes/install-ucat.sh
NON_FREE=/etc/apt/sources.list.d/fl-non-free.sources
HERE=$(cd "$(dirname "$0")" && pwd)
DEMO=yes
VM=yes
for arg in "$@"; do
    case $arg in
        --no-demo) DEMO=no ;;
        --no-vm) VM=no ;;
        *) echo "usage: $0 [--no-demo] [--no-vm]" >&2; exit 2 ;;
    esac
done

[ "$(id -u)" -eq 0 ] || { echo "install.sh: run as root (sudo ./install.sh)" >&2; exit 1; }
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] ||
    echo "install.sh: warning: written for Debian 12 (bookworm), this is ${PRETTY_NAME:-unknown}" >&2

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
if ! apt-cache policy netperf | grep -q 'Candidate: [0-9]'; then
    echo "install.sh: enabling Debian's non-free component for netperf in $NON_FREE"
    cat >"$NON_FREE" <<EOF
# Added by fl's install.sh: netperf (used by Flent) is only in Debian's non-free component.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -q
fi
[ "$VM" = yes ] && PACKAGES="$PACKAGES $VM_PACKAGES"
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $PACKAGES
MADE_POLICY=no
if { ! dpkg -s openssh-server >/dev/null 2>&1 || ! dpkg -s nginx >/dev/null 2>&1 ||
     ! dpkg -s ngtcp2-server >/dev/null 2>&1; } &&
   [ ! -e /usr/sbin/policy-rc.d ]; then
    # Debian's standard switch: packages installed now do not start their services.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    MADE_POLICY=yes
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $TEST_PACKAGES $SCHEME_PACKAGES
if command -v systemctl >/dev/null 2>&1; then
    systemctl disable ngtcp2d.service >/dev/null 2>&1 || true
fi
"$HERE/schemes/install-ucat.sh"
if [ "$MADE_POLICY" = yes ]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
fi

# The virtualenv sees Debian's python3 packages (flent, matplotlib) for analysis.
if [ ! -x "$HERE/.venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$HERE/.venv"
fi
"$HERE/.venv/bin/pip" install -q --upgrade pip
EXTRAS="test"
[ "$VM" = yes ] && EXTRAS="test,vm"
"$HERE/.venv/bin/pip" install -q -e "${HERE}[${EXTRAS}]"

"$HERE/fl" check
if [ "$DEMO" = yes ]; then
    "$HERE/fl" run demo
fi
