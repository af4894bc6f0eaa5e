"""Each host's setup and collect scripts (testbed/cell_scripts.py): their commands, line by
line (comments left out), for the middlebox with a rate schedule, the endpoints with a
tunnel of each kind, a staged VM guest that moves its files and an ssh host that
compresses its capture for the fetch."""
from __future__ import annotations

from flharness.teardown_format import tcp_counters_function
from flharness.testbed.cell_scripts import Bottleneck, Capture, CellHostPlan, Tunnel, TunnelEnd, collect_script, setup_script

S = "/run/fl/t"  # scratch folders: S/cli, S/mid, S/srv
HEAD = ["exec 2>&1", "set -e", "dir=/run/fl/t/{h}", 'cmd="$dir/cmd"', 'run() { echo "+ $*"; "$@"; }',
        'batch() { name=$1; shift; while IFS= read -r l; do echo "+ $1 $l"; done < "$cmd/$name"; "$@" "$cmd/$name" >/dev/null; }',
        'rm -rf "$cmd"', 'mkdir "$cmd"']
SYSCTLS = ['while IFS= read -r line; do sysctl -qw "$line"; done < "$dir/sysctl-cells"', 'if [ -f "$cmd/sysctl.conf" ]; then',
           '  while IFS= read -r line; do run sysctl -qw "$line"; done < "$cmd/sysctl.conf"', "fi"]
ENDPOINT = ['while read -r path value; do echo "$value" > "$path"; done < "$dir/params-cells"',
            'if [ -f "$cmd/module_params.conf" ]; then',
            '  while read -r path value; do echo "+ echo $value > $path"; echo "$value" > "$path"; done < "$cmd/module_params.conf"',
            "fi", "ip tcp_metrics flush all 2>/dev/null || true", "echo '+ ip tcp_metrics flush all'",
            tcp_counters_function(), 'fl_tcp_counters > "$dir/tcp_counters.up"']
STATE = ['if [ -f "$dir/cmd/state.sh" ]; then', "  # shellcheck source=/dev/null", '  . "$dir/cmd/state.sh"', "else",
         '  echo "(no state script: the cell\'s setup did not write it)"', "fi"]
WAIT = ["listening() { while IFS= read -r line; do case $line in *'listening on'*) return 0 ;; esac; done < \"$dir/tcpdump.log\"; return 1; }",
        "i=0", "until listening; do", '  i=$((i + 1)); [ $i -le 1500 ] || { cat "$dir/tcpdump.log"; exit 1; }', "  sleep 0.01", "done"]
STOP = ['"$dir/fl-stop" "$dir/tcpdump.pid" "$dir/ss-sample.pid"', "echo '$ tcpdump statistics'",
        "while IFS= read -r line; do case $line in [0-9]*' packets '*) echo \"$line\" ;; esac; done < \"$dir/tcpdump.log\"", "echo"]


def code(text: str) -> list[str]:
    """The script's lines that are not comments (blank ones too)."""
    return [line for line in text.splitlines() if not line.startswith("#")]


def host(h: str, **over) -> CellHostPlan:
    base = dict(host=h, cell="c1", scenario="s", scratch=f"{S}/{h}", files={"a.tc": "x $y 'z'\n"}, cell_dir="/results/c1",
                staged=False, moves_to=None, wait_timeout=15, endpoint=h != "mid")
    return CellHostPlan(**{**base, **over})


FILE = ["# shellcheck disable=SC2016  # the file's text as it is (a script's own $ included)",
        "printf '%s' 'x $y '\"'\"'z'\"'\"'", "' > \"$cmd/\"a.tc"]


def test_the_middlebox_with_a_rate_schedule():
    b = Bottleneck(summary="upload: 10mbit, fifo", devs=("mid.l", "mid.r"), schedule=True, port_cli="mid.l", queue_interval=0.1,
                   queue_up="mid.r", queue_down="mid.l", queue_filter="icmp", queue_log="/results/c1/mid.qdisc.log")
    setup = setup_script(host("mid", bottleneck=b))
    assert setup.startswith("# fl cell c1 (s) on mid: its whole\n") and "\n".join(FILE) in setup
    assert code(setup) == [*HEAD[:2], "dir=/run/fl/t/mid", *HEAD[3:], "printf '%s' 'x $y '\"'\"'z'\"'\"'", "' > \"$cmd/\"a.tc",
                           *SYSCTLS, "", 'tc -force -batch "$cmd/reset.tc" >/dev/null 2>&1 || true',
                           "echo '# upload: 10mbit, fifo'", "batch bottleneck.tc tc -batch",
                           'if [ -f "$cmd/ecn.nft" ]; then batch ecn.nft nft -f; fi',
                           "echo '$ tc -d qdisc show dev mid.l; tc -d class show dev mid.l'",
                           "printf '%s\\n' 'qdisc show dev mid.l' 'class show dev mid.l' | tc -d -b -",
                           "echo '$ tc -d qdisc show dev mid.r; tc -d class show dev mid.r'",
                           "printf '%s\\n' 'qdisc show dev mid.r' 'class show dev mid.r' | tc -d -b -",
                           '"$dir/fl-start" "$dir/schedule.pid" "$dir/schedule.out" "$dir/fl-schedule" "$cmd" mid.l "$dir/schedule.log"',
                           "mkdir -p /results/c1",
                           "echo '+ fl-qdisc-sample 0.1 mid.l icmp up=mid.r down=mid.l > /results/c1/mid.qdisc.log'",
                           '"$dir/fl-start" "$dir/qdisc-sample.pid" /results/c1/mid.qdisc.log "$dir/fl-qdisc-sample" '
                           '0.1 mid.l icmp up=mid.r down=mid.l']
    assert code(collect_script(host("mid", bottleneck=b))) == [
        "exec 2>&1", "dir=/run/fl/t/mid", "{", '"$dir/fl-stop" "$dir/schedule.pid"  # steps not yet taken are cancelled',
        '"$dir/fl-stop" "$dir/qdisc-sample.pid"  # the queue samples end', *STATE, "",
        "echo '$ cat schedule.log   # the rate schedule as applied'", 'cat "$dir/schedule.log" 2>/dev/null',
        "if [ -s \"$dir/schedule.out\" ]; then echo '$ cat schedule.out   # what the schedule printed'; cat \"$dir/schedule.out\"; fi",
        'rm -f "$dir/schedule.log" "$dir/schedule.out"', '} > "$dir/collect.log" 2>&1', 'cat "$dir/collect.log"', "exit 0"]


def tunnel_down(h: str, peer: str) -> list[str]:
    local, remote = ("10.0.1.1", "10.0.2.1") if h == "cli" else ("10.0.2.1", "10.0.1.1")
    spi = {"cli": "0x0f170001", "srv": "0x0f170002"}
    return ["ip link del dev fl-tun 2>/dev/null || true", "ip fou del port 5556 2>/dev/null || true", "for way in out in; do",
            "    ip xfrm policy delete src 0.0.0.0/0 dst 0.0.0.0/0 dir $way if_id 113 2>/dev/null || true", "done",
            f"ip xfrm state delete src {local} dst {remote} proto esp spi {spi[h]} 2>/dev/null || true",
            f"ip xfrm state delete src {remote} dst {local} proto esp spi {spi[peer]} 2>/dev/null || true",
            "nft delete table inet fl_tunnel 2>/dev/null || true", f"rm -f {S}/{h}/wg.key {S}/{h}/xfrm_stat.up"]


def endpoint(h: str, kind: str) -> CellHostPlan:
    peer = "srv" if h == "cli" else "cli"
    local, remote = ("10.0.1.1", "10.0.2.1") if h == "cli" else ("10.0.2.1", "10.0.1.1")
    end = TunnelEnd(host=h, peer=peer, local=local, remote=remote, scratch=f"{S}/{h}",  # type: ignore[arg-type]
                    peer_inner="10.0.9.2" if h == "cli" else "10.0.9.1")
    fill = {"@AUTH_cli@": "0xaa", "@ENC_cli@": "0xbb"} if kind == "ipsec" else {}
    wg = {"wg_private": f"{h}+private/key=", "wg_peer_public": f"{peer}+public/key="} if kind == "wireguard" else {}
    t = Tunnel(kind=kind, overhead=60, underlay=f"{h}.r", end=end, fill=fill, **wg)
    c = Capture(dev="fl-tun", pcap=f"/results/c1/{h}.pcap", ss_log="/results/c1/srv.ss.log" if h == "srv" else None,
                target="10.0.9.2", xz_level=None)
    return host(h, tunnel=t, capture=c, client_if="cli.r" if h == "cli" else None,
                servers=("/run/fl/t/srv", "0.0.0.0", "12865") if h == "srv" else None)


def test_the_endpoints_with_a_tunnel_of_each_kind():
    extra = {"ipsec": ['cat /proc/net/xfrm_stat > "$dir/xfrm_stat.up"  # the namespace\'s counters before this cell\'s SAs'],
             "fou": ["modprobe -q fou 2>/dev/null || true  # FOU's netlink family does not load it on demand"], "wireguard": []}
    plain = ['sed -e s/@MTU@/"$mtu/" "$cmd/tunnel.ip" | ip -batch - >/dev/null']
    fills = {"ipsec": ['sed -e s/@MTU@/"$mtu/" -f /dev/stdin "$cmd/tunnel.ip" <<\'FL_KEYS\' | ip -batch - >/dev/null',
                       "s/@AUTH_cli@/0xaa/", "s/@ENC_cli@/0xbb/", "FL_KEYS"], "fou": plain, "wireguard": plain}
    for kind in ("wireguard", "fou", "ipsec"):
        for h in ("cli", "srv"):
            peer = "srv" if h == "cli" else "cli"
            own = ["tc qdisc del dev cli.r root 2>/dev/null || true", 'if [ -f "$cmd/client.tc" ]; then batch client.tc tc -batch; fi'] \
                if h == "cli" else ['"$dir/fl-servers" /run/fl/t/srv 0.0.0.0 12865']
            inner, remote = ("10.0.9.2", "10.0.2.1") if h == "cli" else ("10.0.9.1", "10.0.1.1")
            wg = [f"(umask 077; printf '%s\\n' {h}+private/key= > {S}/{h}/wg.key)",
                  f"run wg set fl-tun listen-port 51821 private-key {S}/{h}/wg.key peer {peer}+public/key= "
                  f"allowed-ips {inner}/32 endpoint {remote}:51821"] if kind == "wireguard" else []
            ss = ["echo '+ fl-ss-sample 10.0.9.2 > /results/c1/srv.ss.log'",
                  '"$dir/fl-start" "$dir/ss-sample.pid" /results/c1/srv.ss.log "$dir/fl-ss-sample" 10.0.9.2 fl-tun'] if h == "srv" else []
            want = [*HEAD[:2], f"dir={S}/{h}", *HEAD[3:], "printf '%s' 'x $y '\"'\"'z'\"'\"'", "' > \"$cmd/\"a.tc", *SYSCTLS,
                    *ENDPOINT, *own, "", *tunnel_down(h, peer), f"mtu=$(( $(cat /sys/class/net/{h}.r/mtu) - 60 ))", *extra[kind],
                    "sed s/@MTU@/\"$mtu/\" \"$cmd/tunnel.ip\" | while IFS= read -r l; do echo \"+ ip $l\"; done",
                    *fills[kind], *wg,
                    "ethtool -K fl-tun tso off gso off gro off 2>/dev/null || true",
                    'if [ -f "$cmd/ecn-tunnel.nft" ]; then batch ecn-tunnel.nft nft -f; fi',
                    'if [ -f "$cmd/ecn-tunnel.tc" ]; then batch ecn-tunnel.tc tc -batch; fi',
                    "mkdir -p /results/c1", ': > "$dir/tcpdump.log"', f"echo '+ tcpdump -i fl-tun -n -s 128 -w /results/c1/{h}.pcap'",
                    f'"$dir/fl-start" "$dir/tcpdump.pid" "$dir/tcpdump.log" tcpdump -i fl-tun -n -s 128 -w /results/c1/{h}.pcap',
                    *ss, *WAIT]
            assert code(setup_script(endpoint(h, kind))) == want, (kind, h)
            assert code(collect_script(endpoint(h, kind))) == [
                "exec 2>&1", f"dir={S}/{h}", "{", *STOP, "", *STATE, "", *tunnel_down(h, peer),
                '} > "$dir/collect.log" 2>&1', 'cat "$dir/collect.log"', "exit 0"], (kind, h)


def test_a_staged_vm_guest_moves_its_files_and_an_ssh_host_compresses_its_capture():
    c = Capture(dev="cli.r", pcap=f"{S}/cli/cell/cli.pcap", ss_log=None, target="10.0.2.1", xz_level=None)
    vm = host("cli", cell_dir=f"{S}/cli/cell", staged=True, moves_to="/res ults/c1", capture=c)
    setup, collect = code(setup_script(vm)), code(collect_script(vm))
    assert setup[setup.index(': > "$dir/tcpdump.log"') - 2:][:2] == [
        f"rm -rf {S}/cli/cell  # the host's own folder for the cell: the last cell's files are gone", f"mkdir -p {S}/cli/cell"]
    assert collect[-6:-3] == ["fi", "", f"mv {S}/cli/cell/* '/res ults/c1'/ && rmdir {S}/cli/cell"]
    assert not any("xz" in line for line in collect)
    ssh = host("srv", cell_dir=f"{S}/srv/cell", staged=True, capture=Capture(
        dev="srv.l", pcap=f"{S}/srv/cell/srv.pcap", ss_log=None, target="10.0.2.1", xz_level=1))
    collect = code(collect_script(ssh))
    assert collect[3:9] == [*STOP, f"[ -f {S}/srv/cell/srv.pcap ] && xz -T1 -1 -f {S}/srv/cell/srv.pcap", ""]
    assert not any(line.startswith("mv ") for line in collect)
    odd = host("srv", cell_dir="/r/it's", capture=Capture(dev="srv.l", pcap="/r/it's/srv.pcap", ss_log="/r/it's/srv.ss.log",
                                                           target="10.0.2.1", xz_level=None))
    assert "echo '+ tcpdump -i srv.l -n -s 128 -w /r/it'\"'\"'s/srv.pcap'\n" in setup_script(odd)  # quoted whole


def test_the_testbed_teardown_removes_a_tunnel_as_a_cell_does():
    """fl_tunnel_down (roles/cell/tasks/tunnel_down.yml, ssh hosts' teardown): each end's
    removal, the same lines a tunnelled cell's collect.sh ends with."""
    from pathlib import Path

    from flharness.testbed.inventory import load_inventory
    from flharness.testbed.plan import playbook_extra_vars
    inv = load_inventory(Path(__file__).resolve().parents[2] / "inventory.ini")
    down = playbook_extra_vars("t", "/run/fl", inv, None).fl_tunnel_down
    assert sorted(down) == ["cli", "srv"]
    assert code(down["srv"]) == [line.replace("10.0.", "10.71.") for line in tunnel_down("srv", "cli")]


def test_fls_wireguard_keys_are_the_pairs_wg_makes():
    """Each end's key pair is made by fl (tunnel.wireguard_key, X25519): wg itself derives
    the same public key from the private one, and no two pairs are alike."""
    import subprocess

    from flharness.testbed.tunnel import wireguard_key
    keys = [wireguard_key() for _ in range(3)]
    for k in keys:
        derived = subprocess.run(["wg", "pubkey"], input=k.private + "\n", capture_output=True, text=True, check=True)
        assert derived.stdout.strip() == k.public and len(k.private) == len(k.public) == 44
    assert len({k.private for k in keys}) == 3
