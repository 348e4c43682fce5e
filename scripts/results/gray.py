"""MLT seed Fig. 15 (gray failure): training speed under random link loss
of 0, 0.01, 0.1 and 1 %, MLT against TCP-based training (DCTCP, RTO_min
1 ms), for VGG16 and Transformer PS jobs.

The seed drops packets with tc at the NICs of its 8-server testbed; here
every host's cable loses p in both directions (a packet crosses two host
cables, so it is lost with probability about 2p), on a leaf-spine of 4
ToRs x 4 hosts and 2 spines at 100 Gbps (24 us base RTT), workers:servers
3:1.  Speed is 1 / the mean iteration time over the iterations after the
first, the median over SEEDS seeds (a PS job's layered incasts make a
single run's iteration time swing by a third with the seed, and MLT's
has a tail: a window dropped whole waits two drain intervals,
docs/protocol.md; with three seeds the Transformer's median at 1 % loss
moved by 1.2 ms when the servers began to post their receives ahead,
with eight by 0.9 ms at 0.01 %, with 24 by 0.02 ms).
"""
import os
import statistics

import common

NAME = "gray"
MODELS = ("vgg16", "transformer")
LOSSES = (0.0, 0.0001, 0.001, 0.01)
TRANSPORTS = ("mlt", "dctcp")
HOSTS = 16
ITERATIONS = 4
SEEDS = tuple(range(1, 25))
# Seed: speed change of the baselines (BytePS / TCP) at 0.1% and 1% loss.
SEED = {"vgg16": {0.001: (-12.2, -31.5), 0.01: (-25.7, -61.7)},
        "transformer": {0.001: (-15.0, -28.3), 0.01: (-31.2, -61.3)}}

SCENARIO = """# Written by scripts/results/gray.py.
name: gray-failure
seed: 1
topology: {kind: leaf_spine, spines: 2, tors: 4, hosts_per_tor: 4,
           host_rate: 100Gbps, fabric_rate: 100Gbps, base_rtt: 24us}
switch: {queues: 8, port_buffer: 512KB, ecn_threshold: 65pkts}
transport: {kind: dctcp, rto_min: 1ms, init_cwnd: 20}
host: {nic_buffer: 256MB}
workload:
  ps: {workers: 12, servers: 4, profile: vgg16, iterations: %d}
stop_at: 2s
""" % ITERATIONS


def loss_faults(p):
    if p == 0:
        return "faults=[]"
    items = ["{link: [h%d, tor%d], loss: %g}" % (h, h // 4, p)
             for h in range(HOSTS)]
    return "faults=[" + ", ".join(items) + "]"


def runs(scale):
    out = []
    for model in MODELS:
        for kind in TRANSPORTS:
            for p in LOSSES:
                for seed in SEEDS:
                    sets = ["seed=%d" % seed,
                            "workload.ps.profile=%s" % model,
                            "workload.ps.profile_scale=%g" % scale,
                            loss_faults(p)]
                    sets += common.transport_sets(kind)
                    if kind == "mlt":
                        sets.append("workload.ps.layer_priorities=7")
                    out.append({"id": "%s-%s-%g-s%d" % (model, kind, p, seed),
                                "set": sets,
                                "params": {"model": model, "transport": kind,
                                           "loss": p, "seed": seed}})
    return out


def iteration_time(build, run_id):
    """Mean iteration time after the first (warm-up), in us, from the
    run's iterations.csv."""
    path = os.path.join(build, "results", NAME, "runs", run_id,
                        "iterations.csv")
    try:
        with open(path) as f:
            lines = f.read().split("\n")[1:]
    except OSError:
        return float("nan")
    d = [float(line.split(",")[3]) for line in lines if line.strip()]
    d = d[1:] if len(d) > 1 else d
    return sum(d) / len(d) if d else float("nan")


def medians(rows, build):
    """(model, transport, loss) -> (median, lowest, highest) of the mean
    iteration times of the seeds' runs that finished, all of them or
    none."""
    by = {}
    for r in rows:
        key = (r["model"], r["transport"], float(r["loss"]))
        by.setdefault(key, []).append(
            iteration_time(build, r["id"]) if r["status"] == "ok" else None)
    out = {}
    for key, ts in by.items():
        if ts and all(x is not None for x in ts):
            out[key] = (statistics.median(ts), min(ts), max(ts))
    return out


def report(rows, scale, build):
    spread = medians(rows, build)
    t = {key: m[0] for key, m in spread.items()}
    md = ["## Gray failure: training speed under random loss "
          "(MLT seed Fig. 15)", "",
          "Command: `scripts/results/run.py --only gray`.  Leaf-spine 4 ToRs "
          "x 4 hosts, 2 spines, 100 Gbps, 24 us base RTT, 512 KB ports; PS "
          "12 workers : 4 servers; %d iterations of the model's profile "
          "scaled by %g (tensors and compute); loss p on every host cable "
          "(both directions).  DCTCP: RTO_min 1 ms; MLT: loss bound 10%%.  "
          "Speed change against the same transport without loss.  Each "
          "iteration time is the median over seeds %s of the mean "
          "iteration after the first (lowest-highest in brackets)." % (
              ITERATIONS, scale, ", ".join(str(s) for s in SEEDS)), ""]
    plt = common.pyplot()
    fig, axes = plt.subplots(1, len(MODELS), figsize=(10, 3.6))
    for mi, model in enumerate(MODELS):
        head = ["loss", "MLT iteration (ms)", "MLT speed", "DCTCP iteration "
                "(ms)", "DCTCP speed", "seed: TCP-based speed"]
        body = []
        for p in LOSSES:
            line = ["%g %%" % (100 * p)]
            for kind in TRANSPORTS:
                x, x0 = t.get((model, kind, p)), t.get((model, kind, 0.0))
                line.append("not finished" if x is None else
                            "%.2f (%.2f-%.2f)" % tuple(
                                v / 1e3 for v in spread[(model, kind, p)]))
                line.append("n/a" if x is None or x0 is None else
                            common.pct(100 * (x0 / x - 1)))
            s = SEED[model].get(p)
            line.append("%+.1f to %+.1f %%" % s if s else
                        ("0 (reference)" if p == 0 else "not reported"))
            body.append(line)
        md += ["### %s" % model, "", common.table(head, body), ""]
        ax = axes[mi]
        for kind in TRANSPORTS:
            x0 = t.get((model, kind, 0.0), float("nan"))
            ys = [x0 / t.get((model, kind, p), float("nan")) for p in LOSSES]
            ax.plot([100 * p for p in LOSSES], ys, marker="o", label=kind)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlabel("loss per host cable (%)")
        ax.set_ylabel("speed / speed without loss")
        ax.set_ylim(0, 1.1)
        ax.set_title(model)
        ax.legend()
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![gray failure](results/%s.png)" % NAME, ""]
    md += common.unfinished_note(rows)
    d = t.get(("vgg16", "dctcp", 0.01)), t.get(("vgg16", "dctcp", 0.0))
    slower = d[0] is not None and d[1] is not None and d[0] > d[1]
    md += ["Direction: TCP-based training %s at 1 %% loss (seed: slower). "
           "Differences from the seed: the seed measures BytePS on GPUs "
           "with tc loss at the NICs; here the PS job is a profile-driven "
           "simulation scaled to 1/16 (`--full` for real sizes), loss hits "
           "both directions of every host cable, and 0.01-0.1 %% loss can "
           "even speed DCTCP up, because a few early losses shrink windows "
           "that the PS incast would otherwise overflow into 1 ms timeouts "
           "(compare the timeout counts in `build/results/gray/results.csv`"
           ")." % ("slows down" if slower else "does not slow down"), ""]
    return "\n".join(md)


def main(build, jobs, full):
    return common.experiment(NAME, build, jobs, full, runs, report,
                             scenario_text=SCENARIO)
