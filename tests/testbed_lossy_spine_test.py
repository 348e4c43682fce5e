#!/usr/bin/python3
"""A job starts, runs and ends on a fabric where one spine loses most of
what the racks send it: 2 racks of 2 hosts, 2 spines, both racks' uplinks
to spine 1 losing 70 %, so about half of all TCP connections (which ECMP
keeps on one spine for life) and of MLT's paths cross it.  The control
plane's TCP connections race attempts from several source ports and keep
their retransmission timeout to 1 s (src/rt/tcp.h); rendezvous requests
move to a new connection when one stalls.  Before, 1 run in 2 failed at
the rendezvous (a HELLO stuck behind TCP's backoff past the server's 10 s,
or a WAIT past the 60 s deadline).  Each of RUNS runs must finish with
exact results within a rendezvous timeout of 20 s.

usage: testbed_lossy_spine_test.py DLCP_BENCH"""

import os
import re
import sys

import testbed_support as ts

RUNS = 4


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    veths = ts.root_veths()
    env = dict(os.environ, DLCP_RDZV_TIMEOUT_MS="20000")
    up = ts.testbed("up", "-n", "4", "--racks", "2", "--spines", "2",
                    "--rate", "1gbit")
    tb_id = up.stdout.split()[-1]
    try:
        ts.testbed("set", tb_id, "--link-loss", "r0-s1:up=70%",
                   "--link-loss", "r1-s1:up=70%")
        for run in range(RUNS):
            p = ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
                           dlcp_bench, "-b", "1M", "-e", "1M", "-n", "3",
                           "-w", "1", "-c", "1", env=env, check=False)
            rows = [line for line in p.stdout.splitlines()
                    if re.match(r"\[rank 0\]\s+1048576\s", line)]
            if p.returncode != 0 or len(rows) != 1:
                ts.fail(f"run {run + 1} of {RUNS}: exit {p.returncode}\n"
                        f"{p.stdout}\n{p.stderr}")
            ts.check(rows[0].split()[10] == "0",
                     f"run {run + 1}: no wrong element ({rows[0]})")
        stats = ts.testbed("stats", tb_id).stdout
        lost = [int(line.split()[4]) for line in stats.splitlines()
                if re.match(r"r[01]-s1\s+up\s", line)]
        ts.check(len(lost) == 2 and min(lost) > 0,
                 f"both uplinks to spine 1 lost packets ({lost})")
    finally:
        ts.testbed("down", tb_id, check=False)
    ts.check(ts.root_veths() == veths, "no veth left in the root namespace")


if __name__ == "__main__":
    main()
