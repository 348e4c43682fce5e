"""Builds and removes a Topology with ip, tc, ethtool and sysctl.

Every device is created inside its namespace (veth pairs are made in one
namespace with the peer moved straight into the other), so the root
namespace never sees a testbed interface and two testbeds never collide
on a device name.
"""

import json
import os
import shutil
import signal
import subprocess
import time

NETNS_DIR = "/run/netns"
# `ip netns exec NS` mounts the files of /etc/netns/NS over those of /etc.
NETNS_ETC = "/etc/netns"


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
    """One FIFO drained at the link rate: the default limiter."""
    return [f"tc qdisc replace dev {dev} root tbf rate {rate_bps}bit "
            f"burst {burst} limit {limit}"]


# DSCP class selector (the top 3 bits) -> HTB class 1:(10 + selector).
PRIO_CLASSES = 8


def htb_prio(dev, rate_bps, burst, limit, mtu, ipv6=False):
    """Strict priority by DSCP class selector (CS7 first, as 802.1p/DCB
    switches schedule): one HTB class per selector, each guaranteed 1 % of
    the link and allowed all of it, HTB priority 7 - selector (0 is served
    first when classes borrow), a byte FIFO of |limit| each; u32 filters
    on the TOS byte (and with |ipv6| on the traffic class) pick the class
    (unmatched: CS0)."""
    guaranteed = max(rate_bps // 100, 8 * mtu)
    cmds = [f"tc qdisc replace dev {dev} root handle 1: htb default 10",
            f"tc class add dev {dev} parent 1: classid 1:1 htb rate "
            f"{rate_bps}bit ceil {rate_bps}bit burst {burst} cburst {burst}"]
    for cs in range(PRIO_CLASSES):
        cmds += [f"tc class add dev {dev} parent 1:1 classid 1:{10 + cs} htb "
                 f"rate {guaranteed}bit ceil {rate_bps}bit burst {burst} "
                 f"cburst {burst} quantum {mtu} prio {7 - cs}",
                 f"tc qdisc add dev {dev} parent 1:{10 + cs} bfifo limit "
                 f"{limit}"]
        if cs:
            cmds.append(f"tc filter add dev {dev} parent 1: protocol ip prio "
                        f"{cs} u32 match ip tos {cs << 5:#x} 0xe0 flowid "
                        f"1:{10 + cs}")
            if ipv6:
                cmds.append(f"tc filter add dev {dev} parent 1: protocol ipv6 "
                            f"prio {PRIO_CLASSES + cs} u32 match ip6 "
                            f"priority {cs << 5:#x} 0xe0 flowid 1:{10 + cs}")
    return cmds


def write_hosts_files(t):
    """Gives every host namespace an /etc/hosts (through /etc/netns) that
    names the testbed's hosts.  Programs that resolve their peers by name
    (Open MPI's launcher and daemons) otherwise ask the machine's DNS
    server, which no namespace can reach: each lookup waited for the
    resolver's timeout, 80 s per mpirun, against 1.3 s with the names."""
    with open("/etc/hosts") as f:
        base = f.read()
    names = "".join(f"{h.addr} {h.ns}\n" for h in t.hosts)
    for h in t.hosts:
        d = os.path.join(NETNS_ETC, h.ns)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write(base.rstrip("\n") + "\n# dlcp-testbed\n" + names)


def remove_etc(prefix):
    """Removes the /etc/netns directories of namespaces named |prefix|*."""
    if os.path.isdir(NETNS_ETC):
        for name in os.listdir(NETNS_ETC):
            if name.startswith(prefix):
                shutil.rmtree(os.path.join(NETNS_ETC, name),
                              ignore_errors=True)


def create(t, s):
    """Creates topology |t| with settings |s| (a dict: mtu, rate_bps,
    fabric_rate_bps, queue_bytes, burst_us, dscp_prio, host_gro).  On
    failure the caller removes what exists (destroy)."""
    for ns in t.namespaces:
        run(["ip", "netns", "add", ns])
    write_hosts_files(t)
    for _, a, b in t.links:
        run(["ip", "-n", a.ns, "link", "add", a.dev, "type", "veth", "peer",
             "name", b.dev, "netns", b.ns])
    if t.ipv6:
        # IPv6 with static addresses and routes: no router solicitations
        # or advertisements on links, and no duplicate address detection,
        # for the static addresses (nodad, below) nor the link-local ones:
        # a switch whose link-local address is still tentative sends no
        # neighbour solicitation, so the next hop behind that link stays
        # unresolved and every flow hashed onto it is dropped for the
        # first seconds (a job in CI lost the half of its packets that
        # took one spine).
        v6 = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=0",
              "sysctl -qw net.ipv6.conf.default.disable_ipv6=0",
              "for d in /proc/sys/net/ipv6/conf/*; do "
              "echo 0 > $d/router_solicitations; echo 0 > $d/accept_ra; "
              "echo 0 > $d/accept_dad; echo 0 > $d/dad_transmits; "
              "done"]
    else:
        # No IPv6 chatter (router solicitations, DAD) on links.
        v6 = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
              "sysctl -qw net.ipv6.conf.default.disable_ipv6=1"]
    scripts = {ns: ["ip link set lo up"] + v6 for ns in t.namespaces}
    host_ns = {h.ns for h in t.hosts}
    for _, a, b in t.links:
        for e in (a, b):
            sc = scripts[e.ns]
            sc.append(f"ip link set {e.dev} mtu {s['mtu']}")
            # Segmentation offloads off: the rate limiter and the loss
            # filter see wire-sized packets, as a real link would.
            sc.append(f"ethtool -K {e.dev} tso off gso off gro off "
                      f"tx-udp-segmentation off 2>/dev/null || "
                      f"ethtool -K {e.dev} tso off gso off gro off")
            if s.get("host_gro") and e.ns in host_ns:
                # A host's own end receives what its link's limiter and
                # loss filter let through: coalescing there is a NIC's GRO.
                sc.append(f"ethtool -K {e.dev} gro on")
            sc.append(f"ip link set {e.dev} up")
            sc.append(f"tc qdisc add dev {e.dev} clsact")
    for d in t.directions:
        rate = s["fabric_rate_bps"] if "-" in d.link else s["rate_bps"]
        burst = max(4 * s["mtu"], rate // 8 * s["burst_us"] // 1_000_000)
        limit = max(s["queue_bytes"], 2 * burst)
        if s.get("dscp_prio"):
            scripts[d.limiter.ns] += htb_prio(d.limiter.dev, rate, burst,
                                              limit, s["mtu"], t.ipv6)
        else:
            scripts[d.limiter.ns] += tbf(d.limiter.dev, rate, burst, limit)
    for ns, addrs in t.addrs.items():
        for dev, cidr in addrs:
            nodad = " nodad" if ":" in cidr else ""
            scripts[ns].append(f"ip addr add {cidr} dev {dev}{nodad}")
    for ns in t.routers:
        scripts[ns] += ["sysctl -qw net.ipv4.ip_forward=1",
                        "sysctl -qw net.ipv4.fib_multipath_hash_policy=1",
                        "sysctl -qw net.ipv4.conf.all.send_redirects=0",
                        # Multipath return traffic may arrive on any uplink.
                        "for f in /proc/sys/net/ipv4/conf/*/rp_filter; do "
                        "echo 0 > $f; done"]
        if t.ipv6:
            scripts[ns] += ["sysctl -qw net.ipv6.conf.all.forwarding=1",
                            "sysctl -qw net.ipv6.fib_multipath_hash_policy=1"]
    for ns, routes in t.routes.items():
        for r in routes:
            scripts[ns].append(f"ip route add {r}")
    for ns, routes in t.routes6.items():
        for r in routes:
            scripts[ns].append(f"ip -6 route add {r}")
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
    """Per namespace and device: the limiter's counters (its root qdisc)
    and the interface's rx/tx counters."""
    out = {}
    for ns in t.namespaces:
        text = in_ns(ns, "tc -s -j qdisc show; echo '@@'; ip -s -j link show")
        qd, _, ln = text.partition("@@")
        dev = out.setdefault(ns, {})
        for q in json.loads(qd or "[]"):
            # The root qdisc (TBF, or HTB whose drops include its class
            # FIFOs').
            if q.get("root") and q.get("kind") in ("tbf", "htb"):
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
