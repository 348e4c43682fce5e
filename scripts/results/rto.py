"""MLT seed Fig. 19: tail FCT with microsecond RTO_min (25 us, 100 us,
500 us, 1 ms) and gradient compression (1x, 8x, 32x) for DCTCP, against
MLT.

Set-up: the Fig. 14 set-up (scripts/results/fig14-ps.yaml) at 48 hosts
(3 ToRs) with ResNet50's profile; compression divides every tensor's size
and leaves compute times alone.  The seed reports a tail of about 10 ms or
more even at sub-millisecond RTO_min, MLT's 4.12 ms, and at 25 us with 32x
compression 4.2 KB of spurious retransmissions and 0.97 % loss on the tail
flows.
"""

import common

NAME = "rto"
RTOS = ("25us", "100us", "500us", "1ms")
COMPRESSION = (1, 8, 32)
TORS = 3
# Every figure is the median over these seeds.
SEEDS = (1, 2, 3)
FIELDS = ("fct.all.p99_us", "counters.timeouts", "counters.retransmits")


def base_sets(scale, c):
    return common.ps_racks_sets(TORS) + [
        "workload.ps.profile=resnet50",
        "workload.ps.profile_scale=%g" % scale,
        "workload.ps.compression=%d" % c,
        "host.nic_buffer=256MB", "stop_at=2s"]


def runs(scale):
    out = []
    for c in COMPRESSION:
        for seed in SEEDS:
            for r in RTOS:
                out.append({"id": "dctcp-%s-%dx-s%d" % (r, c, seed),
                            "set": ["seed=%d" % seed] + base_sets(scale, c) +
                            common.transport_sets("dctcp") +
                            ["transport.rto_min=%s" % r],
                            "params": {"transport": "dctcp", "rto_min": r,
                                       "compression": c, "seed": seed}})
            out.append({"id": "mlt-%dx-s%d" % (c, seed),
                        "set": ["seed=%d" % seed] + base_sets(scale, c) +
                        common.transport_sets("mlt") +
                        ["workload.ps.layer_priorities=7"],
                        "params": {"transport": "mlt", "rto_min": "",
                                   "compression": c, "seed": seed}})
    return out


def report(rows, scale, build):
    by = common.seed_medians(
        rows, lambda r: (r["transport"], r["rto_min"],
                         int(r["compression"])), FIELDS)
    md = ["## RTO_min and gradient compression (MLT seed Fig. 19)", "",
          "Command: `scripts/results/run.py --only rto`.  The Fig. 14 "
          "set-up at %d hosts, ResNet50 (profile scaled by %g), DCTCP with "
          "each RTO_min, and MLT (10%% loss bound); p99 FCT in us, with "
          "DCTCP's timeouts and retransmitted packets, each the median over "
          "seeds %s." % (16 * TORS, scale,
                         ", ".join(str(s) for s in SEEDS)), ""]
    head = ["compression"] + ["DCTCP RTO_min %s" % r for r in RTOS] + ["MLT"]
    body = []
    for c in COMPRESSION:
        line = ["%dx" % c]
        for r in RTOS:
            x = by.get(("dctcp", r, c))
            line.append("not finished" if not x or x["status"] != "ok" else
                        "%.0f (%.0f timeouts, %.0f retx)" % (
                            common.num(x, "fct.all.p99_us"),
                            common.num(x, "counters.timeouts"),
                            common.num(x, "counters.retransmits")))
        m = by.get(("mlt", "", c))
        line.append("not finished" if not m or m["status"] != "ok" else
                    "%.0f" % common.num(m, "fct.all.p99_us"))
        body.append(line)
    md += [common.table(head, body), "",
           "Seed: the tail stays near 10 ms or above for every sub-"
           "millisecond RTO_min, MLT 4.12 ms.", ""]
    by = {k: v for k, v in by.items() if v["status"] == "ok"}
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for r in RTOS:
        ax.plot(COMPRESSION, [common.num(by[("dctcp", r, c)],
                                         "fct.all.p99_us")
                              if ("dctcp", r, c) in by else float("nan")
                              for c in COMPRESSION],
                marker="o", label="DCTCP RTO_min " + r)
    ax.plot(COMPRESSION, [common.num(by[("mlt", "", c)], "fct.all.p99_us")
                          if ("mlt", "", c) in by else float("nan")
                          for c in COMPRESSION],
            marker="s", color="k", label="MLT")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("gradient compression ratio")
    ax.set_ylabel("p99 FCT (us)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![RTO_min](results/%s.png)" % NAME, ""]
    one = [by.get(("dctcp", r, 1)) for r in RTOS]
    if all(x and x["status"] == "ok" for x in one):
        p99 = [common.num(x, "fct.all.p99_us") for x in one]
        to = [common.num(x, "counters.timeouts") for x in one]
        md += ["Direction: without compression, the best sub-millisecond "
               "RTO_min gives a p99 of %.0f us against %.0f us at 1 ms "
               "(%s), with %.0f timeouts at 25 us against %.0f at 1 ms "
               "(spurious ones among them): a smaller RTO_min does not cut "
               "the tail, as the seed finds.  Compression shrinks every "
               "flow, so the tail shrinks with it here, where the seed's "
               "stays near 10 ms." % (
                   min(p99[:-1]), p99[-1],
                   common.pct(100 * (min(p99[:-1]) / p99[-1] - 1)),
                   to[0], to[-1]), ""]
    md += common.unfinished_note(rows)
    md += ["Differences from the seed: the seed's Fig. 19 set-up beyond the "
           "RTO_min values is not given; here it is the Fig. 14 topology at "
           "48 hosts with a scaled ResNet50 (1/16 unless `--full`), so "
           "absolute tails are smaller than the seed's 10 ms.", ""]
    return "\n".join(md)


def main(build, jobs, full):
    return common.experiment(NAME, build, jobs, full, runs, report,
                             scenario="fig14-ps.yaml")
