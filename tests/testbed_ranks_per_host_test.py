#!/usr/bin/python3
"""Several ranks on each of two testbed hosts: the ranks of one host (one
machine, one network namespace, a non-loopback address) exchange their
datagrams through shared memory, and the ranks of different hosts (other
namespaces of the same machine: the emulated network between them)
through UDP.  Every all-reduce is exact.  Two per host, then nine (a world
of 18: shared memory goes by the ranks of a host, not by the world).

usage: testbed_ranks_per_host_test.py DLCP_BENCH"""

import json
import os
import re
import sys
import tempfile

import testbed_support as ts



def per_host(n):
    """A shell script that runs "$@" as |n| ranks of this host: RANK * n + i
    of WORLD_SIZE * n."""
    return (f'r=$RANK; w=$WORLD_SIZE; pids=""; i=0; while [ $i -lt {n} ]; '
            f'do RANK=$((r * {n} + i)) WORLD_SIZE=$((w * {n})) "$@" & '
            f'pids="$pids $!"; i=$((i + 1)); done; '
            f'rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc')


def check_job(tb_id, dlcp_bench, n, algo, d):
    out = os.path.join(d, f"{algo}{n}.json")
    run = ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
                     "sh", "-c", per_host(n), "sh", dlcp_bench,
                     "-b", "1M", "-e", "1M", "-a", algo, "-n", "4",
                     "-w", "1", "-c", "1", "-J", out)
    # Only the testbed's rank 0 (the job's ranks 0 to n - 1) prints with
    # its prefix; dlcp-bench's rank 0 writes the JSON.
    peers = [int(m) for m in re.findall(
        r"(\d+) peers through shared memory", run.stdout)]
    ts.check(peers == [n - 1],
             f"rank 0 of {2 * n} reaches its host's other {n - 1} ranks "
             f"through shared memory and the other host's through UDP "
             f"({peers})")
    sent = re.search(r"through shared memory: (\d+) datagrams", run.stdout)
    ts.check(sent is not None and int(sent.group(1)) > 0,
             "datagrams went through shared memory")
    with open(out) as f:
        row = json.loads(f.readline())
    ts.check(row["wrong"] == 0, "every element exact")
    ts.check(row["delivered_min"] == 1.0, "everything delivered")


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "2", "--rate", "1gbit") as tb_id:
        with tempfile.TemporaryDirectory() as d:
            check_job(tb_id, dlcp_bench, 2, "ring", d)
            # Halving-doubling: rank 0's partners 1, 2, 4 and 8 share its
            # host (in the ring, none of the data rank 0 sends went through
            # its rings: its successor is on the other host).
            check_job(tb_id, dlcp_bench, 9, "hd", d)


if __name__ == "__main__":
    main()
