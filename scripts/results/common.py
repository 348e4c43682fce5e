"""Shared helpers of the experiments under scripts/results (make results).

An experiment builds a list of runs (an id, --set overrides of a base
scenario, and the parameters it varies), runs them through dlcp-sweep in
parallel, reads the merged results.csv back, and returns a Markdown section
and PNG plots.  Every figure comes from the simulator at run time; the
seeds' numbers are the only constants.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DOCS = os.path.join(ROOT, "docs")
PLOTS = os.path.join(DOCS, "results")
PROFILES = os.path.join(ROOT, "workloads", "profiles")

# Per-transport switch and host settings the papers prescribe (docs/
# simulator.md, "Baselines"); every run uses one of these on top of its
# scenario.
NDP_QUEUES = "[off, 8pkts, off, off, off, off, off, off]"
MLT_THRESHOLDS = "[65pkts, 20pkts, 30pkts, 40pkts, 50pkts, 60pkts, 65pkts, " \
                 "65pkts]"
# ECN on the port's bytes in all queues, beside the per-queue thresholds,
# for the transports that spread a port's traffic over priority queues
# (PIAS's own strict-priority switch marks per port).  Per-queue
# thresholds alone let a starved queue fill the port: ResNet50's MLT PS
# iteration at its real sizes dropped 606 k packets to full buffers with
# them and 1.5 k with this too (docs/simulator.md, "Ports and links").
PORT_THRESHOLD = "switch.ecn_port_threshold=65pkts"

# Every rack of the PS experiments holds workers and servers 3:1, as the
# seed's PS.
WORKERS_PER_RACK, SERVERS_PER_RACK = 12, 4


def ps_racks_sets(tors):
    """The --set overrides for a PS job over |tors| racks of 3:1."""
    return ["topology.tors=%d" % tors,
            "workload.ps.workers=%d" % (WORKERS_PER_RACK * tors),
            "workload.ps.servers=%d" % (SERVERS_PER_RACK * tors)]


def transport_sets(kind, pias_thresholds=None, mlt_loss_bound=0.1):
    """The --set overrides that configure |kind| as its paper does."""
    if kind == "dctcp":
        return ["transport.kind=dctcp"]
    if kind == "tcp":
        return ["transport.kind=tcp", "switch.ecn_threshold=off"]
    if kind == "pias":
        s = ["transport.kind=pias", PORT_THRESHOLD]
        if pias_thresholds:
            s.append("transport.pias.thresholds=[%s]" %
                     ", ".join(str(int(t)) for t in pias_thresholds))
        return s
    if kind == "pfabric":
        return ["transport.kind=pfabric", "switch.scheduling=pfabric",
                "switch.ecn_threshold=off"]
    if kind == "ndp":
        return ["transport.kind=ndp", "switch.trimming=true",
                "switch.ecn_threshold=" + NDP_QUEUES]
    if kind == "mlt":
        return ["transport.kind=mlt",
                "transport.loss_bound=%g" % mlt_loss_bound,
                "transport.load_balancing=source", "transport.paths=4",
                "transport.importance=magnitude",
                "switch.ecn_threshold=" + MLT_THRESHOLDS, PORT_THRESHOLD]
    raise ValueError(kind)


def parse_bytes(text):
    """A positive byte count with an optional k, m or g (binary units), for
    argparse: 64k, 4m."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower()
    mult = units.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in units else t
    if not digits.isdigit() or int(digits) <= 0:
        raise argparse.ArgumentTypeError(f"{text}: expected bytes like 64k")
    return int(digits) * mult


def bench_argv(build, size, iters, warmup, algo, out):
    """dlcp-bench timing |iters| checked all-reduces of |size| bytes by
    |algo| after |warmup| more, its JSON summary written to |out| (the
    testbed benchmarks of the aggregation switch run it so)."""
    return [os.path.join(build, "bin", "dlcp-bench"), "-b", str(size),
            "-e", str(size), "-n", str(iters), "-w", str(warmup),
            "-a", algo, "-c", "1", "-J", out]


def bench_result(prog, what, rc, out, log_path):
    """The JSON a dlcp-bench run wrote to |out|.  Exits, naming |what| and
    the run's log, if it failed (exit status |rc|) or checked a wrong
    result."""
    if rc != 0:
        sys.exit(f"{prog}: {what} failed (exit {rc}); see {log_path}")
    with open(out) as f:
        r = json.load(f)
    if r.get("wrong", 0) != 0:
        sys.exit(f"{prog}: {what}: {r['wrong']} wrong results; see "
                 f"{log_path}")
    return r


def build_peers(build, log, names=("gloo_allreduce", "mpi_allreduce")):
    """Compiles the programs |names| of bench/peers (Gloo's, Open MPI's)
    into BUILD/peers when their source is newer (saying so through |log|);
    returns their paths by name."""
    peers = os.path.join(build, "peers")
    os.makedirs(peers, exist_ok=True)
    out = {}
    for name, src, argv in (
            ("gloo_allreduce", "bench/peers/gloo_allreduce.cc",
             ["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-pthread"]),
            ("mpi_allreduce", "bench/peers/mpi_allreduce.c",
             ["mpicc", "-O2", "-Wall", "-Wextra"])):
        if name not in names:
            continue
        dst = os.path.join(peers, name)
        if not os.path.exists(dst) or os.path.getmtime(
                os.path.join(ROOT, src)) > os.path.getmtime(dst):
            log(f"building {dst}")
            libs = ["-lgloo"] if name == "gloo_allreduce" else []
            subprocess.run(argv + [src, "-o", dst] + libs, cwd=ROOT,
                           check=True)
        out[name] = dst
    return out


def read_profile(model):
    """(tensor bytes in forward order, header dict) of a profile CSV."""
    sizes, header = [], {}
    with open(os.path.join(PROFILES, model + ".csv")) as f:
        for line in f:
            if line.startswith("#"):
                for tok in line[1:].split():
                    if "=" in tok:
                        k, v = tok.split("=", 1)
                        header.setdefault(k, v)
                continue
            if line.startswith("tensor,"):
                continue
            sizes.append(int(line.split(",")[3]))
    return sizes, header


def partitions(model, scale, partition=4000000, backward=False):
    """The flow sizes a profile-driven PS job of |model| makes, tensor by
    tensor in forward order, or with |backward| in the order the job
    produces and places them (last tensor first)."""
    out = []
    sizes = read_profile(model)[0]
    for b in reversed(sizes) if backward else sizes:
        b = 4 * -(-int(b * scale) // 4) if scale != 1 else b
        b = max(b, 4)
        while b > 0:
            out.append(min(b, partition))
            b -= partition
    return out


def pias_thresholds(sizes, queues=8):
    """PIAS's demotion thresholds from a flow-size distribution: the
    (k/queues)-quantiles of the sizes, k = 1..queues-1, made increasing."""
    s = sorted(sizes)
    th = []
    for k in range(1, queues):
        v = s[min(len(s) - 1, k * len(s) // queues)]
        if not th or v > th[-1]:
            th.append(v)
    return th


def sweep(name, runs, scenario, jobs, build):
    """Runs |runs| with dlcp-sweep into BUILD/results/NAME; returns the
    merged rows (dicts of strings)."""
    out = os.path.join(build, "results", name)
    os.makedirs(out, exist_ok=True)
    spec = {"name": name, "scenario": scenario, "runs": runs}
    spec_path = os.path.join(out, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    sim = os.path.join(build, "bin", "dlcp-sim")
    cmd = [os.path.join(ROOT, "scripts", "dlcp-sweep"), "run", spec_path,
           "--out", out, "--sim", sim, "--quiet"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    print("  %s: %d runs -> %s" % (name, len(runs), out), flush=True)
    rc = subprocess.call(cmd)
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    if rc != 0:
        bad = [r["id"] for r in rows if r["status"] != "ok"]
        print("  %s: runs not finished: %s" % (name, ", ".join(bad)),
              file=sys.stderr)
    return rows


def num(row, key):
    v = row.get(key, "")
    try:
        return float(v)
    except ValueError:
        return float("nan")


def seed_medians(rows, key, fields):
    """Runs of one configuration over several seeds, merged: key(row) ->
    a row holding each of |fields| as the median over the configuration's
    runs, and status "ok" only if every one finished."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    by = {}
    for k, rs in groups.items():
        m = {"status": "ok" if all(r["status"] == "ok" for r in rs)
             else "not finished"}
        for f in fields:
            m[f] = str(statistics.median(num(r, f) for r in rs))
        by[k] = m
    return by


def table(headers, rows):
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def percentile(xs, q):
    """The nearest-rank |q| quantile of |xs| (at index int(q * n), at most
    the last), as the FCT tails of the experiments take it."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def pct(x):
    return "n/a" if x != x else "%+.1f %%" % x


def plot_path(name):
    os.makedirs(PLOTS, exist_ok=True)
    return os.path.join(PLOTS, name + ".png")


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def unfinished_note(rows):
    """Markdown lines naming the runs that did not finish, with how far
    they got: never silently a blank cell."""
    bad = [r for r in rows if r["status"] != "ok"]
    if not bad:
        return []
    out = ["Runs that did not finish before their `stop_at` (flows "
           "finished / total, partly delivered and failed flows from "
           "`summary.json`):", ""]
    for r in bad:
        out.append("- `%s`: %s / %s flows, %s partly delivered, %s failed%s"
                   % (r["id"], r.get("flows.finished", "?"),
                      r.get("flows.total", "?"),
                      r.get("delivery.partial_flows", "?"),
                      r.get("delivery.failed_flows", "?"),
                      " (status %s)" % r["failed_statuses"]
                      if r.get("failed_statuses") else ""))
    out += ["", "Status -217 is DLCP_ERR_NO_PROGRESS: the MLT core gave up "
            "on a transfer whose retransmission rounds made no progress "
            "(`max_rounds_without_progress` BITMAPs in a row that showed "
            "no new segment).", ""]
    return out


def experiment(name, build, jobs, full, runs, report, scenario=None,
               scenario_text=None):
    """Runs one experiment: |runs|(scale) through dlcp-sweep on the
    |scenario| file (or |scenario_text| written into the experiment's
    directory), then |report|(rows, scale, build).  The models' sizes are
    scaled by 1/16 unless |full|."""
    scale = 1.0 if full else 1.0 / 16
    out = os.path.join(build, "results", name)
    os.makedirs(out, exist_ok=True)
    if scenario_text is not None:
        scenario = os.path.join(out, name + ".yaml")
        with open(scenario, "w") as f:
            f.write(scenario_text)
    elif not os.path.isabs(scenario):
        scenario = os.path.join(HERE, scenario)
    return report(sweep(name, runs(scale), scenario, jobs, build), scale,
                  build)
