#!/usr/bin/env python3
"""PANAMA's window on the emulated testbed: a job beside background flows.

Issue 18's PANAMA in the runtime, as the simulator's experiment (make
results panama) runs it: one rack of HOSTS hosts with dlcp-switch on its
switch and ECN marking on every switch port (the testbed's --ecn-k phantom
queue); a job of RANKS ranks on hosts 0..RANKS-1 all-reduces SIZE bytes
ITERS times while web-search TCP flows (tools/testbed/flows.py, ECN on)
run between all the hosts at each load.  Configurations, taking turns
round after round:

  no job               the background alone (the short flows' reference)
  ring                 dlcp's ring over MLT, host to host (no aggregation)
  INA, fixed window    -a ina, DLCP_INA_CC=none: DLCP_INA_WINDOW groups
                       outstanding per rank whatever the marks
  INA + PANAMA         -a ina, DLCP_INA_CC=panama: the window follows the
                       results' ECN (docs/ina.md), DLCP_INA_MIN_BYTES=0

Per configuration and load: the job's median and mean all-reduce time
(every result checked) and the completion times of the background flows
that started while the job ran: short flows (< 100 KB) median and p99,
all flows' mean.  The seed: the large job's time up to 1.34x shorter and
the short flows' p99 up to 4.5x better with PANAMA than without its
congestion control.  Usage:

    scripts/bench-panama.py BUILD [--rounds N] [--loads 0.2,0.5]
        [--rate 100mbit] [--hosts 8] [--ranks 4] [--size 4M] [--iters 12]
        [--queue 128k] [--ecn-k 15k] [--out DIR]

Needs root (namespaces).  Prints tables and writes DIR/panama.json and
DIR/panama.png.
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
import common  # noqa: E402  (bench_argv, bench_result, parse_bytes)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
FLOWS = os.path.join(HERE, "tools", "testbed", "flows.py")
CONFIGS = (("no job", None, {}),
           ("ring", "ring", {}),
           ("INA, fixed window", "ina", {"DLCP_INA_CC": "none"}),
           ("INA + PANAMA", "ina", {"DLCP_INA_CC": "panama",
                                    "DLCP_INA_MIN_BYTES": "0"}))
SHORT_BYTES = 100000
SEED_JOB, SEED_SHORT_P99 = 1.34, 4.5
JOB_PORT, FLOW_PORT = 29600, 5301
# Background flows run this long before the job starts (flows.py's own
# start delay is 1 s), so the job meets them in their steady state.
WARMUP_S = 3.0


def testbed_up(a):
    argv = [TESTBED, "up", "-n", str(a.hosts), "--rate", a.rate,
            "--queue", str(a.queue), "--ecn-k", str(a.ecn_k),
            "--agg-switch", os.path.join(a.build, "bin", "dlcp-switch"),
            "--agg-mem", "8m"]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return out.stdout.split()[0]  # up prints the testbed's id first


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_cell(a, tb, label, algo, env, load, rnd, outdir, ref_s):
    """One configuration at one load: returns the job's times (ms) and
    the background flows that started while it ran."""
    tag = f"{label.replace(' ', '_').replace(',', '').replace('+', 'p')}" \
          f"-{load}-r{rnd}"
    cell = os.path.join(outdir, tag)
    os.makedirs(cell, exist_ok=True)
    stop = os.path.join(cell, "stop")
    if os.path.exists(stop):
        os.remove(stop)
    bg_log = open(os.path.join(cell, "flows.log"), "w")
    bg = subprocess.Popen(
        [TESTBED, "run", "--id", tb, "--port", str(JOB_PORT + 1),
         "--stats", "none", "--", sys.executable, FLOWS, "--rate", a.rate,
         "--load", str(load), "--port", str(FLOW_PORT), "--seed", str(rnd),
         "--stop-file", stop, "--ecn", "--out", cell],
        stdout=bg_log, stderr=subprocess.STDOUT)
    times = []
    try:
        time.sleep(WARMUP_S)
        t0 = time.time()
        if algo:
            out = os.path.join(cell, "job.json")
            log_path = os.path.join(cell, "job.log")
            with open(log_path, "w") as log:
                rc = subprocess.run(
                    [TESTBED, "run", "--id", tb, "--on", f"0-{a.ranks - 1}",
                     "--port", str(JOB_PORT), "--stats", "none", "--"] +
                    common.bench_argv(a.build, a.size, a.iters, 1, algo, out),
                    stdout=log, stderr=subprocess.STDOUT,
                    env=dict(os.environ, **env)).returncode
            r = common.bench_result("bench-panama", f"{label} at load {load}",
                                    rc, out, log_path)
            times = [t / 1e3 for t in r["times_us"]]
        else:
            time.sleep(ref_s)
        t1 = time.time()
    finally:
        open(stop, "w").close()
        rc = bg.wait()
        bg_log.close()
    if rc != 0:
        sys.exit(f"bench-panama: background flows of {tag} failed (exit "
                 f"{rc}); see {bg_log.name}")
    flows = []
    for r in range(a.hosts):
        with open(os.path.join(cell, f"flows-{r}.json")) as f:
            flows += [x for x in json.load(f)["flows"] if t0 <= x[0] <= t1]
    return times, flows, t1 - t0


def summarize(times, flows):
    short = [f[2] * 1e3 for f in flows if f[1] < SHORT_BYTES and
             f[2] is not None]
    done = [f[2] * 1e3 for f in flows if f[2] is not None]
    return {
        "job_p50_ms": statistics.median(times) if times else None,
        "job_mean_ms": statistics.mean(times) if times else None,
        "flows": len(flows), "unfinished": len(flows) - len(done),
        "short": len(short),
        "short_p50_ms": statistics.median(short) if short else None,
        "short_p99_ms": percentile(short, 0.99) if short else None,
        "mean_ms": statistics.mean(done) if done else None}


def fmt(x, nd=1):
    return "-" if x is None else f"{x:,.{nd}f}"


def plot(rows, loads, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(CONFIGS)
    for i, (label, _, _) in enumerate(CONFIGS):
        xs = [j + (i - (len(CONFIGS) - 1) / 2) * width
              for j in range(len(loads))]
        job = [rows[(ld, label)]["job_p50_ms"] or 0 for ld in loads]
        p99 = [rows[(ld, label)]["short_p99_ms"] or 0 for ld in loads]
        if label != "no job":
            ax1.bar(xs, job, width, label=label)
        ax2.bar(xs, p99, width, label=label)
    for ax, title in ((ax1, "job: median all-reduce (ms)"),
                      (ax2, "short flows (< 100 KB): p99 FCT (ms)")):
        ax.set_xticks(range(len(loads)))
        ax.set_xticklabels([f"load {ld}" for ld in loads])
        ax.set_title(title)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--loads", default="0.2,0.5")
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--size", type=common.parse_bytes, default=4 << 20)
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--queue", type=common.parse_bytes, default=128 << 10)
    ap.add_argument("--ecn-k", type=common.parse_bytes, default=15 << 10)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-panama: needs root (network namespaces)")
    if not 2 <= a.ranks <= a.hosts:
        sys.exit(f"bench-panama: --ranks {a.ranks}: expected 2..--hosts "
                 f"({a.hosts})")
    try:
        loads = [float(x) for x in a.loads.split(",")]
    except ValueError:
        loads = [-1.0]
    if not all(0 < ld <= 1 for ld in loads):
        sys.exit(f"bench-panama: --loads '{a.loads}': expected fractions "
                 f"in (0, 1], comma-separated")
    outdir = a.out or os.path.join(a.build, "bench-panama")
    os.makedirs(outdir, exist_ok=True)
    tb = testbed_up(a)
    cells = {}
    try:
        for rnd in range(1, a.rounds + 1):
            for load in loads:
                ref_s = None
                k = (rnd - 1) % len(CONFIGS)
                for label, algo, env in CONFIGS[k:] + CONFIGS[:k]:
                    # The reference runs as long as the job cells before
                    # it (10 s in the first cell of all).
                    ref_s = ref_s or 10.0
                    times, flows, span = run_cell(
                        a, tb, label, algo, env, load, rnd, outdir, ref_s)
                    if algo:
                        ref_s = span
                    c = cells.setdefault((load, label), ([], []))
                    c[0].extend(times)
                    c[1].extend(flows)
                    s = summarize(times, flows)
                    print(f"# round {rnd}, load {load}, {label}: job "
                          f"{fmt(s['job_p50_ms'])} ms, {s['short']} short "
                          f"flows p99 {fmt(s['short_p99_ms'])} ms "
                          f"({span:.0f} s)", flush=True)
    finally:
        subprocess.run([TESTBED, "down", tb], check=False,
                       capture_output=True)
    rows = {key: summarize(*v) for key, v in cells.items()}
    print(f"\n{a.ranks} ranks of {a.hosts} hosts at {a.rate}, "
          f"{a.size >> 20} MiB all-reduces; pooled over {a.rounds} rounds")
    print("load | configuration | job p50 / mean (ms) | flows (unfinished) "
          "| short flows: n, p50 / p99 (ms) | all flows mean (ms)")
    for load in loads:
        for label, _, _ in CONFIGS:
            s = rows[(load, label)]
            print(f"{load} | {label} | {fmt(s['job_p50_ms'])} / "
                  f"{fmt(s['job_mean_ms'])} | {s['flows']} "
                  f"({s['unfinished']}) | {s['short']}, "
                  f"{fmt(s['short_p50_ms'], 2)} / "
                  f"{fmt(s['short_p99_ms'], 2)} | {fmt(s['mean_ms'], 2)}")
    for load in loads:
        p = rows[(load, "INA + PANAMA")]
        parts = []
        for other in ("ring", "INA, fixed window"):
            o = rows[(load, other)]
            parts.append(f"job {other} / PANAMA "
                         f"{o['job_p50_ms'] / p['job_p50_ms']:.2f}x, short "
                         f"p99 {other} / PANAMA "
                         f"{o['short_p99_ms'] / p['short_p99_ms']:.2f}x")
        print(f"load {load}: " + "; ".join(parts))
    print(f"(seed: job up to {SEED_JOB}x shorter, short-flow p99 up to "
          f"{SEED_SHORT_P99}x better)")
    with open(os.path.join(outdir, "panama.json"), "w") as f:
        json.dump({"hosts": a.hosts, "ranks": a.ranks, "rate": a.rate,
                   "size": a.size, "iters": a.iters, "rounds": a.rounds,
                   "queue": a.queue, "ecn_k": a.ecn_k,
                   "rows": [dict(load=ld, config=lb, **rows[(ld, lb)])
                            for ld in loads for lb, _, _ in CONFIGS]},
                  f, indent=1)
    plot(rows, loads, os.path.join(outdir, "panama.png"))
    print(f"wrote {outdir}/panama.json and panama.png")


if __name__ == "__main__":
    main()
