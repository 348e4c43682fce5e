#!/usr/bin/env python3
"""All-reduce beside background TCP traffic on the emulated testbed.

One rack of HOSTS hosts with ECN marking on every switch port (the
testbed's --ecn-k phantom queue); a job of RANKS ranks on hosts
0..RANKS-1 all-reduces SIZE bytes ITERS times while web-search TCP flows
(tools/testbed/flows.py, ECN on) run between all the hosts at each load,
the set-up of the simulator's PANAMA experiment (make results panama).

With --racks R (>= 2): the hosts in R racks joined by SPINES spines (links
at --fabric-rate), and JOBS jobs of RANKS ranks at once, each with
RANKS / R hosts in every rack, all-reducing while the flows run (PANAMA's
shared cluster).  A dlcp-switch runs on every rack's switch and every
spine: ina and panama go up a tree per spine (--agg-trees), ina1 up one
tree (spine 0's, on a second testbed of the same shape).

Configurations (--configs), taking turns round after round:

  none       the background alone (the short flows' reference)
  ring       dlcp's ring over MLT, host to host
  ring_base  the same with --baseline-bench's dlcp-bench (an A/B of builds)
  gloo       Gloo's ring_chunked over its TCP connections
  ina        dlcp -a ina through dlcp-switch, DLCP_INA_CC=none: a fixed
             window of DLCP_INA_WINDOW groups per rank whatever the marks
  panama     dlcp -a ina, DLCP_INA_CC=panama: PANAMA's window following
             the results' ECN (docs/ina.md), DLCP_INA_MIN_BYTES=0
  ina1       (--racks >= 2) as ina through one tree: single-tree
             aggregation without congestion control, the seed's baseline

Per configuration and load: the job's median and mean all-reduce time
(dlcp's results checked) and the completion times of the background flows
that started while the job ran: short flows (< 100 KB) median and p99,
all flows' mean.  Usage:

    scripts/bench-background.py BUILD [--configs none,ring,gloo,ina,panama]
        [--rounds N] [--loads 0.2,0.5] [--rate 100mbit] [--hosts 8]
        [--ranks 4] [--size 4M] [--iters 8] [--queue 128k] [--ecn-k 15k]
        [--racks R --spines S --jobs J --fabric-rate RATE]
        [--baseline-bench PATH] [--out DIR]

Needs root (namespaces).  Prints tables and writes DIR/background.json and
DIR/background.png.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "scripts", "results"))
import common  # noqa: E402  (bench_argv, bench_result, build_peers, percentile)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
FLOWS = os.path.join(HERE, "tools", "testbed", "flows.py")
LABELS = {"none": "no job", "ring": "dlcp ring",
          "ring_base": "dlcp ring, baseline build", "gloo": "Gloo ring",
          "ina": "INA, fixed window", "panama": "INA + PANAMA",
          "ina1": "INA, one tree, fixed window"}
INA_ENV = {"ina": {"DLCP_INA_CC": "none"}, "ina1": {"DLCP_INA_CC": "none"},
           "panama": {"DLCP_INA_CC": "panama", "DLCP_INA_MIN_BYTES": "0"}}
SHORT_BYTES = 100000
SEED_JOB, SEED_SHORT_P99 = 1.34, 4.5  # PANAMA's seed
JOB_PORT, FLOW_PORT = 29600, 5301
# Background flows run this long before the job starts (flows.py's own
# start delay is 1 s), so the job meets them in their steady state.
WARMUP_S = 3.0
# How long "none" measures the background when no job cell ran before it.
REFERENCE_S = 10.0


def log(msg):
    print(f"bench-background: {msg}", file=sys.stderr, flush=True)


def ecn_bytes(text):
    """--ecn-k: a size as 15k, or 0 for a testbed that never marks."""
    return 0 if text == "0" else common.parse_bytes(text)


def testbed_up(a, with_switch, trees=None):
    """A testbed of |a|'s shape; with |with_switch| its dlcp-switch (rack
    0's, or with racks every rack's as the leaves of |trees| trees, a
    tree per spine unless given)."""
    argv = [TESTBED, "up", "-n", str(a.hosts), "--rate", a.rate,
            "--queue", str(a.queue), "--ecn-k", str(a.ecn_k)]
    if a.racks > 1:
        argv += ["--racks", str(a.racks), "--spines", str(a.spines),
                 "--fabric-rate", a.fabric_rate or a.rate]
    if with_switch:
        argv += ["--agg-switch", os.path.join(a.build, "bin", "dlcp-switch"),
                 "--agg-mem", "8m"]
    if with_switch and a.racks > 1:
        argv += ["--agg-trees", str(trees or a.spines)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return out.stdout.split()[0]  # up prints the testbed's id first


def job_argv(a, cfg, out, peers):
    """The job's command for |cfg| (after dlcp-testbed run ... --)."""
    if cfg == "gloo":
        store = tempfile.mkdtemp(prefix="dlcp-gloo-store.")
        s = str(a.size)
        return [peers["gloo_allreduce"], "--store", store, "--iface", "eth0",
                "-a", "ring_chunked", "-b", s, "-e", s, "-n", str(a.iters),
                "-w", "1", "--json", out]
    argv = common.bench_argv(a.build, a.size, a.iters, 1,
                             "ring" if cfg.startswith("ring") else "ina", out)
    if cfg == "ring_base":
        argv[0] = a.baseline_bench
    return argv


def job_hosts(a):
    """The hosts of each job: one job on hosts 0..RANKS-1, or with racks
    JOBS jobs each with RANKS / R hosts in every rack (hosts are numbered
    rack by rack)."""
    if a.racks == 1:
        return [list(range(a.ranks))]
    per_rack, per_job = a.hosts // a.racks, a.ranks // a.racks
    return [[r * per_rack + k * per_job + j for r in range(a.racks)
             for j in range(per_job)] for k in range(a.jobs)]


def run_jobs(a, tb, cfg, load, cell, peers):
    """The jobs of |cfg| at once on testbed |tb|: each job's times (ms),
    a list per job."""
    procs = []
    for k, hosts in enumerate(job_hosts(a)):
        out = os.path.join(cell, f"job{k}.json")
        log_path = os.path.join(cell, f"job{k}.log")
        f = open(log_path, "w")
        procs.append((out, log_path, f, subprocess.Popen(
            [TESTBED, "run", "--id", tb, "--on",
             ",".join(map(str, hosts)), "--port", str(JOB_PORT + 2 + k),
             "--stats", "none", "--"] + job_argv(a, cfg, out, peers),
            stdout=f, stderr=subprocess.STDOUT,
            env=dict(os.environ, **INA_ENV.get(cfg, {})))))
    times = []
    for out, log_path, f, p in procs:
        rc = p.wait()
        f.close()
        r = common.bench_result("bench-background",
                                f"{LABELS[cfg]} at load {load}", rc, out,
                                log_path)
        times.append([t / 1e3 for t in r["times_us"]])
    return times


def run_cell(a, tb, cfg, load, rnd, outdir, ref_s, peers):
    """One configuration at one load: returns each job's times (ms, a
    list per job; none for "none"), the background flows that started
    while they ran, and how long they ran."""
    cell = os.path.join(outdir, f"{cfg}-{load}-r{rnd}")
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
        if cfg == "none":
            time.sleep(ref_s)
        else:
            times = run_jobs(a, tb, cfg, load, cell, peers)
        t1 = time.time()
    finally:
        open(stop, "w").close()
        rc = bg.wait()
        bg_log.close()
    if rc != 0:
        sys.exit(f"bench-background: background flows of {cell} failed "
                 f"(exit {rc}); see {bg_log.name}")
    flows = []
    for r in range(a.hosts):
        with open(os.path.join(cell, f"flows-{r}.json")) as f:
            flows += [x for x in json.load(f)["flows"] if t0 <= x[0] <= t1]
    return times, flows, t1 - t0


def summarize(per_job, flows):
    """The jobs' times (|per_job|: a list per job), pooled and per job,
    and the background flows' completion times."""
    times = [t for job in per_job for t in job]
    short = [f[2] * 1e3 for f in flows if f[1] < SHORT_BYTES and
             f[2] is not None]
    done = [f[2] * 1e3 for f in flows if f[2] is not None]
    return {
        "job_p50_ms": statistics.median(times) if times else None,
        "job_mean_ms": statistics.mean(times) if times else None,
        "per_job_p50_ms": [statistics.median(j) for j in per_job if j],
        "flows": len(flows), "unfinished": len(flows) - len(done),
        "short": len(short),
        "short_p50_ms": statistics.median(short) if short else None,
        "short_p99_ms": common.percentile(short, 0.99) if short else None,
        "mean_ms": statistics.mean(done) if done else None}


def fmt(x, nd=1):
    return "-" if x is None else f"{x:,.{nd}f}"


def ratio(rows, load, a, b, key):
    """rows[a][key] / rows[b][key] at |load| as "1.23x", or None."""
    x, y = rows.get((load, a)), rows.get((load, b))
    if not x or not y or not x[key] or not y[key]:
        return None
    return f"{x[key] / y[key]:.2f}x"


def plot(rows, configs, loads, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(configs)
    for i, cfg in enumerate(configs):
        xs = [j + (i - (len(configs) - 1) / 2) * width
              for j in range(len(loads))]
        color = f"C{list(LABELS).index(cfg)}"  # a configuration's own
        if cfg != "none":
            ax1.bar(xs, [rows[(ld, cfg)]["job_p50_ms"] for ld in loads],
                    width, label=LABELS[cfg], color=color)
        ax2.bar(xs, [rows[(ld, cfg)]["short_p99_ms"] or 0 for ld in loads],
                width, label=LABELS[cfg], color=color)
    for ax, title in ((ax1, "job: median all-reduce (ms)"),
                      (ax2, "short flows (< 100 KB): p99 FCT (ms)")):
        ax.set_xticks(range(len(loads)))
        ax.set_xticklabels([f"load {ld}" for ld in loads])
        ax.set_title(title)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(a, rows, configs, loads):
    ecn = f"ECN above {a.ecn_k >> 10} KiB" if a.ecn_k else "no ECN marking"
    if a.racks > 1:
        print(f"\n{a.jobs} jobs at once, {a.racks} racks, {a.spines} "
              f"spines at {a.fabric_rate or a.rate}; ina and panama: a tree "
              f"per spine, ina1: one tree", end="")
    print(f"\n{a.ranks} ranks of {a.hosts} hosts at {a.rate}, queue "
          f"{a.queue >> 10} KiB, {ecn}; "
          f"{a.size >> 20} MiB all-reduces; pooled over {a.rounds} rounds")
    print("load | configuration | job p50 / mean (ms) | flows (unfinished) "
          "| short flows: n, p50 / p99 (ms) | all flows mean (ms)")
    for load in loads:
        for cfg in configs:
            s = rows[(load, cfg)]
            print(f"{load} | {LABELS[cfg]} | {fmt(s['job_p50_ms'])} / "
                  f"{fmt(s['job_mean_ms'])} | {s['flows']} "
                  f"({s['unfinished']}) | {s['short']}, "
                  f"{fmt(s['short_p50_ms'], 2)} / "
                  f"{fmt(s['short_p99_ms'], 2)} | {fmt(s['mean_ms'], 2)}")
    if a.jobs > 1:
        print("per job, p50 (ms): " + "; ".join(
            f"load {ld} {cfg}: " + " / ".join(
                fmt(x) for x in rows[(ld, cfg)]["per_job_p50_ms"])
            for ld in loads for cfg in configs if cfg != "none"))
    for load in loads:
        parts = [f"{what} {r}" for what, r in (
            ("job Gloo / dlcp ring",
             ratio(rows, load, "gloo", "ring", "job_p50_ms")),
            ("job baseline / dlcp ring",
             ratio(rows, load, "ring_base", "ring", "job_p50_ms")),
            ("job ring / PANAMA",
             ratio(rows, load, "ring", "panama", "job_p50_ms")),
            ("job fixed window / PANAMA",
             ratio(rows, load, "ina", "panama", "job_p50_ms")),
            ("job one tree / PANAMA",
             ratio(rows, load, "ina1", "panama", "job_p50_ms")),
            ("short p99 one tree / PANAMA",
             ratio(rows, load, "ina1", "panama", "short_p99_ms")),
            ("short p99 fixed window / PANAMA",
             ratio(rows, load, "ina", "panama", "short_p99_ms")),
            ("short p99 ring / PANAMA",
             ratio(rows, load, "ring", "panama", "short_p99_ms"))) if r]
        if parts:
            print(f"load {load}: " + "; ".join(parts))
    if "panama" in configs:
        print(f"(PANAMA's seed: job up to {SEED_JOB}x shorter, short-flow "
              f"p99 up to {SEED_SHORT_P99}x better)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--configs", default="none,ring,gloo,ina,panama")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--loads", default="0.2,0.5")
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--size", type=common.parse_bytes, default=4 << 20)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--queue", type=common.parse_bytes, default=128 << 10)
    ap.add_argument("--ecn-k", type=ecn_bytes, default=15 << 10,
                    help="mark CE above this backlog (0: no marking)")
    ap.add_argument("--racks", type=int, default=1)
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--fabric-rate", default=None,
                    help="rack-spine links (default --rate)")
    ap.add_argument("--baseline-bench", default=None,
                    help="a dlcp-bench binary for ring_base")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-background: needs root (network namespaces)")
    configs = a.configs.split(",")
    if a.racks > 1:
        LABELS["ina"] = "INA, a tree per spine, fixed window"
        LABELS["panama"] = "INA + PANAMA, a tree per spine"
    for c in configs:
        if c not in LABELS:
            sys.exit(f"bench-background: --configs: unknown '{c}' (expected "
                     f"{', '.join(LABELS)})")
    if "ring_base" in configs and not a.baseline_bench:
        sys.exit("bench-background: ring_base needs --baseline-bench PATH")
    if not 2 <= a.ranks <= a.hosts:
        sys.exit(f"bench-background: --ranks {a.ranks}: expected 2.."
                 f"--hosts ({a.hosts})")
    if a.racks > 1 and (a.hosts % a.racks or a.ranks % a.racks or
                        a.jobs * a.ranks > a.hosts or a.jobs < 1):
        sys.exit(f"bench-background: --racks {a.racks}: expected --hosts "
                 f"and --ranks multiples of it and --jobs x --ranks <= "
                 f"--hosts")
    if a.racks == 1 and (a.jobs != 1 or "ina1" in configs):
        sys.exit("bench-background: --jobs and ina1 need --racks >= 2")
    try:
        loads = [float(x) for x in a.loads.split(",")]
    except ValueError:
        loads = [-1.0]
    if not all(0 < ld <= 1 for ld in loads):
        sys.exit(f"bench-background: --loads '{a.loads}': expected "
                 f"fractions in (0, 1], comma-separated")
    outdir = a.out or os.path.join(
        a.build, "bench-background" + ("-racks" if a.racks > 1 else ""))
    os.makedirs(outdir, exist_ok=True)
    peers = (common.build_peers(a.build, log, ("gloo_allreduce",))
             if "gloo" in configs else {})
    tb = testbed_up(a, "ina" in configs or "panama" in configs)
    # ina1's testbed: the same shape, its switches one tree.
    tb1 = testbed_up(a, True, 1) if "ina1" in configs else None
    cells = {}
    try:
        for rnd in range(1, a.rounds + 1):
            for load in loads:
                # The reference runs as long as the job cell before it.
                ref_s = REFERENCE_S
                k = (rnd - 1) % len(configs)
                for cfg in configs[k:] + configs[:k]:
                    times, flows, span = run_cell(
                        a, tb1 if cfg == "ina1" else tb, cfg, load, rnd,
                        outdir, ref_s, peers)
                    if cfg != "none":
                        ref_s = span
                    c = cells.setdefault((load, cfg), ([], []))
                    if not c[0]:
                        c[0].extend([] for _ in times)
                    for pooled, job in zip(c[0], times):
                        pooled.extend(job)
                    c[1].extend(flows)
                    s = summarize(times, flows)
                    print(f"# round {rnd}, load {load}, {LABELS[cfg]}: job "
                          f"{fmt(s['job_p50_ms'])} ms, {s['short']} short "
                          f"flows p99 {fmt(s['short_p99_ms'])} ms "
                          f"({span:.0f} s)", flush=True)
    finally:
        subprocess.run([TESTBED, "down", tb] + ([tb1] if tb1 else []),
                       check=False, capture_output=True)
    rows = {key: summarize(*v) for key, v in cells.items()}
    report(a, rows, configs, loads)
    with open(os.path.join(outdir, "background.json"), "w") as f:
        json.dump({"hosts": a.hosts, "ranks": a.ranks, "rate": a.rate,
                   "racks": a.racks, "spines": a.spines, "jobs": a.jobs,
                   "fabric_rate": a.fabric_rate or a.rate,
                   "size": a.size, "iters": a.iters, "rounds": a.rounds,
                   "queue": a.queue, "ecn_k": a.ecn_k,
                   "rows": [dict(load=ld, config=c, **rows[(ld, c)])
                            for ld in loads for c in configs]},
                  f, indent=1)
    plot(rows, configs, loads, os.path.join(outdir, "background.png"))
    print(f"wrote {outdir}/background.json and background.png")


if __name__ == "__main__":
    main()
