"""Starts one rank per host inside its namespace, as dlcp-run does on one
host: torchrun's variables, output prefixed "[rank R] ", and when a rank
fails the others are stopped and the failure names the rank."""

import os
import selectors
import signal
import subprocess
import sys
import time

from . import topology


AGG_PORT = 9555


# After a rank failed, how long the others may take to end on their own
# before SIGTERM (dlcp-run's SETTLE_MS).
SETTLE_S = 1.0


def with_port(ip):
    """|ip|:AGG_PORT, an IPv6 address in brackets."""
    return f"[{ip}]:{AGG_PORT}" if ":" in ip else f"{ip}:{AGG_PORT}"


def host_of(address):
    """The IP address of "ADDR:PORT" or "[IPV6]:PORT"."""
    return address.rsplit(":", 1)[0].strip("[]")


def agg_address(rack, ipv6=False):
    """The address:port of rack |rack|'s aggregation switch: its
    host-facing address, IPv6 with |ipv6| (an IPv6 testbed's switches
    speak IPv6, as its jobs do)."""
    return with_port(topology.gateway6(rack) if ipv6 else f"10.0.{rack}.254")


def spine_agg_address(t, rack, spine):
    """The address:port at which rack |rack|'s switch reaches spine
    |spine|'s aggregation switch: the spine's end of their link (its IPv6
    one on an IPv6 testbed), so the partial sums of tree |spine| take that
    link and the spine answers from the address the rack's switch sent
    to."""
    sp = t.spines[spine]
    cidr = next(c for dev, c in t.addrs[sp]
                if dev == f"r{rack}" and (":" in c) == t.ipv6)
    return with_port(cidr.split("/")[0])


def start_agg_switch(t, binary, mem, threads, log_path, policy="shared",
                     static_parts=None, ns=None, bind=None, parents=()):
    """Starts |binary| (dlcp-switch) in namespace |ns| (rack 0's switch by
    default) on address |bind| (its host-facing address by default;
    0.0.0.0 or :: for a spine, which answers each rack on their link) with its
    pool shared by |policy| (|static_parts| partitions if static and
    given), passing its partial sums to |parents| (ADDR:PORT each: CINA's
    next switch, or one root per tree), output to |log_path|; waits until
    it listens and returns "ADDR:PORT".  It lives until the testbed's
    namespaces are removed."""
    ns = ns or t.racks[0]
    addr = bind or host_of(agg_address(0, t.ipv6))
    argv = ["ip", "netns", "exec", ns, binary, "--bind", addr, "--port",
            str(AGG_PORT), "--threads", str(threads), "--mem", str(mem),
            "--policy", policy]
    if policy == "static" and static_parts:
        argv += ["--static-parts", str(static_parts)]
    for parent in parents:
        argv += ["--parent", parent]
    with open(log_path, "w") as log:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if p.poll() is not None:
            with open(log_path) as f:
                raise ValueError(f"--agg-switch {binary} exited: "
                                 f"{f.read().strip()}")
        with open(log_path) as f:
            if "listening on" in f.read():
                return with_port(addr)
        time.sleep(0.05)
    p.kill()
    raise ValueError(f"--agg-switch {binary}: not listening after 10 s "
                     f"(see {log_path})")


def rank_env(hosts, rank, port, base, agg_switch=None, agg_trees=0):
    """torchrun's variables for |rank| of a job on |hosts| (its ranks in
    order), and TESTBED_ADDRS, every rank's address in rank order (for
    programs that talk to their peers without a rendezvous); with
    |agg_switch| (ADDR:PORT, or the comma-separated switches of every
    rack) DLCP_SWITCH, its rack's switch, and DLCP_INA_CHAIN for a chain,
    or with |agg_trees| DLCP_INA_LEAVES and DLCP_INA_TREES, unless |base|
    sets them."""
    h = hosts[rank]
    env = dict(base)
    if agg_switch and "," in agg_switch:
        env.setdefault("DLCP_SWITCH", agg_switch.split(",")[h.rack])
        if agg_trees:
            env.setdefault("DLCP_INA_LEAVES", agg_switch)
            env.setdefault("DLCP_INA_TREES", str(agg_trees))
        else:
            env.setdefault("DLCP_INA_CHAIN", agg_switch)
    elif agg_switch:
        env.setdefault("DLCP_SWITCH", agg_switch)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(len(hosts)),
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank), "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(len(hosts)),
        # An IPv6 testbed's jobs run over IPv6 (the runtime speaks its
        # MASTER_ADDR's version).
        "MASTER_ADDR": hosts[0].addr6 or hosts[0].addr,
        "MASTER_PORT": str(port),
        "DLCP_TOPO": f"rack{h.rack}",
        "TESTBED_ADDRS": ",".join(x.addr for x in hosts),
    })
    return env


def describe(status):
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def rank_jobs(t, argv, port, agg_switch=None, on=None, agg_trees=0):
    """One job per host of |on| (indices into the testbed's hosts, all of
    them if None), ranks numbered in that order: (output prefix,
    namespace, argv, environment); DLCP_SWITCH (and the chain's or trees'
    variables) from |agg_switch| and |agg_trees| unless the caller's
    environment sets it."""
    hosts = [t.hosts[i] for i in on] if on is not None else t.hosts
    return [(f"[rank {r}] ", h.ns, argv,
             rank_env(hosts, r, port, os.environ, agg_switch, agg_trees))
            for r, h in enumerate(hosts)]


MPI_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "netns-rsh")


def mpirun_jobs(t, argv, extra):
    """One job: mpirun in host 0's namespace starting len(hosts) ranks, one
    per host, through the netns-rsh agent, over TCP on the testbed links
    (never shared memory or loopback).  |extra| goes before the program
    (an mpi_yield_when_idle in it replaces the one below)."""
    hosts = ",".join(h.ns for h in t.hosts)
    # Every emulated host runs on this machine's cores, but Open MPI sees a
    # slot per host and busy-polls as if each rank had a core: with as many
    # hosts as cores or more a waiting rank then keeps the core from the
    # peer it waits for, or from the links' packet processing, until the
    # scheduler's tick (a 4-host 8-byte all-reduce on 2 cores took 8 ms,
    # 64 us yielding; 2 hosts on 2 cores 8.0 ms, 39 us).  Yield as Open MPI
    # does when it knows a node is oversubscribed.
    yield_idle = [] if "mpi_yield_when_idle" in extra else [
        "--mca", "mpi_yield_when_idle",
        "1" if len(t.hosts) >= (os.cpu_count() or 1) else "0"]
    cmd = ["mpirun", "--allow-run-as-root", "-np", str(len(t.hosts)),
           "--host", hosts, "--map-by", "node",
           "--mca", "plm_rsh_agent", MPI_AGENT,
           "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "eth0",
           "--mca", "oob_tcp_if_include", "eth0"] + yield_idle + extra + argv
    return [("", t.hosts[0].ns, cmd, dict(os.environ))]


class Ranks:
    """The running jobs; stop() terminates every one still running."""

    def __init__(self, jobs, grace_s):
        self.grace_s = grace_s
        self.procs = []
        self.prefixes = []
        for prefix, ns, argv, env in jobs:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns] + argv, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True)
            self.procs.append(p)
            self.prefixes.append(prefix)

    def signal(self, sig):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass

    def stop(self):
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline and any(
                p.poll() is None for p in self.procs):
            time.sleep(0.02)
        self.signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def supervise(self, stop_requested):
        """Copies output until every job exited; returns (index of the
        failed job or None, its status).  The first rank to fail stops the
        others if they have not ended SETTLE_S later (a collective's
        failure reaches every rank, and each says why as it fails, as with
        dlcp-run); stop_requested() turning true (a signal) stops them at
        once."""
        sel = selectors.DefaultSelector()
        partial = {}
        for r, p in enumerate(self.procs):
            for f, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                os.set_blocking(f.fileno(), False)
                sel.register(f, selectors.EVENT_READ, (r, out))
                partial[f] = b""
        failed, status, stopping, failed_at = None, 0, False, None
        while sel.get_map():
            for key, _ in sel.select(timeout=0.1):
                r, out = key.data
                data = key.fileobj.read(65536)
                if not data:
                    sel.unregister(key.fileobj)
                    data, partial[key.fileobj] = partial[key.fileobj], b""
                    if data:
                        data += b"\n"
                buf = partial.get(key.fileobj, b"") + data
                *lines, rest = buf.split(b"\n")
                if key.fileobj in sel.get_map():
                    partial[key.fileobj] = rest
                for line in lines:
                    out.write(self.prefixes[r] +
                              line.decode(errors="replace") + "\n")
                out.flush()
            for r, p in enumerate(self.procs):
                rc = p.poll()
                if rc not in (None, 0) and failed is None and not stopping:
                    failed, status = r, rc
                    failed_at = time.monotonic()
            settled = (failed is not None and
                       time.monotonic() > failed_at + SETTLE_S)
            if (settled or stop_requested()) and not stopping:
                stopping = True
                self.signal(signal.SIGTERM)
                kill_at = time.monotonic() + self.grace_s
            if stopping and time.monotonic() > kill_at:
                self.signal(signal.SIGKILL)
        for r, p in enumerate(self.procs):
            rc = p.wait()
            if rc != 0 and failed is None and not stopping:
                failed, status = r, rc  # exited after closing its output
        return failed, status
