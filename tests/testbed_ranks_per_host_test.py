#!/usr/bin/python3
"""Two ranks on each of two testbed hosts: the ranks of one host (one
machine, one network namespace, a non-loopback address) exchange their
datagrams through shared memory, and the ranks of different hosts (other
namespaces of the same machine: the emulated network between them)
through UDP.  Every all-reduce is exact.

usage: testbed_ranks_per_host_test.py DLCP_BENCH"""

import json
import os
import re
import sys
import tempfile

import testbed_support as ts

# Runs "$@" as 2 ranks of this host: RANK * 2 + i of WORLD_SIZE * 2.
PER_HOST = ('r=$RANK; w=$WORLD_SIZE; pids=""; for i in 0 1; do '
            'RANK=$((r * 2 + i)) WORLD_SIZE=$((w * 2)) "$@" & '
            'pids="$pids $!"; done; '
            'rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc')


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "2", "--rate", "1gbit") as tb_id:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ring.json")
            run = ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
                             "sh", "-c", PER_HOST, "sh", dlcp_bench,
                             "-b", "1M", "-e", "1M", "-a", "ring", "-n", "4",
                             "-w", "1", "-c", "1", "-J", out)
            # Only the testbed's rank 0 (the job's ranks 0 and 1) prints
            # with its prefix; dlcp-bench's rank 0 writes the JSON.
            peers = [int(m) for m in re.findall(
                r"(\d+) peers through shared memory", run.stdout)]
            ts.check(peers == [1],
                     f"rank 0 reaches its host's other rank through shared "
                     f"memory and the other host's through UDP ({peers})")
            sent = re.search(r"through shared memory: (\d+) datagrams",
                             run.stdout)
            ts.check(sent is not None and int(sent.group(1)) > 0,
                     "datagrams went through shared memory")
            with open(out) as f:
                row = json.loads(f.readline())
            ts.check(row["wrong"] == 0, "every element exact")
            ts.check(row["delivered_min"] == 1.0, "everything delivered")


if __name__ == "__main__":
    main()
