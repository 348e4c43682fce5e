#!/usr/bin/python3
"""A checked dlcp all-reduce across a 4-host, 2-rack testbed with 1 % random
loss at the switch ports: exact at loss bound p = 0, and at p = 0.05 every
rank delivers >= 95 % in every iteration and every delivered element is
exact.  Then the testbed is taken down and nothing may be left.

usage: testbed_allreduce_test.py DLCP_BENCH"""

import json
import os
import sys
import tempfile

import testbed_support as ts


def bench(tb_id, dlcp_bench, p, out):
    ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
               dlcp_bench, "-b", "1M", "-e", "1M", "-n", "6", "-w", "1",
               "-p", str(p), "-c", "1", "-J", out)
    with open(out) as f:
        return json.loads(f.readline())


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "4", "--racks", "2", "--loss", "1%",
                       "--rate", "1gbit") as tb_id:
        with tempfile.TemporaryDirectory() as d:
            exact = bench(tb_id, dlcp_bench, 0, os.path.join(d, "p0.json"))
            ts.check(exact["wrong"] == 0, "p = 0: every element exact")
            ts.check(exact["delivered_min"] == 1.0,
                     "p = 0: everything delivered")
            bound = bench(tb_id, dlcp_bench, 0.05,
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


if __name__ == "__main__":
    main()
