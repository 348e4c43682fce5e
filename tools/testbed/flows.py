#!/usr/bin/env python3
"""Background TCP traffic between a testbed's hosts, one instance per host.

    dlcp-testbed run --id ID --port 29700 -- \\
        python3 tools/testbed/flows.py --rate 1gbit --load 0.5 \\
        --stop-file /tmp/stop --out DIR

Every instance serves on --port and opens flows to the others: Poisson
arrivals at --load x --rate / the mean flow size, each to a uniformly
chosen other host, sizes drawn from the web-search (DCTCP, Alizadeh et
al. 2010) or data-mining (VL2, Greenberg et al. 2009) distribution, the
simulator's `workload.background` traffic (src/sim/workload.c has the
same CDFs, linearly interpolated).  A flow is one TCP connection: an
8-byte length, that many bytes, and a 1-byte answer once the receiver
has them all; its completion time runs from connect() to the answer.

The peers come from dlcp-testbed's variables (RANK, TESTBED_ADDRS).
Arrivals stop at --duration seconds or once --stop-file exists; the
instance then waits up to --drain seconds for its open flows and for its
peers' flows into it (each instance leaves a marker in DIR once its own
flows ended), and writes DIR/flows-RANK.json: per flow its start
(CLOCK_REALTIME, s, comparable across the testbed's namespaces), size,
completion time (s; null if it did not finish) and destination rank, and
the flows that failed with the reason.  --ecn turns on ECN for the
namespace's TCP (net.ipv4.tcp_ecn=1), so the flows answer the testbed's
--ecn-k marks.  It prints one summary line; exit 1 on a failed flow.
"""

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from testbed import cli  # noqa: E402  (parse_rate, as dlcp-testbed's --rate)

# (bytes, cumulative probability); src/sim/workload.c's tables.
CDFS = {
    "websearch": [(0, 0), (10000, 0.15), (20000, 0.2), (30000, 0.3),
                  (50000, 0.4), (80000, 0.53), (200000, 0.6), (1e6, 0.7),
                  (2e6, 0.8), (5e6, 0.9), (1e7, 0.97), (3e7, 1.0)],
    "datamining": [(0, 0), (180, 0.1), (216, 0.2), (560, 0.3), (900, 0.4),
                   (1100, 0.5), (1870, 0.6), (3160, 0.7), (10000, 0.8),
                   (400000, 0.9), (3.16e6, 0.95), (1e8, 0.98), (1e9, 1.0)],
}
HEADER = 8
ANSWER = b"\x01"
STOP_POLL_S = 0.05


def cdf_mean(cdf):
    return sum((p1 - p0) * (b0 + b1) / 2
               for (b0, p0), (b1, p1) in zip(cdf, cdf[1:]))


def cdf_draw(cdf, u):
    for (b0, p0), (b1, p1) in zip(cdf, cdf[1:]):
        if u <= p1 or (b1, p1) == cdf[-1]:
            x = b0 + ((u - p0) / (p1 - p0) if p1 > p0 else 0) * (b1 - b0)
            return max(1, int(x + 0.5))
    raise AssertionError("a CDF ends at 1")


class Sink(asyncio.Protocol):
    """The receiving end of one flow: counts its bytes, answers once."""

    def __init__(self, server):
        self.server = server
        self.header = b""
        self.need = None
        self.got = 0

    def connection_made(self, transport):
        self.transport = transport
        self.server.open += 1

    def connection_lost(self, exc):
        self.server.open -= 1

    def data_received(self, data):
        if self.need is None:
            take = HEADER - len(self.header)
            self.header += data[:take]
            data = data[take:]
            if len(self.header) < HEADER:
                return
            self.need = int.from_bytes(self.header, "big")
            if not 0 < self.need <= self.server.max_bytes:
                self.server.bad += 1
                self.transport.abort()
                return
        before = self.got
        self.got += len(data)
        if before < self.need <= self.got:
            self.server.received += 1
            self.transport.write(ANSWER)


class Server:
    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.open = 0
        self.received = 0
        self.bad = 0


class Source(asyncio.Protocol):
    """The sending end: resolves |done| with the answer's arrival time."""

    def __init__(self, done):
        self.done = done

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        if not self.done.done():
            self.done.set_result(time.monotonic())

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_exception(ConnectionError(
                str(exc) if exc else "closed before the answer"))


async def one_flow(loop, addr, port, size, payload, record):
    """Sends one flow; fills |record| (start, size, fct, dst) in place."""
    done = loop.create_future()
    t0 = time.monotonic()
    transport, _ = await loop.create_connection(lambda: Source(done), addr,
                                                port)
    try:
        transport.write(size.to_bytes(HEADER, "big"))
        left = size
        while left:
            n = min(left, len(payload))
            transport.write(payload[:n])
            left -= n
        record[2] = await done - t0
    finally:
        transport.close()


def done_marker(out, rank):
    """The file an instance leaves in the shared --out directory once its
    own flows have ended: a peer's flow into this host may still be in
    flight until every instance has left one (a SYN lost to a full queue
    is sent again only after a second)."""
    return os.path.join(out, f".flows-done-{rank}")


async def generate(a, rank, addrs):
    loop = asyncio.get_running_loop()
    cdf = CDFS[a.dist]
    rate_flows = a.load * a.rate / 8 / cdf_mean(cdf)
    rng = random.Random(a.seed * 1000003 + rank)
    server = Server(int(cdf[-1][0]))
    srv = await loop.create_server(lambda: Sink(server), addrs[rank], a.port,
                                   reuse_address=True)
    # Every peer's server must listen before the first flow goes out.
    await asyncio.sleep(a.start_delay)
    payload = memoryview(bytes(1 << 20))
    peers = [r for r in range(len(addrs)) if r != rank]
    records, failed, tasks = [], [], []
    t_end = time.monotonic() + a.duration if a.duration else None

    def stopped():
        return ((t_end is not None and time.monotonic() >= t_end) or
                (a.stop_file and os.path.exists(a.stop_file)))

    async def run(rec):
        try:
            await one_flow(loop, addrs[rec[3]], a.port, rec[1], payload, rec)
        except OSError as e:  # ConnectionError among them
            failed.append({"dst": rec[3], "size": rec[1], "start": rec[0],
                           "error": str(e)})

    next_at = time.monotonic()
    while not stopped():
        next_at += rng.expovariate(rate_flows)
        while time.monotonic() < next_at and not stopped():
            await asyncio.sleep(min(STOP_POLL_S,
                                    max(0.0, next_at - time.monotonic())))
        if stopped():
            break
        rec = [time.time(), cdf_draw(cdf, rng.random()), None,
               rng.choice(peers)]
        records.append(rec)
        tasks.append(asyncio.ensure_future(run(rec)))
    deadline = time.monotonic() + a.drain
    pending = [t for t in tasks if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=max(0.0, deadline -
                                                time.monotonic()))
    for t in tasks:
        t.cancel()
    open(done_marker(a.out, rank), "w").close()
    while time.monotonic() < deadline and (server.open or not all(
            os.path.exists(done_marker(a.out, r))
            for r in range(len(addrs)))):
        await asyncio.sleep(STOP_POLL_S)
    srv.close()
    return records, failed, server


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=cli.parse_rate, required=True,
                    help="each host's link rate (1gbit, 10g, ...)")
    ap.add_argument("--load", type=float, required=True,
                    help="offered load per host, a fraction of --rate in "
                         "(0, 1]")
    ap.add_argument("--dist", choices=sorted(CDFS), default="websearch")
    ap.add_argument("--port", type=cli.int_range(1, 65535), default=5301)
    ap.add_argument("--seed", type=cli.int_range(0, 2**31), default=1)
    ap.add_argument("--duration", type=float, default=None,
                    help="seconds of arrivals (or until --stop-file)")
    ap.add_argument("--stop-file", default=None)
    ap.add_argument("--drain", type=float, default=10.0,
                    help="seconds to wait for open flows after the stop")
    ap.add_argument("--start-delay", type=float, default=1.0,
                    help="seconds between listening and the first flow")
    ap.add_argument("--ecn", action="store_true",
                    help="ECN on this namespace's TCP (net.ipv4.tcp_ecn=1)")
    ap.add_argument("--out", required=True, help="directory of the results")
    a = ap.parse_args()
    if not 0 < a.load <= 1:
        ap.error(f"--load: '{a.load}': expected a fraction in (0, 1]")
    if a.duration is None and not a.stop_file:
        ap.error("give --duration or --stop-file (when to stop)")
    if a.duration is not None and a.duration <= 0:
        ap.error(f"--duration: '{a.duration}': expected seconds > 0")
    if not os.path.isdir(a.out):
        ap.error(f"--out: '{a.out}': not a directory")
    try:
        addrs = os.environ["TESTBED_ADDRS"].split(",")
        rank = int(os.environ["RANK"])
    except (KeyError, ValueError):
        ap.error("RANK and TESTBED_ADDRS unset: run under "
                 "'dlcp-testbed run'")
    if len(addrs) < 2 or not 0 <= rank < len(addrs):
        ap.error(f"RANK {rank} of TESTBED_ADDRS '{','.join(addrs)}': "
                 "expected at least 2 hosts and a rank among them")
    if a.ecn:
        try:
            with open("/proc/sys/net/ipv4/tcp_ecn", "w") as f:
                f.write("1")
        except OSError as e:
            sys.exit(f"flows: --ecn: net.ipv4.tcp_ecn: {e}")
    if os.path.exists(done_marker(a.out, rank)):
        os.remove(done_marker(a.out, rank))  # a run's before in this --out
    records, failed, server = asyncio.run(generate(a, rank, addrs))
    out = os.path.join(a.out, f"flows-{rank}.json")
    with open(out, "w") as f:
        json.dump({"rank": rank, "addr": addrs[rank], "rate_bps": a.rate,
                   "load": a.load, "dist": a.dist,
                   "flows": records, "failed": failed,
                   "received": server.received,
                   "refused_headers": server.bad}, f)
    done = sum(1 for r in records if r[2] is not None)
    print(f"flows: host {rank}: {len(records)} started, {done} finished, "
          f"{len(failed)} failed, {server.received} received -> {out}")
    if failed:
        print(f"flows: host {rank}: first failure: {failed[0]}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
