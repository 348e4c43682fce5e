"""MLT seed Fig. 14: mean and tail (p99) FCT of MLT against DCTCP, PIAS,
pFabric and NDP for ResNet50 and GoogleNet PS traffic at three scales.

Set-up (seed section 5.4.2, scripts/results/fig14-ps.yaml): leaf-spine of
4 spines and T ToRs of 16 hosts at 100 Gbps, 24 us base RTT, 512 KB per
port, 8 queues, ECN at 65 packets; DCTCP and PIAS with RTO_min 1 ms, IW 20,
flow-level ECMP; pFabric and NDP spray packets; MLT with a 10% loss bound,
per-packet load balancing over 4 paths, gradient-aware priorities by layer
and per-queue thresholds, with one on the port's total as for PIAS.  PS
traffic of the model's profile with workers and servers 3:1 on every rack.
Scales: T = 3, 6, 9 (48, 96, 144 hosts).
"""

import common

NAME = "fig14"
MODELS = ("resnet50", "googlenet")
TORS = (3, 6, 9)
TRANSPORTS = ("mlt", "dctcp", "pias", "pfabric", "ndp")
BASELINES = ("dctcp", "pias", "pfabric", "ndp")
# MLT with every layer at one priority: not in the tables; it tells how
# much of MLT's lead over NDP its layer priorities make (ndp_note).
FLAT = "mlt_flat"
# pFabric with the seed's RTO_min of 1 ms (its section 5.4.3 sets it for
# the transports; pFabric's paper has 3 base RTTs): not in the tables; it
# tells whether that timeout would give the seed's direction
# (pfabric_note).
PF_SLOW = "pfabric_rto1ms"
PF_SLOW_RTO = "1ms"
# Every figure is the median over these seeds (placement of the job's
# hosts and the transports' draws).
SEEDS = (1, 2, 3)
# The fields the report reads, each the median over SEEDS.
FIELDS = ("fct.all.mean_us", "fct.all.p50_us", "fct.all.p99_us",
          "counters.drops_buffer", "counters.trims", "counters.timeouts",
          "iteration_mean_us")
# The seed's "up to" reductions of MLT's FCT against each baseline, %.
SEED = {
    "resnet50": {"mean": (43.1, 44.8, 35.5, 6.7),
                 "p99": (91.8, 91.8, 88.6, 10.3)},
    "googlenet": {"mean": (35.1, 38.0, 43.5, 7.7),
                  "p99": (91.7, 91.9, 91.7, 8.7)},
}


# MLT and DCTCP once more at the models' real sizes (ResNet50, 48 hosts,
# the first seed) when the tables run scaled: the seed's tails are of
# real tensors (real_note).
REAL = ("mlt", "dctcp")
REAL_SUFFIX = "_real"


def one_run(model, tors, kind, seed, scale, thresholds, suffix=""):
    """The sweep entry of |kind| on |model|'s PS job over |tors| racks;
    |suffix| tells runs of another set-up apart in ids and params."""
    sets = ["seed=%d" % seed] + common.ps_racks_sets(tors) + [
        "workload.ps.profile=%s" % model,
        "workload.ps.profile_scale=%g" % scale,
        # End hosts block rather than drop (backpressure).
        "host.nic_buffer=256MB", "stop_at=2s"]
    base = {FLAT: "mlt", PF_SLOW: "pfabric"}.get(kind, kind)
    sets += common.transport_sets(base, pias_thresholds=thresholds)
    if kind == PF_SLOW:
        sets.append("transport.pfabric.rto=" + PF_SLOW_RTO)
    if kind == "mlt":
        sets.append("workload.ps.layer_priorities=7")
    return {"id": "%s-%dtors-%s%s-s%d" % (model, tors, kind,
                                          suffix.replace("_", "-"), seed),
            "set": sets,
            "params": {"model": model, "tors": tors, "hosts": 16 * tors,
                       "transport": kind + suffix, "seed": seed}}


def runs(scale):
    out = []
    for model in MODELS:
        th = common.pias_thresholds(common.partitions(model, scale))
        out += [one_run(model, t, k, s, scale, th) for t in TORS
                for k in TRANSPORTS + (FLAT, PF_SLOW) for s in SEEDS]
    if scale != 1:
        out += [one_run(MODELS[0], TORS[0], k, SEEDS[0], 1, None,
                        REAL_SUFFIX) for k in REAL]
    return out


def reduction(mlt, base):
    return 100.0 * (base - mlt) / base if base > 0 else float("nan")


def pfabric_note(by):
    """Why MLT's mean FCT loses to pFabric's, read from the runs."""
    pairs = [(by[(m, t, "mlt")], by[(m, t, "pfabric")])
             for m in MODELS for t in TORS
             if (m, t, "mlt") in by and (m, t, "pfabric") in by and
             by[(m, t, "mlt")]["status"] == by[(m, t, "pfabric")]["status"]
             == "ok"]
    if not pairs:
        return []

    def span(rows, key):
        v = [common.num(r, key) for r in rows]
        if min(v) == max(v):
            return "%.0f" % v[0]
        return "%.0f-%.0f" % (min(v), max(v))
    mlt = [a for a, _ in pairs]
    pf = [b for _, b in pairs]
    out = ["Against pFabric the seed's direction does not hold: pFabric "
           "serves the flow with the fewest bytes left first at every "
           "port, the order that minimises the mean FCT, so its short "
           "flows finish first (median FCT %s us against MLT's %s) and "
           "its mean is lower.  It pays %s buffer drops and %s timeouts "
           "per run (MLT: %s drops, %s timeouts), and even so its p99 "
           "is %s us against MLT's %s.  The seed gives no parameters "
           "for its pFabric but its spraying; this one is its paper's "
           "(priority dequeue and drop by remaining size, per-packet "
           "spraying, 512 KB ports, a timeout of 3 base RTTs)." % (
                span(pf, "fct.all.p50_us"), span(mlt, "fct.all.p50_us"),
                span(pf, "counters.drops_buffer"),
                span(pf, "counters.timeouts"),
                span(mlt, "counters.drops_buffer"),
                span(mlt, "counters.timeouts"),
                span(pf, "fct.all.p99_us"), span(mlt, "fct.all.p99_us"))]
    slow = [(m, t) for m in MODELS for t in TORS
            if (m, t, "mlt") in by and (m, t, PF_SLOW) in by and
            by[(m, t, "mlt")]["status"] == by[(m, t, PF_SLOW)]["status"]
            == "ok"]
    if slow:
        cells = ["%s at %d hosts %.0f against %.0f" % (
            m, 16 * t, common.num(by[(m, t, PF_SLOW)], "fct.all.mean_us"),
            common.num(by[(m, t, "mlt")], "fct.all.mean_us"))
            for m, t in slow]
        wins = sum(1 for m, t in slow
                   if common.num(by[(m, t, "mlt")], "fct.all.mean_us") <
                   common.num(by[(m, t, PF_SLOW)], "fct.all.mean_us"))
        if wins == len(slow):
            verdict = "the seed's direction then holds everywhere"
        elif wins == 0:
            verdict = "the timeout is not the difference"
        else:
            verdict = "the timeout is part of the difference, not all"
        out.append("With the RTO_min of %s that the seed sets for its "
                   "transports, pFabric's mean FCT is (us, against MLT's) "
                   "%s: MLT's is the lower in %d of %d set-ups, so %s." % (
                       PF_SLOW_RTO.replace("ms", " ms"), "; ".join(cells),
                       wins, len(slow), verdict))
    return [" ".join(out), ""]


def ndp_note(by):
    """Why MLT's lead over NDP is larger than the seed's, read from the
    runs: NDP's receivers pull their senders in turn, MLT serves early
    layers first (its flat-priority runs show how much that is)."""
    keys = [(m, t) for m in MODELS for t in TORS
            if all((m, t, k) in by and by[(m, t, k)]["status"] == "ok"
                   for k in ("mlt", "ndp", FLAT))]
    if not keys:
        return []

    def span(kind, key):
        v = [common.num(by[(m, t, kind)], key) for m, t in keys]
        if min(v) == max(v):
            return "%.0f" % v[0]
        return "%.0f-%.0f" % (min(v), max(v))

    calm = [by[(m, t, "ndp")] for m, t in keys
            if common.num(by[(m, t, "ndp")], "counters.drops_buffer") == 0]
    no_drop = (" (%s in the runs without a drop)" % ", ".join(
        "%.0f" % common.num(r, "counters.timeouts") for r in calm)
        if calm else "")

    def ratio_span(a, b):
        v = [common.num(by[(m, t, a)], "fct.all.mean_us") /
             common.num(by[(m, t, b)], "fct.all.mean_us") for m, t in keys]
        return "%.2f-%.2fx" % (min(v), max(v))
    return ["Against NDP MLT's lead is larger than the seed's.  NDP's "
            "receivers pull their senders in turn (one pull per packet "
            "that arrived, sent in arrival order), so the flows into a "
            "server share its downlink and end together with the phase: "
            "its median FCT is short (%s us; MLT's %s) and its mean long "
            "(%s us against MLT's %s).  MLT sends a model's early layers "
            "at higher priorities, which ends their flows first: run with "
            "every layer at one priority, its mean FCT is %s us, %s its "
            "mean with priorities and %s NDP's.  NDP dropped %s packets "
            "(headers and control beyond queue 0's room), trimmed %s and "
            "timed out %s times per run%s: a packet unanswered 10 base "
            "RTTs after it left its host goes again (its header or answer "
            "was dropped), and a sender with nothing in flight whose "
            "pulls wait that long in a server's pull queue sends one "
            "packet unasked.  The seed gives no parameters for its NDP; this "
            "one is its paper's (8-packet trimming queues, per-packet "
            "spraying, pulls paced at the receiver's line rate)." % (
                span("ndp", "fct.all.p50_us"), span("mlt", "fct.all.p50_us"),
                span("ndp", "fct.all.mean_us"),
                span("mlt", "fct.all.mean_us"),
                span(FLAT, "fct.all.mean_us"), ratio_span(FLAT, "mlt"),
                ratio_span(FLAT, "ndp"),
                span("ndp", "counters.drops_buffer"),
                span("ndp", "counters.trims"),
                span("ndp", "counters.timeouts"), no_drop), ""]


def iteration_note(by):
    """What a training job waits for: the iteration, beside the FCTs the
    seed reports.  MLT's layer priorities, which make its mean FCT, can
    lengthen it: its flat-priority runs tell by how much."""
    kinds = ("mlt", FLAT) + BASELINES
    keys = [(m, t) for m in MODELS for t in TORS
            if all((m, t, k) in by and by[(m, t, k)]["status"] == "ok"
                   for k in kinds)]
    if not keys:
        return []

    def it(m, t, k):
        return common.num(by[(m, t, k)], "iteration_mean_us") / 1e3

    def timeouts(m, t, k):
        return common.num(by[(m, t, k)], "counters.timeouts")
    head = (["model", "hosts"] + ["%s (ms)" % k for k in kinds] +
            ["window timeouts: mlt / flat"])
    body = [[m, 16 * t] + ["%.1f" % it(m, t, k) for k in kinds] +
            ["%.0f / %.0f" % (timeouts(m, t, "mlt"), timeouts(m, t, FLAT))]
            for m, t in keys]
    longer = [(m, t) for m, t in keys if it(m, t, "mlt") > it(m, t, "dctcp")]
    flat_wins = [(m, t) for m, t in keys
                 if it(m, t, FLAT) < it(m, t, "dctcp")]
    ratios = [it(m, t, "mlt") / it(m, t, FLAT) for m, t in keys]
    return ["### The iteration", "",
            "The seed reports flow completion times; a training job waits "
            "for the iteration (here its one PS iteration, compute "
            "included; median over the seeds), and MLT's window timeouts "
            "(a full send window presumed drained after no ACK for two "
            "drain intervals) are counted beside it:", "",
            common.table(head, body), "",
            "MLT's iteration is longer than DCTCP's in %d of %d set-ups; "
            "with every layer at one priority (mlt_flat) it is shorter "
            "than DCTCP's in %d of %d.  With the layer priorities that "
            "make its mean FCT, MLT's iteration is %.2f-%.2fx its flat "
            "one.  The stalls that made it up to 2.4x (a window waiting "
            "out a timeout measured on a starved layer's RTTs, or a "
            "window whose ACK request was lost with packets of it "
            "delivered) went when the window's timeout began to follow "
            "its priority class and receivers to send quiet ACKs "
            "(docs/protocol.md, \"The window's timeout\"), and the rest "
            "of them when the switches marked on the port's total too, so that "
            "the queues strict priority starves no longer fill the port "
            "(docs/simulator.md, \"Ports and links\"); what is left "
            "is strict priority's order: a low layer's packets wait in "
            "the queues behind the higher layers', and the iteration "
            "waits for its slowest layer." % (
                len(longer), len(keys), len(flat_wins), len(keys),
                min(ratios), max(ratios)), ""]


def scale_note(by):
    """The seed's "the larger the network, the larger MLT's lead": MLT's
    mean-FCT reduction against each baseline at the largest scale against
    the smallest."""
    lo, hi = TORS[0], TORS[-1]
    cells, grew = [], 0
    for model in MODELS:
        for b in BASELINES:
            keys = [(model, t, k) for t in (lo, hi) for k in ("mlt", b)]
            if not all(k in by and by[k]["status"] == "ok" for k in keys):
                continue
            r = [reduction(common.num(by[(model, t, "mlt")],
                                      "fct.all.mean_us"),
                           common.num(by[(model, t, b)], "fct.all.mean_us"))
                 for t in (lo, hi)]
            grew += r[1] > r[0]
            cells.append("%s against %s %.1f -> %.1f %%" % (model, b, *r))
    if not cells:
        return []
    return ["Scale: the seed finds MLT's lead growing with the network.  "
            "MLT's mean-FCT reduction at %d against %d hosts: %s; larger "
            "at the larger scale in %d of %d." % (
                16 * lo, 16 * hi, "; ".join(cells), grew, len(cells)), ""]


def real_note(by):
    """MLT against DCTCP at the real sizes (REAL), beside the seed's tail:
    there the top 1 % of flows are multi-megabyte partitions sharing a
    server's downlink with the whole push phase."""
    model, tors = MODELS[0], TORS[0]
    keys = [(model, tors, k + REAL_SUFFIX) for k in REAL]
    if not all(k in by and by[k]["status"] == "ok" for k in keys):
        return []
    mlt, dctcp = (by[k] for k in keys)

    def f(r, key):
        return common.num(r, key)
    parts = common.partitions(model, 1, backward=True)
    big = sum(1 for b in parts if b >= 1000000)
    # What a server takes in an iteration: every worker's push of each of
    # its partitions, placed round-robin in backward order (the default).
    workers = common.WORKERS_PER_RACK * tors
    servers = common.SERVERS_PER_RACK * tors
    mean = workers * sum(parts) / servers
    busiest = workers * max(sum(parts[k::servers]) for k in range(servers))

    def ms(nbytes):
        return nbytes * 8 / 100e9 * 1e3
    return ["**At the real sizes.**  %s at %d hosts without the scaling "
            "(seed %d, one run each): MLT's mean / p99 FCT %.0f / %.0f us "
            "against DCTCP's %.0f / %.0f (%+.1f %% / %+.1f %%; the seed: "
            "-%.1f %% / -%.1f %%), its iteration %.1f against %.1f ms, %.0f "
            "buffer drops against %.0f, %.0f window timeouts against %.0f "
            "retransmission timeouts.  At "
            "these sizes %d of the model's %d partitions are 1-4 MB, so the "
            "top 1 %% of flows are such partitions, and a server takes in "
            "%.0f MB an iteration on average (%.1f ms at 100 Gbit/s; the "
            "busiest, with round-robin placement, %.0f MB, %.1f ms) through "
            "the downlink those partitions share: the p99 follows the push "
            "phase more than the transport.  A tail of -%.1f %% puts "
            "DCTCP's p99 at %.0fx MLT's; the seed does not say how its PS "
            "traffic was generated or its flows counted." % (
                model, 16 * tors, SEEDS[0],
                f(mlt, "fct.all.mean_us"), f(mlt, "fct.all.p99_us"),
                f(dctcp, "fct.all.mean_us"), f(dctcp, "fct.all.p99_us"),
                -reduction(f(mlt, "fct.all.mean_us"),
                           f(dctcp, "fct.all.mean_us")),
                -reduction(f(mlt, "fct.all.p99_us"),
                           f(dctcp, "fct.all.p99_us")),
                SEED[model]["mean"][0], SEED[model]["p99"][0],
                f(mlt, "iteration_mean_us") / 1e3,
                f(dctcp, "iteration_mean_us") / 1e3,
                f(mlt, "counters.drops_buffer"),
                f(dctcp, "counters.drops_buffer"),
                f(mlt, "counters.timeouts"), f(dctcp, "counters.timeouts"),
                big, len(parts), mean / 1e6, ms(mean), busiest / 1e6,
                ms(busiest),
                SEED[model]["p99"][0],
                100 / (100 - SEED[model]["p99"][0])), ""]


def report(rows, scale, build):
    by = common.seed_medians(
        rows, lambda r: (r["model"], int(r["tors"]), r["transport"]),
        FIELDS)
    md = ["## MLT seed Fig. 14: FCT of MLT vs DCTCP, PIAS, pFabric, NDP", "",
          "Command: `make results` (or `scripts/results/run.py --only "
          "fig14`).  Set-up: the seed's section 5.4.2 (`scripts/results/"
          "fig14-ps.yaml`): 4 spines, T ToRs x 16 hosts, 100 Gbps, 24 us "
          "base RTT, 512 KB ports, 8 queues, ECN 65 packets (for PIAS and "
          "MLT, which spread a port's traffic over priority queues, also "
          "on the port's total, as PIAS's own switch marks), RTO_min 1 ms, "
          "IW 20; one PS iteration of the model's profile "
          "(`workloads/profiles`), workers:servers 3:1 on every rack, "
          "tensors and compute times scaled by %g%s.  FCT covers every "
          "push and pull partition; every figure below is the median "
          "over seeds %s." % (
              scale, "" if scale == 1 else
              " (`--full` runs the real sizes)",
              ", ".join(str(s) for s in SEEDS)), ""]
    plt = common.pyplot()
    fig, axes = plt.subplots(len(MODELS), 2, figsize=(11, 3.6 * len(MODELS)))
    for mi, model in enumerate(MODELS):
        md += ["### %s" % model, ""]
        head = ["hosts"] + ["%s mean / p99 (us)" % t for t in TRANSPORTS]
        body = []
        for tors in TORS:
            line = [str(16 * tors)]
            for t in TRANSPORTS:
                r = by.get((model, tors, t))
                if r is None or r["status"] != "ok":
                    line.append("not finished")
                else:
                    line.append("%.0f / %.0f" % (
                        common.num(r, "fct.all.mean_us"),
                        common.num(r, "fct.all.p99_us")))
            body.append(line)
        md += [common.table(head, body), ""]
        head = ["MLT vs", "mean: here (best scale)", "seed", "p99: here",
                "seed"]
        body = []
        for bi, b in enumerate(BASELINES):
            red = {"mean": [], "p99": []}
            for tors in TORS:
                m, x = by.get((model, tors, "mlt")), by.get((model, tors, b))
                if not m or not x or "ok" not in (m["status"], x["status"]):
                    continue
                for k in red:
                    red[k].append(reduction(
                        common.num(m, "fct.all.%s_us" % k),
                        common.num(x, "fct.all.%s_us" % k)))
            best = {k: max(v) if v else float("nan") for k, v in red.items()}
            body.append([b, common.pct(-best["mean"]),
                         common.pct(-SEED[model]["mean"][bi]),
                         common.pct(-best["p99"]),
                         common.pct(-SEED[model]["p99"][bi])])
        md += ["MLT's FCT change against each baseline (negative: MLT "
               "faster), the best of the three scales as the seed's \"up "
               "to\":", "", common.table(head, body), ""]
        for ki, key in enumerate(("mean", "p99")):
            ax = axes[mi][ki] if len(MODELS) > 1 else axes[ki]
            width = 0.8 / len(TRANSPORTS)
            for ti, t in enumerate(TRANSPORTS):
                # Unfinished runs are left out: their FCTs cover only the
                # flows that finished.
                ys = [common.num(by[(model, tors, t)],
                                 "fct.all.%s_us" % key)
                      if (model, tors, t) in by and
                      by[(model, tors, t)]["status"] == "ok"
                      else float("nan") for tors in TORS]
                ax.bar([i + ti * width for i in range(len(TORS))], ys,
                       width, label=t)
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(TORS))])
            ax.set_xticklabels(["%d hosts" % (16 * t) for t in TORS])
            ax.set_ylabel("%s FCT (us)" % key)
            ax.set_yscale("log")
            ax.set_title("%s, %s FCT" % (model, key))
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![Fig. 14](results/%s.png)" % NAME,
           "(Runs that did not finish have no bar.)", ""]
    wins = total = 0
    losses = {}
    for model in MODELS:
        for tors in TORS:
            m = by.get((model, tors, "mlt"))
            for b in BASELINES:
                x = by.get((model, tors, b))
                if m and x and m["status"] == x["status"] == "ok":
                    total += 1
                    if common.num(m, "fct.all.mean_us") < \
                            common.num(x, "fct.all.mean_us"):
                        wins += 1
                    else:
                        losses[b] = losses.get(b, 0) + 1
    md += ["Direction: MLT's mean FCT is below the baseline's in %d of %d "
           "finished comparisons (seed: in all of them)%s." % (
               wins, total, "" if wins == total else
               "; the others are against %s" % ", ".join(
                   "%s (%d)" % (b, n) for b, n in sorted(losses.items()))),
           ""]
    md += scale_note(by)
    md += iteration_note(by)
    md += pfabric_note(by)
    md += ndp_note(by)
    md += real_note(by)
    md += common.unfinished_note(rows)
    md += ["Differences from the seed: its three scales are not given (here "
           "48, 96 and 144 hosts, the last being its topology); the "
           "profiles' tensors and compute times are scaled (1/16 unless "
           "`--full`), which keeps the flow-size mix and the overlap of "
           "backward passes with pushes but shortens every flow; PIAS's "
           "thresholds are the octiles of the job's partition sizes (PIAS "
           "derives them from the flow-size distribution); pFabric keeps "
           "the seed's 512 KB ports (about 1.7 BDP) and NDP trims at 8 "
           "packets, as their papers; end hosts never drop (256 MB NIC "
           "queues stand for a sender that blocks).  MLT's numbers are "
           "those of the MLT core at this commit.", ""]
    return "\n".join(md)


def main(build, jobs, full):
    return common.experiment(NAME, build, jobs, full, runs, report,
                             scenario="fig14-ps.yaml")
