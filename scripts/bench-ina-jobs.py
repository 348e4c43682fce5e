#!/usr/bin/env python3
"""Three jobs sharing one aggregation switch on the emulated testbed.

The testbed half of issue 17's multi-job comparison (the simulator's half
is scripts/results/ina.py): a 4-host testbed at 10 Gbit/s (--rate), MTU 9000, with
dlcp-switch on its switch; three jobs of 4 ranks (one rank of each job on
every host, so the jobs also share the host links) all-reduce their
model's gradient (VGG19, ResNet50, ResNet50 from workloads/profiles,
scaled down) at the same time, each in its own process group (job token,
rendezvous port).  Configurations, taking turns round after round:

  RA-INA          dlcp-switch --policy shared, -a ra_ina (busy groups by ring)
  SwitchML-style  dlcp-switch --policy static (a third of the pool per
                  job), -a ina (plain INA, busy groups wait)
  INA, shared FCFS  dlcp-switch --policy shared, -a ina (plain INA on the
                  shared pool: busy groups wait, the window sized to the
                  share of the pool a BUSY names)
  ring            no switch, -a ring

for each switch memory.  Per job: the median all-reduce time (every
result checked, dlcp-bench -c 1); per configuration: the mean over the
three jobs, RA-INA's against the others in percent (the seed: -25.4 %
against SwitchML, -18.1 % against ring).  Usage:

    scripts/bench-ina-jobs.py BUILD [--rounds N] [--mem 64k,1m]
                              [--iters N] [--scale F] [--rate R] [--out DIR]

Needs root (namespaces).  Prints a table and writes DIR/ina-jobs.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "scripts", "results"))
import common  # noqa: E402  (profiles and parse_bytes of make results)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
MODELS = ("vgg19", "resnet50", "resnet50")
CONFIGS = (("RA-INA", "ra_ina", "shared"),
           ("SwitchML-style", "ina", "static"),
           ("INA, shared FCFS", "ina", "shared"),
           ("ring", "ring", None))
SEED_VS_STATIC, SEED_VS_RING = -25.4, -18.1
BASE_PORT = 29600


def model_bytes(name, scale):
    sizes, _ = common.read_profile(name)
    return max(4, 4 * int(sum(sizes) * scale / 4))


def testbed_up(build, mem, policy, rate):
    argv = [TESTBED, "up", "-n", "4", "--rate", rate, "--mtu", "9000"]
    if policy:
        argv += ["--agg-switch", os.path.join(build, "bin", "dlcp-switch"),
                 "--agg-mem", str(mem), "--agg-policy", policy]
        if policy == "static":
            argv += ["--agg-static-parts", str(len(MODELS))]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return out.stdout.split()[0]  # up prints the testbed's id first


def run_jobs(build, tb, algo, sizes, iters, outdir, tag):
    """Starts the jobs together; returns each one's bench JSON."""
    procs = []
    for j, size in enumerate(sizes):
        out = os.path.join(outdir, f"{tag}-job{j}.json")
        log = open(os.path.join(outdir, f"{tag}-job{j}.log"), "w")
        env = dict(os.environ, DLCP_JOB=str(1000 + j))
        argv = [TESTBED, "run", "--id", tb, "--port", str(BASE_PORT + j),
                "--stats", "none", "--"] + common.bench_argv(
                    build, size, iters, 1, algo, out)
        procs.append((subprocess.Popen(argv, stdout=log,
                                       stderr=subprocess.STDOUT, env=env),
                      out, log))
    results = []
    for p, out, log in procs:
        rc = p.wait()
        log.close()
        results.append(common.bench_result(
            "bench-ina-jobs", f"a job of {tag}", rc, out, log.name))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mem", default="64k,1m",
                    help="switch memories, comma-separated (default 64k,1m)")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--rate", default="10gbit",
                    help="the links' rate, as dlcp-testbed up --rate "
                         "(default 10gbit; MTU 9000 either way)")
    ap.add_argument("--scale", type=float, default=1.0 / 64,
                    help="fraction of each model's gradient (default 1/64)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-ina-jobs: needs root (network namespaces)")
    mems = [common.parse_bytes(m) for m in a.mem.split(",")]
    sizes = [model_bytes(m, a.scale) for m in MODELS]
    outdir = a.out or os.path.join(a.build, "bench-ina-jobs")
    os.makedirs(outdir, exist_ok=True)
    rows = {}
    for rnd in range(1, a.rounds + 1):
        for mem in mems:
            for label, algo, policy in CONFIGS:
                tb = testbed_up(a.build, mem, policy, a.rate)
                try:
                    tag = (f"{label.replace(' ', '_').replace(',', '')}"
                           f"-{mem}-r{rnd}")
                    t0 = time.monotonic()
                    res = run_jobs(a.build, tb, algo, sizes, a.iters, outdir,
                                   tag)
                    wall = time.monotonic() - t0
                finally:
                    subprocess.run([TESTBED, "down", tb], check=False,
                                   capture_output=True)
                medians = [r["p50_us"] / 1e3 for r in res]
                rows.setdefault((mem, label), []).append(medians)
                print(f"# round {rnd}, {mem // 1024} KiB, {label}: job "
                      f"medians {', '.join('%.1f' % m for m in medians)} ms "
                      f"({wall:.0f} s wall)", flush=True)
    report = []
    print("\nswitch memory | configuration | job medians (ms, median of "
          "rounds) | mean | RA-INA vs it")
    for mem in mems:
        means = {}
        for label, _, _ in CONFIGS:
            per_job = [statistics.median(r[j] for r in rows[(mem, label)])
                       for j in range(len(MODELS))]
            means[label] = statistics.mean(per_job)
            report.append({"mem": mem, "config": label, "jobs": per_job,
                           "mean": means[label]})
        for label, _, _ in CONFIGS:
            rel = ("" if label == "RA-INA" else
                   "%+.1f %%" % (100 * (means["RA-INA"] / means[label] - 1)))
            jobs = next(r["jobs"] for r in report
                        if r["mem"] == mem and r["config"] == label)
            print(f"{mem // 1024} KiB | {label} | "
                  f"{' / '.join('%.1f' % x for x in jobs)} | "
                  f"{means[label]:.1f} | {rel}")
    print(f"(seed: RA-INA {SEED_VS_STATIC:+.1f} % against SwitchML, "
          f"{SEED_VS_RING:+.1f} % against ring)")
    with open(os.path.join(outdir, "ina-jobs.json"), "w") as f:
        json.dump({"sizes": dict(zip(("vgg19", "resnet50a", "resnet50b"),
                                     sizes)),
                   "iters": a.iters, "rounds": a.rounds, "rows": report}, f,
                  indent=1)


if __name__ == "__main__":
    main()
