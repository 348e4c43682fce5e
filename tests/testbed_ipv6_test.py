#!/usr/bin/python3
"""An IPv6 testbed (dlcp-testbed up --ipv6): 2 hosts in 2 racks, 2 spines,
1 % random loss at the switch ports.  Ranks get an IPv6 MASTER_ADDR, so
the job's rendezvous, control and data paths are IPv6; its all-reduce is
exact at p = 0, the switch ports dropped about 1 % of the packets, and
DLCP_PATHS=16 source ports spread the traffic over both spines (IPv6
multipath hashed on L4 ports).  No address may be tentative once the
testbed is up: a switch whose link-local address is still in duplicate
address detection resolves no next hop through that link, and the flows
hashed onto it are dropped.  Then the testbed is taken down and
nothing may be left.

usage: testbed_ipv6_test.py DLCP_BENCH"""

import json
import os
import subprocess
import sys
import tempfile

import testbed_support as ts


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "2", "--racks", "2", "--spines", "2",
                       "--loss", "1%", "--rate", "1gbit", "--ipv6") as tb_id:
        tentative = [f"{ns}: {line.strip()}"
                     for ns in ts.namespaces(tb_id)
                     for line in subprocess.run(
                         ["ip", "-n", ns, "-6", "addr", "show", "tentative"],
                         capture_output=True, text=True,
                         check=True).stdout.splitlines()
                     if "inet6" in line]
        ts.check(tentative == [],
                 f"no address tentative once the testbed is up ({tentative})")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "bench.json")
            p = ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
                           "sh", "-c", 'echo "MASTER_ADDR=$MASTER_ADDR"; '
                           'exec "$@"', "sh", dlcp_bench, "-b", "1M", "-e",
                           "1M", "-n", "6", "-w", "1", "-c", "1", "-J", out,
                           env=dict(os.environ, DLCP_PATHS="16"))
            ts.check("MASTER_ADDR=fd00::1" in p.stdout,
                     f"ranks got the IPv6 MASTER_ADDR:\n{p.stdout}")
            with open(out) as f:
                res = json.loads(f.readline())
            ts.check(res["ranks"] == 2, "both ranks joined")
            ts.check(res["wrong"] == 0 and res["delivered_min"] == 1.0,
                     "p = 0 over IPv6: every element exact and delivered")
        stats = json.loads(ts.testbed("stats", tb_id, "--json").stdout)
        down = [s for s in stats.values()
                if s["dir"] == "down" and "-" not in s["link"]]
        lost = sum(s["lost"] for s in down)
        sent = sum(s["packets"] + s["lost"] for s in down)
        ts.check(0.004 < lost / sent < 0.02,
                 f"the switch ports dropped about 1 % ({lost}/{sent})")
        for rack in (0, 1):
            per_spine = [stats[f"r{rack}-s{s}:up"]["packets"] for s in (0, 1)]
            ts.check(min(per_spine) > 0.01 * sum(per_spine),
                     f"rack {rack}'s packets took both spines ({per_spine})")


if __name__ == "__main__":
    main()
