#!/bin/sh
# ssh_hosts.sh AUTHORIZED_KEYS: three hosts of an ssh testbed inside this guest, for
# tests/vm/test_e2e_vm_ssh.py: namespaces fl7-cli, fl7-mid and fl7-srv linked in a line
# (cli e0 - e0 mid e1 - e0 srv), each running an sshd on a management link of its own to
# the guest's root namespace (10.76.0.4N+2, N = 1, 2, 3), which fl reaches through the
# guest's own sshd. They run the guest's kernel: the l4s image's Linux 7.3.
set -eu
keys=$1
dir=/run/fl7
mkdir -p "$dir" /run/sshd
cp "$keys" "$dir/authorized_keys"
ssh-keygen -q -t ed25519 -N "" -f "$dir/hostkey"
n=0
for h in cli mid srv; do
    n=$((n + 1))
    ns=fl7-$h
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "m7$h" type veth peer name mgmt netns "$ns"
    ip addr add "10.76.0.$((4 * n + 1))/30" dev "m7$h"
    ip link set "m7$h" up
    ip -n "$ns" addr add "10.76.0.$((4 * n + 2))/30" dev mgmt
    ip -n "$ns" link set mgmt up
    cat > "$dir/sshd-$h.conf" <<CONF
ListenAddress 10.76.0.$((4 * n + 2))
HostKey $dir/hostkey
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd-$h.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
CONF
    ip netns exec "$ns" /usr/sbin/sshd -f "$dir/sshd-$h.conf"
done
ip link add name e0 netns fl7-cli type veth peer name e0 netns fl7-mid
ip link add name e1 netns fl7-mid type veth peer name e0 netns fl7-srv
echo ready
