"""The emulated cluster as data: namespaces, links, addresses and routes.

Nothing here touches the system; netlink.py turns a Topology into
commands.  Layout (R racks, N hosts, S spines):

  host i  (namespace <prefix>h<i>, interface eth0, 10.0.<r>.<j+1>/32 where
           r = i*R//N is its rack and j its index in the rack; every
           packet goes to the gateway 10.0.<r>.254)
     |  link "h<i>": eth0 <-> port h<i> of its rack switch
  rack r  (namespace <prefix>r<r>: a router, 10.0.<r>.254/32 on every host
           port and a /32 route to each of its hosts)
     |  link "r<r>-s<s>": port s<s> <-> port r<r> of spine s,
     |  10.1.<s>.<2r>/31 on the rack side, 10.1.<s>.<2r+1> on the spine's
  spine s (namespace <prefix>s<s>: routes each rack's /24 to its port)

With IPv6 (dlcp-testbed up --ipv6) every host, port and route has an
IPv6 twin beside its IPv4 one, the numbers in hex: host fd00::<r>:<j+1>,
gateway fd00::<r>:fe, rack-spine link fd01::<s>:<2r>/127 (rack side) and
fd01::<s>:<2r+1> (spine side), a rack's hosts fd00::<r>:0/112.

A rack switch reaches another rack through every spine: one multipath
route whose next hops are hashed on the L4 ports
(fib_multipath_hash_policy=1), so flows with different UDP source ports
take different spines.

The switches route (layer 3) rather than bridge because the IP receive
path detaches a packet from its sending socket (ip_rcv_core's skb_orphan):
a veth keeps that reference across namespaces and a bridge forwards
without it, so behind a bridge every packet waiting in a switch queue
would still count against its sender's socket buffer (and TCP small
queues) and stall the sender, which no real switch can do.  With routing,
only the host's own NIC queue (its egress limiter) pushes back, as on a
real host.

Every link has two directions, "up" (away from the host, or rack to
spine) and "down".  Each direction has a rate limiter (the sending end's
egress queue) and a filter point on the switch side where random loss and
ECN marking happen (never at a host's own egress):
  h<i> up:    limiter at the host's eth0, filter at the switch port's
              ingress (the packet has left the host)
  h<i> down:  limiter and filter at the switch port's egress
  r-s up/down: limiter and filter at the sending switch's egress
"""

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class End:
    ns: str
    dev: str


@dataclass(frozen=True)
class Direction:
    link: str  # link name, e.g. "h0" or "r0-s1"
    dir: str  # "up" or "down"
    limiter: End  # egress qdisc that shapes this direction
    hook: str  # "ingress" or "egress": where the filter is attached
    filter: End  # switch-side end that carries the BPF filter
    receiver: End  # the end that receives this direction
    marks: bool  # ECN marking applies (a switch queue, not a NIC's)

    @property
    def key(self):
        return f"{self.link}:{self.dir}"


@dataclass
class Host:
    index: int
    rack: int
    ns: str
    addr: str
    addr6: str = ""  # with IPv6 only


@dataclass
class Topology:
    prefix: str
    hosts: list = field(default_factory=list)
    racks: list = field(default_factory=list)  # namespace names
    spines: list = field(default_factory=list)  # namespace names
    links: list = field(default_factory=list)  # (name, End a, End b)
    directions: list = field(default_factory=list)
    # Per namespace: list of (kind, args) configuration items, see build().
    addrs: dict = field(default_factory=dict)  # ns -> [(dev, cidr)]
    routes: dict = field(default_factory=dict)  # ns -> [route args]
    routes6: dict = field(default_factory=dict)  # ns -> [IPv6 route args]
    ipv6: bool = False
    routers: list = field(default_factory=list)  # namespaces forwarding IP

    @property
    def namespaces(self):
        return [h.ns for h in self.hosts] + self.racks + self.spines

    def direction(self, key):
        for d in self.directions:
            if d.key == key:
                return d
        raise KeyError(key)


def rack_of(i, hosts, racks):
    """Rack of host i: consecutive hosts share a rack, sizes differ by <= 1."""
    return i * racks // hosts


def v6(prefix, a, b):
    """The IPv6 address <prefix>::<a>:<b>, in canonical text."""
    return str(ipaddress.IPv6Address(f"{prefix}::{a:x}:{b:x}"))


def host6(r, j):
    """IPv6 address of host j (0-based) of rack r."""
    return v6("fd00", r, j + 1)


def gateway6(r):
    return v6("fd00", r, 0xfe)


def build(prefix, hosts, racks, spines, ipv6=False):
    """Returns the Topology of |hosts| hosts in |racks| racks joined by
    |spines| spines (0 when racks == 1), with IPv6 beside IPv4 if |ipv6|.
    Raises ValueError when the shape is impossible."""
    if not 1 <= hosts <= 250 * racks:
        raise ValueError(f"hosts: expected 1..{250 * racks}, got {hosts}")
    if not 1 <= racks <= min(hosts, 120):
        raise ValueError(f"racks: expected 1..{min(hosts, 120)} "
                         f"(at most one per host), got {racks}")
    if racks == 1 and spines != 0:
        raise ValueError("spines: one rack has no spines (use --racks >= 2)")
    if racks > 1 and not 1 <= spines <= 64:
        raise ValueError(f"spines: expected 1..64 with {racks} racks, "
                         f"got {spines}")
    t = Topology(prefix=prefix, ipv6=ipv6)
    t.racks = [f"{prefix}r{r}" for r in range(racks)]
    t.spines = [f"{prefix}s{s}" for s in range(spines)]
    in_rack = [0] * racks
    for i in range(hosts):
        r = rack_of(i, hosts, racks)
        j = in_rack[r]
        in_rack[r] += 1
        h = Host(index=i, rack=r, ns=f"{prefix}h{i}", addr=f"10.0.{r}.{j + 1}",
                 addr6=host6(r, j) if ipv6 else "")
        t.hosts.append(h)
        sw = t.racks[r]
        host_end, port = End(h.ns, "eth0"), End(sw, f"h{i}")
        t.links.append((f"h{i}", host_end, port))
        t.directions.append(Direction(f"h{i}", "up", host_end, "ingress",
                                      port, port, False))
        t.directions.append(Direction(f"h{i}", "down", port, "egress", port,
                                      host_end, True))
        t.addrs.setdefault(h.ns, []).append(("eth0", f"{h.addr}/32"))
        t.routes.setdefault(h.ns, []).extend([
            f"10.0.{r}.254 dev eth0 scope link",
            f"default via 10.0.{r}.254 dev eth0"])
        t.addrs.setdefault(sw, []).append((f"h{i}", f"10.0.{r}.254/32"))
        t.routes.setdefault(sw, []).append(f"{h.addr} dev h{i} scope link")
        if ipv6:
            t.addrs[h.ns].append(("eth0", f"{h.addr6}/128"))
            t.routes6.setdefault(h.ns, []).extend([
                f"{gateway6(r)} dev eth0",
                f"default via {gateway6(r)} dev eth0"])
            t.addrs[sw].append((f"h{i}", f"{gateway6(r)}/128"))
            t.routes6.setdefault(sw, []).append(f"{h.addr6} dev h{i}")
    t.routers = t.racks + t.spines
    for r, sw in enumerate(t.racks):
        for s, sp in enumerate(t.spines):
            up, down = End(sw, f"s{s}"), End(sp, f"r{r}")
            name = f"r{r}-s{s}"
            t.links.append((name, up, down))
            t.directions.append(Direction(name, "up", up, "egress", up, down,
                                          True))
            t.directions.append(Direction(name, "down", down, "egress", down,
                                          up, True))
            t.addrs[sw].append((f"s{s}", f"10.1.{s}.{2 * r}/31"))
            t.addrs.setdefault(sp, []).append((f"r{r}", f"10.1.{s}.{2 * r + 1}/31"))
            t.routes.setdefault(sp, []).append(
                f"10.0.{r}.0/24 via 10.1.{s}.{2 * r} dev r{r}")
            if ipv6:
                t.addrs[sw].append((f"s{s}", f"{v6('fd01', s, 2 * r)}/127"))
                t.addrs[sp].append((f"r{r}",
                                    f"{v6('fd01', s, 2 * r + 1)}/127"))
                t.routes6.setdefault(sp, []).append(
                    f"{v6('fd00', r, 0)}/112 via {v6('fd01', s, 2 * r)} "
                    f"dev r{r}")
        for r2 in range(racks):
            if r2 != r:
                hops = " ".join(f"nexthop via 10.1.{s}.{2 * r + 1} dev s{s}"
                                for s in range(spines))
                t.routes.setdefault(sw, []).append(f"10.0.{r2}.0/24 {hops}")
                if ipv6:
                    hops6 = " ".join(
                        f"nexthop via {v6('fd01', s, 2 * r + 1)} dev s{s}"
                        for s in range(spines))
                    t.routes6.setdefault(sw, []).append(
                        f"{v6('fd00', r2, 0)}/112 {hops6}")
    return t


def link_names(t):
    return [name for name, _, _ in t.links]


def select(t, spec):
    """Directions matched by |spec|, "LINK[:DIR]" where LINK is a link name,
    "hosts" (every host link), "fabric" (every rack-spine link) or "all",
    and DIR is "up", "down" or "both" (the default)."""
    link, _, d = spec.partition(":")
    d = d or "both"
    if d not in ("up", "down", "both"):
        raise ValueError(f"'{spec}': direction must be up, down or both")
    names = link_names(t)
    if link not in names and link not in ("hosts", "fabric", "all"):
        raise ValueError(f"'{spec}': no link '{link}' (links: "
                         f"{', '.join(names)}, or hosts, fabric, all)")

    def matches(x):
        if d != "both" and x.dir != d:
            return False
        if link == "all":
            return True
        if link == "hosts":
            return "-" not in x.link
        if link == "fabric":
            return "-" in x.link
        return x.link == link

    return [x for x in t.directions if matches(x)]
