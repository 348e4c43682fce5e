#!/usr/bin/env python3
"""CINA on the emulated testbed: a chain of dlcp-switch, one per rack.

Issue 18's runtime run: a testbed of 2 racks (2 hosts each, one rank per
host, 2 spines) at 10 Gbit/s, MTU 9000, with dlcp-switch on both rack
switches, rack 0's passing its partial sums to rack 1's (dlcp-testbed
--agg-chain).  Configurations, taking turns round after round on the same
testbed:

  ring      -a ring (no switch)
  CINA      -a ina, DLCP_INA_CHAIN: each rank contributes to its rack's
            switch, the switches chain
  INA, one  -a ina through rack 0's switch alone (rack 1's ranks reach it
  switch    through the spines), the single-switch baseline
  RA-INA    -a ra_ina through rack 0's switch alone (a chain has no
            RA-INA)
  trees     -a ina up a tree per spine (MTINA, PANAMA's trees without its
            window): on a second testbed of the same shape made with
            --agg-trees 2, each rack's switch a leaf, each spine a root

With --ranks-per-host N (N > 1) every host runs N ranks (RANK * N + i
of WORLD_SIZE * N), as the seed's hosts of several GPUs, and the
configurations are:

  ring      -a ring
  CINA      -a ina over the chain, the ranks of each host reduced to its
            master first (DLCP_INA_HOST_REDUCE=1, the default)
  CINA, no  -a ina over the chain, every rank contributing to its
  host reduce  rack's switch itself (DLCP_INA_HOST_REDUCE=0)

Per configuration and size: the median all-reduce time over the rounds'
medians, and the bus bandwidth (every result checked, dlcp-bench -c 1).
Usage:

    scripts/bench-cina.py BUILD [--rounds N] [--sizes 4m,64m] [--iters N]
                          [--ranks-per-host N] [--out DIR]

Needs root (namespaces).  Prints a table and writes DIR/cina.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "scripts", "results"))
import common  # noqa: E402  (parse_bytes, shared with the results)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
RACK0 = "10.0.0.254:9555"  # dlcp-testbed's aggregation port on rack 0
TREES = "INA, a tree per spine"  # runs on the testbed with --agg-trees
# label, algorithm, variables set over the testbed's
CONFIGS = (("ring", "ring", {}),
           ("CINA", "ina", {}),
           ("INA, one switch", "ina", {"DLCP_SWITCH": RACK0,
                                       "DLCP_INA_CHAIN": ""}),
           ("RA-INA, one switch", "ra_ina", {"DLCP_SWITCH": RACK0,
                                             "DLCP_INA_CHAIN": ""}),
           (TREES, "ina", {}))
HOST_CONFIGS = (("ring", "ring", {}),
                ("CINA", "ina", {"DLCP_INA_HOST_REDUCE": "1"}),
                ("CINA, no host reduce", "ina",
                 {"DLCP_INA_HOST_REDUCE": "0"}))
# Runs "$@" as $1 ranks of this host: RANK * n + i of WORLD_SIZE * n;
# fails if any of them does.
PER_HOST = ('n=$1; shift; r=$RANK; w=$WORLD_SIZE; pids=""; i=0; '
            'while [ $i -lt $n ]; do '
            'RANK=$((r * n + i)) WORLD_SIZE=$((w * n)) "$@" & '
            'pids="$pids $!"; i=$((i + 1)); done; '
            'rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc')


def run_one(build, tb, algo, env, size, iters, out, log_path, per_host):
    bench = common.bench_argv(build, size, iters, 2, algo, out)
    if per_host > 1:
        bench = ["sh", "-c", PER_HOST, "sh", str(per_host)] + bench
    argv = [TESTBED, "run", "--id", tb, "--stats", "none", "--"] + bench
    with open(log_path, "w") as log:
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, **env)).returncode
    return common.bench_result("bench-cina", f"{algo} at {size} B", rc, out,
                               log_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="4m,64m")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-cina: needs root (network namespaces)")
    sizes = [common.parse_bytes(s) for s in a.sizes.split(",")]
    per_host = a.ranks_per_host
    if per_host < 1:
        sys.exit("bench-cina: --ranks-per-host: expected 1 or more")
    configs = HOST_CONFIGS if per_host > 1 else CONFIGS
    world = 4 * per_host
    outdir = a.out or os.path.join(
        a.build, "bench-cina" if per_host == 1 else f"bench-cina-{per_host}")
    os.makedirs(outdir, exist_ok=True)
    def testbed_up(shape):
        up = subprocess.run(
            [TESTBED, "up", "-n", "4", "--racks", "2", "--spines", "2",
             "--rate", "10gbit", "--mtu", "9000", "--agg-switch",
             os.path.join(a.build, "bin", "dlcp-switch"), "--agg-mem",
             "8m"] + shape, check=True, capture_output=True, text=True)
        return up.stdout.split()[0]

    tb = testbed_up(["--agg-chain"])
    tb_trees = (testbed_up(["--agg-trees", "2"])
                if any(c[0] == TREES for c in configs) else None)
    medians = {}
    try:
        for rnd in range(1, a.rounds + 1):
            for size in sizes:
                for label, algo, env in configs:
                    tag = f"{algo}-{label.split(',')[-1].strip()}-{size}-r{rnd}"
                    tag = tag.replace(" ", "_")
                    r = run_one(a.build, tb_trees if label == TREES else tb,
                                algo, env, size, a.iters,
                                os.path.join(outdir, tag + ".json"),
                                os.path.join(outdir, tag + ".log"), per_host)
                    medians.setdefault((size, label), []).append(
                        r["p50_us"] / 1e3)
                    print(f"# round {rnd}, {size >> 20} MiB, {label}: "
                          f"median {r['p50_us'] / 1e3:.1f} ms", flush=True)
    finally:
        subprocess.run([TESTBED, "down", tb] +
                       ([tb_trees] if tb_trees else []), check=False,
                       capture_output=True)
    rows = []
    print(f"\n{world} ranks, {per_host} per host")
    print("size | " + " | ".join(c[0] for c in configs))
    for size in sizes:
        cells = []
        for label, _, _ in configs:
            ms = statistics.median(medians[(size, label)])
            # an all-reduce moves 2 (n - 1) / n of the vector per rank
            busbw = size * 2 * (world - 1) / world / (ms / 1e3) / 1e9
            rows.append({"bytes": size, "config": label, "median_ms": ms,
                         "busbw_GBps": busbw,
                         "rounds_ms": medians[(size, label)]})
            cells.append(f"{ms:.1f} ms ({busbw:.2f} GB/s)")
        print(f"{size >> 20} MiB | " + " | ".join(cells))
    with open(os.path.join(outdir, "cina.json"), "w") as f:
        json.dump({"rounds": a.rounds, "iters": a.iters,
                   "ranks_per_host": per_host, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
