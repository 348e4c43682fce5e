"""MLT seed's ablation: its three components switched on in the seed's
orders, A (bounded loss), A+B, A+B+C and C, C+B, C+B+A, where
  A  bounded-loss tolerance: transport.loss_bound 0.1 (off: 0, reliable);
  B  gradient-aware queueing and dropping: layer priorities, magnitude
     importance (unimportant packets not-ECT, so dropped first) and the
     per-queue thresholds with one on the port (off: one queue, every
     packet important, one threshold);
  C  per-packet load balancing: path ids over 4 spines (off: one path,
     ECMP over the host pair's one UDP socket);
and the loss bound at 1, 10, 20 and 30 % with all three on.  Set-up: the
Fig. 14 set-up at 48 hosts with ResNet50's profile; metrics: mean and p99
FCT and the iteration time, each the median over SEEDS (one run's
iteration can take half as long again when a window is dropped whole:
docs/protocol.md, "The window's timeout").
"""

import statistics

import common

NAME = "ablation"
TORS = 3
COMBOS = ("A", "A+B", "A+B+C", "C", "C+B", "C+B+A")
BOUNDS = (0.01, 0.1, 0.2, 0.3)
SEEDS = (1, 2, 3, 4, 5)


def mlt_sets(parts, bound):
    s = ["transport.kind=mlt",
         "transport.loss_bound=%g" % (bound if "A" in parts else 0)]
    if "B" in parts:
        s += ["transport.importance=magnitude",
              "workload.ps.layer_priorities=7",
              "switch.ecn_threshold=" + common.MLT_THRESHOLDS,
              common.PORT_THRESHOLD]
    else:
        s += ["transport.importance=all", "switch.ecn_threshold=65pkts"]
    s += ["transport.load_balancing=source", "transport.paths=4"] \
        if "C" in parts else ["transport.load_balancing=ecmp",
                              "transport.paths=1"]
    return s


def runs(scale):
    base = common.ps_racks_sets(TORS) + [
        "workload.ps.profile=resnet50",
        "workload.ps.profile_scale=%g" % scale,
        "host.nic_buffer=256MB", "stop_at=2s"]
    configs = [("combo-" + c.replace("+", ""), c,
                0.1 if "A" in c else 0, mlt_sets(set(c.split("+")), 0.1))
               for c in COMBOS]
    configs += [("bound-%g" % b, "A+B+C", b, mlt_sets({"A", "B", "C"}, b))
                for b in BOUNDS]
    return [{"id": "%s-s%d" % (name, seed),
             "set": ["seed=%d" % seed] + base + sets,
             "params": {"config": name, "combo": combo, "loss_bound": bound,
                        "seed": seed}}
            for name, combo, bound, sets in configs for seed in SEEDS]


def summarize(rows):
    """One row per configuration, in run order: the medians over its seeds
    of mean FCT, p99 FCT and iteration (us), the lowest delivered
    fraction, and how many of its runs finished."""
    by = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    out = []
    for name, rs in by.items():
        ok = [r for r in rs if r["status"] == "ok"]
        med = {k: statistics.median(common.num(r, k) for r in ok)
               if ok else float("nan")
               for k in ("fct.all.mean_us", "fct.all.p99_us",
                         "iteration_mean_us")}
        out.append({"config": name, "combo": rs[0]["combo"],
                    "loss_bound": rs[0]["loss_bound"], "ok": len(ok),
                    "runs": len(rs), "med": med,
                    "min_delivered": min((common.num(
                        r, "delivery.min_fraction") for r in ok),
                        default=float("nan"))})
    return out


def report(rows, scale, build):
    md = ["## MLT ablation and loss bound (MLT seed section 6.2)", "",
          "Command: `scripts/results/run.py --only ablation`.  The Fig. 14 "
          "set-up at %d hosts, ResNet50 (profile scaled by %g), MLT with "
          "its components switched as the seed's ablation; each figure "
          "is the median over seeds %s (the lowest delivered fraction: "
          "the lowest of them)." % (
              16 * TORS, scale, ", ".join(str(s) for s in SEEDS)), ""]
    head = ["components", "loss bound", "mean FCT (us)", "p99 FCT (us)",
            "iteration (ms)", "min delivered"]
    body = []
    conf = summarize(rows)
    for c in conf:
        done = c["ok"] == c["runs"]
        body.append([c["combo"], c["loss_bound"],
                     "%.0f" % c["med"]["fct.all.mean_us"] if done else
                     "%d of %d finished" % (c["ok"], c["runs"]),
                     "%.0f" % c["med"]["fct.all.p99_us"] if done else "",
                     "%.2f" % (c["med"]["iteration_mean_us"] / 1e3)
                     if done else "",
                     "%.6f" % c["min_delivered"] if done else ""])
    md += [common.table(head, body), ""]
    mean = {c["combo"]: c["med"]["fct.all.mean_us"] for c in conf
            if c["ok"] == c["runs"] and c["config"].startswith("combo-")}
    for order in (("A", "A+B", "A+B+C"), ("C", "C+B", "C+B+A")):
        if all(o in mean for o in order):
            md.append("Adding components in the order %s: mean FCT %s us "
                      "(%s)." % (" -> ".join(order), " -> ".join(
                          "%.0f" % mean[o] for o in order),
                          "each one helps" if mean[order[0]] >
                          mean[order[1]] > mean[order[2]] or
                          mean[order[0]] > mean[order[1]] >= mean[order[2]]
                          else "not every one helps"))
    md.append("")
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ok = [c for c in conf if c["ok"] == c["runs"]]
    labels = ["%s%s" % (c["combo"], "" if c["config"].startswith("combo-")
                        else "\np=%s" % c["loss_bound"]) for c in ok]
    x = range(len(ok))
    ax.bar([i - 0.2 for i in x], [c["med"]["fct.all.mean_us"] for c in ok],
           0.4, label="mean FCT")
    ax.bar([i + 0.2 for i in x], [c["med"]["fct.all.p99_us"] / 10
                                  for c in ok], 0.4, label="p99 FCT / 10")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("us")
    ax.legend()
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![ablation](results/%s.png)" % NAME, ""]
    md += common.unfinished_note(rows)
    md += ["The seed reports each component's gain on its testbed (training "
           "speed); here the network-level effect of each combination in "
           "simulation.  The rows reflect the MLT core of this commit.", ""]
    return "\n".join(md)


def main(build, jobs, full):
    return common.experiment(NAME, build, jobs, full, runs, report,
                             scenario="fig14-ps.yaml")
