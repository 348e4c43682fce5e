#!/usr/bin/python3
"""Traffic between two racks spreads over the spines when dlcp uses K > 1
paths (source ports): the rack switches hash on L4 ports
(fib_multipath_hash_policy=1).  One host per rack, 2 spines, DLCP_PATHS=16
(16 port pairs per direction; all on one spine has probability 2^-15);
each spine must carry at least 1 % of each direction's packets.

usage: testbed_ecmp_test.py DLCP_BENCH"""

import json
import os
import re
import sys
import tempfile

import testbed_support as ts


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    veths = ts.root_veths()
    env = dict(os.environ, DLCP_PATHS="16")
    with tempfile.TemporaryDirectory() as d:
        stats = os.path.join(d, "links.json")
        p = ts.testbed("run", "-n", "2", "--racks", "2", "--spines", "2",
                   "--rate", "1gbit", "--stats", "none", "--stats-file",
                   stats, "--", dlcp_bench, "-b", "4M", "-e", "4M", "-n",
                   "3", "-w", "1", "-c", "1", env=env)
        with open(stats) as f:
            links = json.load(f)["links"]
    for rack, d in ((0, "up"), (1, "up")):
        per_spine = [links[f"r{rack}-s{s}:{d}"]["packets"] for s in (0, 1)]
        total = sum(per_spine)
        ts.check(total > 1000, f"rack {rack} sent {total} packets to the "
                 f"spines")
        ts.check(min(per_spine) > 0.01 * total,
                 f"rack {rack}'s packets took both spines ({per_spine})")
    tb_id = re.search(r"testbed ([0-9a-f]{6}):", p.stderr).group(1)
    left = [ns for ns in os.listdir("/run/netns")
            if ns.startswith(f"dlcptb-{tb_id}-")]
    ts.check(left == [], f"run removed its testbed {tb_id}")
    ts.check(ts.root_veths() == veths, "no veth left in the root namespace")


if __name__ == "__main__":
    main()
