"""Builds and removes a Topology with ip, tc, ethtool and sysctl.

Every device is created inside its namespace (veth pairs are made in one
namespace with the peer moved straight into the other), so the root
namespace never sees a testbed interface and two testbeds never collide
on a device name.
"""

import json
import os
import signal
import subprocess
import time

NETNS_DIR = "/run/netns"


class CommandError(RuntimeError):
    pass


def run(argv, stdin=None, check=True):
    """Runs argv; returns its stdout.  Raises CommandError quoting the
    command and its stderr when it fails and |check|."""
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise CommandError(f"'{' '.join(argv)}' failed "
                           f"(exit {p.returncode}): {p.stderr.strip()}")
    return p.stdout


def in_ns(ns, script):
    """Runs a POSIX shell |script| (set -e) inside namespace |ns|."""
    return run(["ip", "netns", "exec", ns, "sh", "-ec", script])


def list_namespaces():
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def tbf(dev, rate_bps, burst, limit):
    return (f"tc qdisc replace dev {dev} root tbf rate {rate_bps}bit "
            f"burst {burst} limit {limit}")


def create(t, s):
    """Creates topology |t| with settings |s| (a dict: mtu, rate_bps,
    fabric_rate_bps, queue_bytes, burst_us).  On failure the caller
    removes what exists (destroy)."""
    for ns in t.namespaces:
        run(["ip", "netns", "add", ns])
    for _, a, b in t.links:
        run(["ip", "-n", a.ns, "link", "add", a.dev, "type", "veth", "peer",
             "name", b.dev, "netns", b.ns])
    scripts = {ns: ["ip link set lo up",
                    # No IPv6 chatter (router solicitations, DAD) on links.
                    "sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                    "sysctl -qw net.ipv6.conf.default.disable_ipv6=1"]
               for ns in t.namespaces}
    for ns, ports in t.bridges.items():
        sc = scripts[ns]
        sc.append(f"ip link add br0 mtu {s['mtu']} type bridge stp_state 0")
        # Bridged frames must not traverse the host's iptables.
        sc.append("if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; "
                  "then sysctl -qw net.bridge.bridge-nf-call-iptables=0; fi")
        for p in ports:
            sc.append(f"ip link set {p} master br0")
        sc.append("ip link set br0 up")
    for _, a, b in t.links:
        for e in (a, b):
            sc = scripts[e.ns]
            sc.append(f"ip link set {e.dev} mtu {s['mtu']}")
            # Segmentation offloads off: the rate limiter and the loss
            # filter see wire-sized packets, as a real link would.
            sc.append(f"ethtool -K {e.dev} tso off gso off gro off "
                      f"tx-udp-segmentation off 2>/dev/null || "
                      f"ethtool -K {e.dev} tso off gso off gro off")
            sc.append(f"ip link set {e.dev} up")
            sc.append(f"tc qdisc add dev {e.dev} clsact")
    for d in t.directions:
        rate = s["fabric_rate_bps"] if "-" in d.link else s["rate_bps"]
        burst = max(4 * s["mtu"], rate // 8 * s["burst_us"] // 1_000_000)
        scripts[d.limiter.ns].append(
            tbf(d.limiter.dev, rate, burst, max(s["queue_bytes"], 2 * burst)))
    for ns, addrs in t.addrs.items():
        for dev, cidr in addrs:
            scripts[ns].append(f"ip addr add {cidr} dev {dev}")
    for ns in t.routers:
        scripts[ns] += ["sysctl -qw net.ipv4.ip_forward=1",
                        "sysctl -qw net.ipv4.fib_multipath_hash_policy=1",
                        "sysctl -qw net.ipv4.conf.all.rp_filter=0"]
    for ns, routes in t.routes.items():
        for r in routes:
            scripts[ns].append(f"ip route add {r}")
    for ns, sc in scripts.items():
        in_ns(ns, "\n".join(sc))


def kill_processes(namespaces):
    """SIGKILLs every process inside |namespaces| and waits (up to 5 s)
    until none is left."""
    deadline = time.monotonic() + 5
    while True:
        pids = [int(p) for ns in namespaces
                for p in run(["ip", "netns", "pids", ns], check=False).split()]
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def destroy(namespaces):
    """Deletes |namespaces| (their devices, qdiscs and filters go with
    them); returns the list of those that could not be deleted."""
    failed = []
    present = set(list_namespaces())
    for ns in namespaces:
        if ns in present:
            p = subprocess.run(["ip", "netns", "del", ns],
                               capture_output=True, text=True)
            if p.returncode != 0:
                failed.append(f"{ns}: {p.stderr.strip()}")
    return failed


def link_counters(t):
    """Per namespace and device: the qdisc counters of the root (TBF)
    qdisc and the interface's rx/tx counters."""
    out = {}
    for ns in t.namespaces:
        text = in_ns(ns, "tc -s -j qdisc show; echo '@@'; ip -s -j link show")
        qd, _, ln = text.partition("@@")
        dev = out.setdefault(ns, {})
        for q in json.loads(qd or "[]"):
            if q.get("kind") == "tbf":
                dev.setdefault(q["dev"], {})["qdisc"] = {
                    "packets": q.get("packets", 0), "bytes": q.get("bytes", 0),
                    "drops": q.get("drops", 0),
                    "overlimits": q.get("overlimits", 0)}
        for li in json.loads(ln or "[]"):
            st = li.get("stats64", li.get("stats", {}))
            dev.setdefault(li["ifname"], {})["link"] = {
                "rx_packets": st.get("rx", {}).get("packets", 0),
                "rx_bytes": st.get("rx", {}).get("bytes", 0),
                "rx_dropped": st.get("rx", {}).get("dropped", 0),
                "tx_dropped": st.get("tx", {}).get("dropped", 0)}
    return out
