#!/bin/sh
# fl's TCP Prague provoked by hand, in a guest of the l4s image (tests/vm/test_e2e_vm_prague_module.py):
# each part prints "== NAME" and what it read; the kernel's own tracepoints of the flows
# (tcp_probe: cwnd and ssthresh at every ACK; tcp_cong_state_set; tcp_retransmit_skb) go
# to OUT/NAME.trace. Namespaces are fpx-*, made and removed here. PRAGUE_KO: another build
# of the module to load instead of the image's (an older version, to see a test fail).
#   [PRAGUE_KO=FILE] prague_probe.sh OUT
set -u
OUT=$1
TRACING=/sys/kernel/tracing
PARAMS=/sys/module/tcp_prague/parameters

netns() {  # fresh namespaces NAME…, loopback up
    for n in "$@"; do
        ip netns del "$n" 2>/dev/null
        ip netns add "$n" && ip -n "$n" link set lo up
    done
}

link() {  # link NS1 DEV1 ADDR1 NS2 DEV2 ADDR2: a veth pair without offloads
    ip link add "$2" netns "$1" type veth peer name "$5" netns "$4"
    ip -n "$1" addr add "$3" dev "$2" && ip -n "$4" addr add "$6" dev "$5"
    for end in "$1 $2" "$4 $5"; do
        # shellcheck disable=SC2086 # two words: namespace, device
        set -- $end
        ip -n "$1" link set "$2" up
        ip netns exec "$1" ethtool -K "$2" gso off tso off gro off >/dev/null 2>&1
    done
}

trace_on() {  # trace_on PORT: the TCP events of connections to PORT, into a fresh buffer
    echo 0 >"$TRACING/tracing_on"
    echo >"$TRACING/trace"
    echo 32768 >"$TRACING/buffer_size_kb"
    for e in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
        echo "dport == $1" >"$TRACING/events/tcp/$e/filter"
        echo 1 >"$TRACING/events/tcp/$e/enable"
    done
    echo 1 >"$TRACING/tracing_on"
}

trace_off() {  # trace_off NAME: stop, keep the buffer as OUT/NAME.trace
    echo 0 >"$TRACING/tracing_on"
    for e in tcp_probe tcp_cong_state_set tcp_retransmit_skb; do
        echo 0 >"$TRACING/events/tcp/$e/enable"
        echo 0 >"$TRACING/events/tcp/$e/filter"
    done
    cat "$TRACING/trace" >"$OUT/$1.trace"
    echo >"$TRACING/trace"
}

flow() {  # flow CLIENT_NS SERVER_NS ADDR PORT SECONDS [iperf options]: Prague flows, iperf's summary
    cns=$1 sns=$2 addr=$3 port=$4 secs=$5
    shift 5
    ip netns exec "$sns" iperf -s -p "$port" >/dev/null 2>&1 &
    server=$!
    sleep 1
    ip netns exec "$cns" iperf -c "$addr" -p "$port" -Z prague -t "$secs" -f m "$@" 2>&1 | tail -1
    kill "$server"
    wait "$server" 2>/dev/null
}

load() {  # load [PARAM=VALUE]: the module, the image's or PRAGUE_KO
    if [ -n "${PRAGUE_KO:-}" ]; then insmod "$PRAGUE_KO" "$@"; else modprobe tcp_prague "$@"; fi
}

mkdir -p "$OUT"
if [ -n "${PRAGUE_KO:-}" ]; then rmmod tcp_prague && load; fi

echo "== hooks"  # the guest is booted with ipv6.disable=1
nft list hooks ip | grep prague
nft list hooks ip6 | grep prague
echo "ipv6 disabled: $(cat /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null || echo yes)"

echo "== parameters"
for kv in pacing_ca_pct=0 alpha_shift=40 rtt_indep=2 pacing_ss_pct=99999999999 burst_us=abc; do
    if echo "${kv#*=}" >"$PARAMS/${kv%%=*}" 2>/dev/null; then r=accepted; else r=refused; fi
    echo "write $kv $r, now $(cat "$PARAMS/${kv%%=*}")"
done
for kv in pacing_ca_pct=120 ai_cwnd_limited=0; do
    if echo "${kv#*=}" >"$PARAMS/${kv%%=*}" 2>/dev/null; then r=accepted; else r=refused; fi
    echo "write $kv $r, now $(cat "$PARAMS/${kv%%=*}")"
done
echo 100 >"$PARAMS/pacing_ca_pct" && echo 1 >"$PARAMS/ai_cwnd_limited"
rmmod tcp_prague
if load pacing_ca_pct=0 2>/dev/null; then echo "load pacing_ca_pct=0 loaded"; else echo "load pacing_ca_pct=0 refused"; fi
lsmod | grep -q '^tcp_prague' || load
echo "loaded: $(cat "$PARAMS/implementation")"

echo "== selection"
netns fpx-sel
setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '
import socket
s = socket.socket()
try:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"prague")
    print("unprivileged setsockopt allowed")
except OSError as e:
    print("unprivileged setsockopt refused", e.errno)'
ip netns exec fpx-sel sysctl -w net.ipv4.tcp_congestion_control=prague 2>&1
ip netns del fpx-sel

echo "== release"  # the pacing status and shift a socket has under prague, then under cubic
netns fpx-rel
ip netns exec fpx-rel sysctl -qw net.ipv4.tcp_ecn=3
echo "f:flpace tcp_sendmsg status=sk->sk_pacing_status:u32 shift=sk->sk_pacing_shift:u8" >>"$TRACING/dynamic_events"
echo 'comm == "python3"' >"$TRACING/events/fprobes/flpace/filter"
echo 1 >"$TRACING/events/fprobes/flpace/enable"
echo >"$TRACING/trace"
echo 1 >"$TRACING/tracing_on"
exec 3>"$TRACING/trace_marker"
ip netns exec fpx-rel python3 -c '
import os, socket
srv = socket.socket(); srv.bind(("127.0.0.1", 5301)); srv.listen()
c = socket.socket(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"prague")
c.connect(("127.0.0.1", 5301)); peer, _ = srv.accept()
for cc in (b"prague", b"cubic"):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
    os.write(3, b"fl-phase " + cc + b"\n")
    for _ in range(3):
        c.send(b"x" * 1000); peer.recv(65536)'
exec 3>&-
echo 0 >"$TRACING/tracing_on"
echo 0 >"$TRACING/events/fprobes/flpace/enable"
grep -E "fl-phase|flpace" "$TRACING/trace" | sed 's/^.*: //'
echo "-:fprobes/flpace" >>"$TRACING/dynamic_events"
echo >"$TRACING/trace"
ip netns del fpx-rel

# A flow through a 50 Mbit/s, 20 ms path whose middlebox (nftables, by conntrack's packet
# count) marks its packet 300 CE (slow start ends, alpha 1: a halving), marks packet 12000
# CE when alpha has decayed (a cut of a few packets) and drops packet 12005, found lost
# inside the CWR state of that cut.
echo "== loss after a CE cut"
netns fpx-c fpx-m fpx-s
link fpx-c c0 10.9.1.1/24 fpx-m m0 10.9.1.2/24
link fpx-m m1 10.9.2.2/24 fpx-s s0 10.9.2.1/24
ip -n fpx-c route add default via 10.9.1.2 && ip -n fpx-s route add default via 10.9.2.2
ip netns exec fpx-m sysctl -qw net.ipv4.ip_forward=1
for n in fpx-c fpx-s; do ip netns exec "$n" sysctl -qw net.ipv4.tcp_ecn=3; done
tc -n fpx-m qdisc add dev m1 root handle 1: htb default 1
tc -n fpx-m class add dev m1 parent 1: classid 1:1 htb rate 50mbit quantum 1514
tc -n fpx-m qdisc add dev m1 parent 1:1 handle 10: netem delay 20ms limit 100000
ip netns exec fpx-m nft -f - <<'NFT'
table inet fpx {
  chain f { type filter hook forward priority 0; policy accept;
    ip saddr 10.9.1.1 tcp dport 5201 ct original packets 300 ip ecn set ce counter
    ip saddr 10.9.1.1 tcp dport 5201 ct original packets 12000 ip ecn set ce counter
    ip saddr 10.9.1.1 tcp dport 5201 ct original packets 12005 counter drop
  }
}
NFT
trace_on 5201
flow fpx-c fpx-s 10.9.2.1 5201 5
trace_off loss_after_ce
ip netns exec fpx-m nft list chain inet fpx f | grep -o "packets [0-9]* bytes [0-9]*"
ip netns del fpx-c && ip netns del fpx-m && ip netns del fpx-s

# loss_2020=1 (the 2020 fork's responses): the same path, its middlebox marking packet 300
# CE (slow start ends) and dropping packet 12000, in congestion avoidance.
echo "== loss_2020"
netns fpx-c fpx-m fpx-s
link fpx-c c0 10.9.1.1/24 fpx-m m0 10.9.1.2/24
link fpx-m m1 10.9.2.2/24 fpx-s s0 10.9.2.1/24
ip -n fpx-c route add default via 10.9.1.2 && ip -n fpx-s route add default via 10.9.2.2
ip netns exec fpx-m sysctl -qw net.ipv4.ip_forward=1
for n in fpx-c fpx-s; do ip netns exec "$n" sysctl -qw net.ipv4.tcp_ecn=3; done
tc -n fpx-m qdisc add dev m1 root handle 1: htb default 1
tc -n fpx-m class add dev m1 parent 1: classid 1:1 htb rate 50mbit quantum 1514
tc -n fpx-m qdisc add dev m1 parent 1:1 handle 10: netem delay 20ms limit 100000
ip netns exec fpx-m nft -f - <<'NFT'
table inet fpx {
  chain f { type filter hook forward priority 0; policy accept;
    ip saddr 10.9.1.1 tcp dport 5204 ct original packets 300 ip ecn set ce counter
    ip saddr 10.9.1.1 tcp dport 5204 ct original packets 12000 counter drop
  }
}
NFT
echo 1 >"$PARAMS/loss_2020"
trace_on 5204
flow fpx-c fpx-s 10.9.2.1 5204 5
trace_off loss_2020
echo 0 >"$PARAMS/loss_2020"
ip netns exec fpx-m nft list chain inet fpx f | grep -o "packets [0-9]* bytes [0-9]*"
ip netns del fpx-c && ip netns del fpx-m && ip netns del fpx-s

# Six flows whose own egress qdisc (a 2-packet FIFO under a 20 Mbit/s htb class) refuses
# packets: the core enters CWR without any CE; no AQM on the path marks.
echo "== local congestion"
netns fpx-lc fpx-ls
link fpx-lc l0 10.9.3.1/24 fpx-ls l1 10.9.3.2/24
for n in fpx-lc fpx-ls; do ip netns exec "$n" sysctl -qw net.ipv4.tcp_ecn=3; done
tc -n fpx-lc qdisc add dev l0 root handle 1: htb default 1
tc -n fpx-lc class add dev l0 parent 1: classid 1:1 htb rate 20mbit quantum 1514
tc -n fpx-lc qdisc add dev l0 parent 1:1 handle 10: pfifo limit 2
tc -n fpx-ls qdisc add dev l1 root netem delay 10ms limit 100000
trace_on 5202
flow fpx-lc fpx-ls 10.9.3.2 5202 4 -P 6
trace_off local_congestion
echo "local drops: $(tc -n fpx-lc -s qdisc show dev l0 | sed -n '/pfifo/,$p' | grep -o 'dropped [0-9]*' | head -1)"
echo "CE delivered: $(ip netns exec fpx-lc nstat -az TcpExtTCPDeliveredCE | awk '/TCPDeliveredCE/ {print $2}')"
ip netns del fpx-lc && ip netns del fpx-ls

# A flow through 20 % random loss at 5 Mbit/s: many fast recoveries with small windows.
# The loss starts 2 s in, once the connection is up: a CI's guest lost the SYN and its
# retransmissions never left (tcp_retransmit_skb err=-16: the first still queued), so
# the flow had no data at all.
echo "== heavy loss"
netns fpx-hc fpx-hs
link fpx-hc h0 10.9.4.1/24 fpx-hs h1 10.9.4.2/24
for n in fpx-hc fpx-hs; do ip netns exec "$n" sysctl -qw net.ipv4.tcp_ecn=3; done
tc -n fpx-hc qdisc add dev h0 root netem delay 10ms rate 5mbit limit 1000
tc -n fpx-hs qdisc add dev h1 root netem delay 10ms limit 1000
trace_on 5203
(sleep 2; tc -n fpx-hc qdisc change dev h0 root netem delay 10ms loss 20% rate 5mbit limit 1000) &
lossy=$!
flow fpx-hc fpx-hs 10.9.4.2 5203 9
wait "$lossy"
trace_off heavy_loss
ip netns del fpx-hc && ip netns del fpx-hs

echo "== dmesg"
dmesg
