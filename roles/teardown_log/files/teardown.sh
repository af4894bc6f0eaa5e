#!/bin/sh
# teardown.sh DEV...: print the state fl records after a test on this host.
show() { echo "\$ $*"; "$@" 2>&1; echo; }
show uname -r
for dev in "$@"; do
    show tc -s -d qdisc show dev "$dev"
    show tc -s -d class show dev "$dev"
    show ip -s link show dev "$dev"
done
if command -v nft >/dev/null && nft list table inet fl >/dev/null 2>&1; then
    show nft list table inet fl
fi
show ip tcp_metrics show
# shellcheck disable=SC2086
show sysctl -e $FL_SYSCTLS
