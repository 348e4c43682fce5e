#!/usr/bin/env python3
"""One job through the aggregation switch on the emulated testbed.

Issue 17's single-job comparison: a 4-host testbed (one rank per host)
with dlcp-switch on its switch, every algorithm all-reducing the same
sizes through the same links (the switch's memory large enough that no
group waits and none goes by ring):

  ring, PS, AUTO   dlcp's own, host to host (-a ring / ps / auto)
  INA              -a ina: every group through the switch (SwitchML)
  RA-INA           -a ra_ina: groups through the switch while it has room

Profiles: 10 Gbit/s at MTU 9000, 1 Gbit/s at MTU 1500 and 1 Gbit/s at
MTU 9000, where the daemon's datagram rate does not bind (one testbed
each, the algorithms taking turns round after round).  Per algorithm,
profile and size: the median all-reduce time over the rounds' medians and
its bus bandwidth, size * 2(n-1)/n / time (every result checked,
dlcp-bench -c 1); the seed has INA 57 % above ring's throughput and 2x
PS's.  Usage:

    scripts/bench-ina-single.py BUILD [--rounds N] [--sizes 4M,64M]
                                [--profiles 10g,1g,1g9k] [--mem 8m] [--out DIR]

Needs root (namespaces).  Prints a table and writes DIR/ina-single.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "scripts", "results"))
import common  # noqa: E402  (parse_bytes of make results)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
PROFILES = {"10g": ("10gbit", 9000), "1g": ("1gbit", 1500),
            "1g9k": ("1gbit", 9000)}
ALGOS = ("ring", "ps", "ina", "ra_ina", "auto")
RANKS = 4
SEED_INA_VS_RING, SEED_INA_VS_PS = 1.57, 2.0


def iterations(size):
    """Enough all-reduces for a median, few enough for the slow ones."""
    return 10 if size <= (8 << 20) else 3


def run_one(build, tb, algo, size, outdir, tag):
    out = os.path.join(outdir, f"{tag}.json")
    log_path = os.path.join(outdir, f"{tag}.log")
    with open(log_path, "w") as log:
        rc = subprocess.run(
            [TESTBED, "run", "--id", tb, "--stats", "none", "--"] +
            common.bench_argv(build, size, iterations(size), 1, algo, out),
            stdout=log, stderr=subprocess.STDOUT).returncode
    r = common.bench_result("bench-ina-single", tag, rc, out, log_path)
    return r["p50_us"] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sizes", default="4M,64M")
    ap.add_argument("--profiles", default="10g,1g,1g9k",
                    help="comma-separated, of: " + ", ".join(PROFILES))
    ap.add_argument("--mem", default="8m", help="switch memory (default 8m)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-ina-single: needs root (network namespaces)")
    sizes = [common.parse_bytes(s) for s in a.sizes.split(",")]
    profiles = a.profiles.split(",")
    for p in profiles:
        if p not in PROFILES:
            sys.exit(f"bench-ina-single: --profiles: unknown profile '{p}' "
                     f"(expected {', '.join(PROFILES)})")
    outdir = a.out or os.path.join(a.build, "bench-ina-single")
    os.makedirs(outdir, exist_ok=True)
    times = {}
    for prof in profiles:
        rate, mtu = PROFILES[prof]
        tb = subprocess.run(
            [TESTBED, "up", "-n", str(RANKS), "--rate", rate, "--mtu",
             str(mtu), "--agg-switch",
             os.path.join(a.build, "bin", "dlcp-switch"), "--agg-mem",
             a.mem], check=True, capture_output=True,
            text=True).stdout.split()[0]  # up prints the testbed's id first
        try:
            for rnd in range(1, a.rounds + 1):
                for size in sizes:
                    for algo in ALGOS:
                        tag = f"{prof}-{size}-{algo}-r{rnd}"
                        ms = run_one(a.build, tb, algo, size, outdir, tag)
                        times.setdefault((prof, size, algo), []).append(ms)
                        print(f"# round {rnd}, {prof}, {size} B, {algo}: "
                              f"{ms:.1f} ms", flush=True)
        finally:
            subprocess.run([TESTBED, "down", tb], check=False,
                           capture_output=True)
    report = []
    print("\nprofile | size | " + " | ".join(ALGOS) +
          " | INA / ring busbw | INA / PS busbw")
    for prof in profiles:
        for size in sizes:
            med = {algo: statistics.median(times[(prof, size, algo)])
                   for algo in ALGOS}
            busbw = {algo: size * 2 * (RANKS - 1) / RANKS / (ms * 1e-3) / 1e9
                     for algo, ms in med.items()}
            report.append({"profile": prof, "size": size, "ms": med,
                           "busbw_GBps": busbw})
            cells = " | ".join("%.1f (%.2f)" % (med[x], busbw[x])
                               for x in ALGOS)
            print(f"{prof} | {size} | {cells} | "
                  f"{busbw['ina'] / busbw['ring']:.2f} | "
                  f"{busbw['ina'] / busbw['ps']:.2f}")
    print(f"(ms (busbw GB/s); seed: INA / ring {SEED_INA_VS_RING:.2f}, "
          f"INA / PS {SEED_INA_VS_PS:.1f})")
    with open(os.path.join(outdir, "ina-single.json"), "w") as f:
        json.dump({"rounds": a.rounds, "mem": a.mem, "rows": report}, f,
                  indent=1)


if __name__ == "__main__":
    main()
