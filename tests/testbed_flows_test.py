#!/usr/bin/python3
"""Background flows beside a job on some of the hosts: on a 3-host testbed
with ECN marking, tools/testbed/flows.py runs on every host for 2 s at
load 0.3 while dlcp-bench runs on hosts 2 and 0 only (run --on 2,0).
Every host writes its flows; every flow finished, went to another host
and was received there (the hosts' sent and received counts match); the
job saw 2 ranks; the testbed's switch ports marked CE (--ecn makes the
flows ECN-capable).

usage: testbed_flows_test.py DLCP_BENCH"""

import json
import os
import subprocess
import sys
import tempfile

import testbed_support as ts

FLOWS = os.path.join(os.path.dirname(ts.TESTBED), "testbed", "flows.py")
HOSTS = 3


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    tb = ts.testbed("up", "-n", str(HOSTS), "--rate", "1gbit", "--ecn-k",
                    "15k").stdout.split()[0]
    try:
        with tempfile.TemporaryDirectory() as d:
            bg = subprocess.Popen(
                [ts.TESTBED, "run", "--id", tb, "--port", "29711", "--stats",
                 "none", "--", sys.executable, FLOWS, "--rate", "1gbit",
                 "--load", "0.3", "--duration", "2", "--ecn", "--out", d],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            job = ts.testbed("run", "--id", tb, "--on", "2,0", "--stats",
                             "none", "--", dlcp_bench, "-b", "1M", "-e",
                             "1M", "-n", "3", "-w", "1", "-c", "1")
            out, _ = bg.communicate(timeout=60)
            ts.check(bg.returncode == 0, f"flows.py ran on every host "
                     f"(exit {bg.returncode}):\n{out}")
            per_host = []
            for r in range(HOSTS):
                with open(os.path.join(d, f"flows-{r}.json")) as f:
                    per_host.append(json.load(f))
        stats = ts.testbed("stats", tb, "--json").stdout
    finally:
        ts.testbed("down", tb)
    ts.check("# dlcp-bench: 2 ranks" in job.stdout,
             "the job on --on 2,0 had 2 ranks")
    sent = [len(h["flows"]) for h in per_host]
    ts.check(all(n >= 3 for n in sent), f"every host opened flows ({sent})")
    ts.check(all(f[2] is not None and f[2] > 0
                 for h in per_host for f in h["flows"]),
             "every flow finished with a completion time")
    ts.check(all(h["failed"] == [] and h["refused_headers"] == 0
                 for h in per_host), "no flow failed")
    ts.check(all(f[3] != h["rank"] and 0 <= f[3] < HOSTS and
                 1 <= f[1] <= 30000000
                 for h in per_host for f in h["flows"]),
             "flows went to another host, sized within the web-search CDF")
    to = [sum(1 for h in per_host for f in h["flows"] if f[3] == r)
          for r in range(HOSTS)]
    got = [h["received"] for h in per_host]
    ts.check(to == got, f"every host received the flows sent to it "
             f"({to} sent, {got} received)")
    marked = sum(v["marked"] for v in json.loads(stats).values())
    ts.check(marked > 0, f"the switch ports marked {marked} packets CE")


if __name__ == "__main__":
    main()
