#!/usr/bin/python3
"""A checked dlcp all-reduce across a 4-host, 2-rack testbed with 1 % random
loss at the switch ports: exact at loss bound p = 0, and at p = 0.05 every
rank delivers >= 95 % in every iteration and every delivered element is
exact; dlcp-bench's JSON carries each iteration's run-queue wait.  Then
the testbed is taken down and nothing may be left.  Then the
same at p = 0 on 2 hosts with GRO at the hosts' own interfaces (`up
--host-gro`, as real NICs): exact, GRO on at the hosts and off at the
switch, and rank 0 received datagrams coalesced; and with
DLCP_SEGMENT=8928 on those 1,500-byte links, exact, without a datagram
fragmented (the segment holds to the path's MTU: fragments under loss
fill the kernel's reassembly memory and the transfers stall).

usage: testbed_allreduce_test.py DLCP_BENCH"""

import json
import os
import re
import subprocess
import sys
import tempfile

import testbed_support as ts


def bench(tb_id, dlcp_bench, p, out, env=None):
    """Runs the checked all-reduce (with |env| added to the ranks'
    environment); returns its JSON row and rank 0's output."""
    run = ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
                     dlcp_bench, "-b", "1M", "-e", "1M", "-n", "6", "-w", "1",
                     "-p", str(p), "-c", "1", "-J", out,
                     env=dict(os.environ, **env) if env else None)
    with open(out) as f:
        return json.loads(f.readline()), run.stdout


def gro_of(ns, dev):
    """Whether GRO is on at interface |dev| of namespace |ns|."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-k", dev],
                         capture_output=True, text=True, check=True).stdout
    return "generic-receive-offload: on" in out


def fragments_made(ns):
    """IP fragments namespace |ns| has made (FragCreates)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
                         capture_output=True, text=True, check=True).stdout
    head, values = [line.split() for line in out.splitlines()
                    if line.startswith("Ip:")][:2]
    return int(values[head.index("FragCreates")])


def check_host_gro(dlcp_bench, d):
    with ts.testbed_up("-n", "2", "--loss", "1%", "--rate", "1gbit",
                       "--host-gro") as tb_id:
        ts.check(gro_of(f"dlcptb-{tb_id}-h0", "eth0") and
                 gro_of(f"dlcptb-{tb_id}-h1", "eth0"),
                 "--host-gro: GRO on at the hosts' interfaces")
        ts.check(not gro_of(f"dlcptb-{tb_id}-r0", "h0"),
                 "--host-gro: GRO off at the switch's ports")
        row, out = bench(tb_id, dlcp_bench, 0, os.path.join(d, "gro.json"))
        ts.check(row["wrong"] == 0 and row["delivered_min"] == 1.0,
                 "host GRO, p = 0: every element exact and delivered")
        m = re.search(r"(\d+) received, (\d+) of them coalesced", out)
        if m is None:
            ts.fail(f"rank 0 does not report coalesced datagrams:\n{out}")
        received, coalesced = int(m.group(1)), int(m.group(2))
        ts.check(0 < coalesced <= received,
                 f"host GRO: rank 0 received datagrams coalesced "
                 f"({coalesced} of {received})")
        made = [fragments_made(f"dlcptb-{tb_id}-h{h}") for h in (0, 1)]
        row, _ = bench(tb_id, dlcp_bench, 0, os.path.join(d, "seg.json"),
                       {"DLCP_SEGMENT": "8928"})
        ts.check(row["wrong"] == 0 and row["delivered_min"] == 1.0,
                 "DLCP_SEGMENT=8928 at MTU 1500: every element exact")
        after = [fragments_made(f"dlcptb-{tb_id}-h{h}") for h in (0, 1)]
        ts.check(after == made,
                 f"DLCP_SEGMENT=8928 at MTU 1500: no datagram fragmented "
                 f"(fragments made {made} -> {after})")


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "4", "--racks", "2", "--loss", "1%",
                       "--rate", "1gbit") as tb_id:
        with tempfile.TemporaryDirectory() as d:
            exact, _ = bench(tb_id, dlcp_bench, 0,
                             os.path.join(d, "p0.json"))
            ts.check(exact["wrong"] == 0, "p = 0: every element exact")
            ts.check(exact["delivered_min"] == 1.0,
                     "p = 0: everything delivered")
            waits = exact["iterations"]["runq_wait_us"]
            ts.check(len(waits) == 6 and min(waits) >= 0 and
                     (sum(waits) > 0 or
                      not os.path.exists("/proc/self/schedstat")),
                     f"the JSON has each iteration's run-queue wait, and "
                     f"four ranks' wake-ups waited for a CPU ({waits})")
            bound, _ = bench(tb_id, dlcp_bench, 0.05,
                             os.path.join(d, "p005.json"))
            ts.check(bound["delivered_min"] >= 0.95,
                     f"p = 0.05: delivered >= 95 % in every iteration "
                     f"(least {bound['delivered_min'] * 100:.2f} %)")
            ts.check(bound["wrong"] == 0,
                     "p = 0.05: exact where delivered")
        stats = json.loads(ts.testbed("stats", tb_id, "--json").stdout)
        lost = sum(s["lost"] for s in stats.values() if s["dir"] == "down"
                   and "-" not in s["link"])
        sent = sum(s["packets"] + s["lost"] for s in stats.values()
                   if s["dir"] == "down" and "-" not in s["link"])
        ts.check(0.004 < lost / sent < 0.02,
                 f"the switch ports dropped about 1 % ({lost}/{sent})")
    with tempfile.TemporaryDirectory() as d:
        check_host_gro(dlcp_bench, d)


if __name__ == "__main__":
    main()
