"""PANAMA seed: in-network aggregation sharing a network with short,
latency-sensitive flows, with and without PANAMA's congestion control.

One rack: 16 hosts at 100 Gbit/s under one ToR that runs the aggregation
core (src/proto/agg).  A data-parallel job on 8 of them all-reduces
ResNet50's gradient (scaled) while web-search background flows run
between all 16 hosts at a swept load.  Three ways to synchronize:
- ring: src/coll's ring over DCTCP (no aggregation);
- INA, fixed window: src/coll/ina with a window of WINDOW groups, no
  congestion control (single-tree aggregation as SwitchML);
- INA + PANAMA: the same, each rank's window following its results' ECN
  (the OR of the group's contributions' marks, and the result's own on
  its way down) DCTCP-style, up to WINDOW (src/coll/ina_cc);
- INA + PANAMA, lossless: the same on PANAMA's lossless fabric, PFC on
  the class every flow rides, so no queue drops a packet and the hosts'
  timeout (LOSSLESS_RTO) is only for corruption.
The short flows are the background flows under 100 KB.

Then across racks, the seed's multi-tree set-up: 4 racks of 4 hosts under
4 spines, one 16-rank job (one rank per host) beside the same traffic at
MT_LOAD: ring; HINA (one aggregation tree, under spine0, fixed window);
MTINA (one tree per spine, groups round-robin, fixed window); MTINA with
PANAMA's window.

Last, a shared cluster: 4 racks of 8 hosts under 4 spines (the uplinks
2:1 oversubscribed), two 16-rank jobs (4 ranks in every rack each) whose
trees share the switches and their pools, beside web-search traffic at
SH_LOAD: the same four ways to synchronize.
"""
import csv
import os

import common

NAME = "panama"
# From a light background, where the job's own traffic makes most of the
# marks its windows see, to a heavy one, where the background's do.
LOADS = (0.05, 0.1, 0.3, 0.5, 0.7)
RANKS = 8
ITERATIONS = 2
WINDOW = 1024        # groups in flight per rank at most (1 KiB each)
RTO = "200us"
SHORT_BYTES = 100000
BACKGROUND_MS = 60   # longer than any variant's job here
# PFC on priority 0 at every switch port (and the aggregation processor):
# headroom for one 1 us link's round trip at 100 Gbit/s (25 KB) and two
# MTUs; xon two MTUs under xoff.
PFC = "{priorities: [0], xoff: 60KB, xon: 57KB, headroom: 40KB}"
LOSSLESS_RTO = "5ms"
# PANAMA aggregates only reduce flows above 40 MB (the simulator's default
# with cc panama); the models here are scaled, and so is the threshold.
PANAMA_MIN_BYTES = 40000000
# The seed's hosts scale gradients by a factor they all know; dlcp's agree
# on every group's exponent first, a small all-reduce that here would ride
# the scenario's DCTCP with its 1 ms RTO_min (chosen for the background),
# where the runtime's rides MLT: the INA jobs take the exponents as given
# (docs/simulator.md, "The exponents"), and PANAMA's runs are repeated
# with them agreed, to show what that costs here.
EXPONENTS = "given"
# Seed: large-job training time up to 1.34x shorter; short-flow p99 FCT up
# to 4.5x better (against no aggregation and single-tree aggregation
# without congestion control).
SEED_TIME, SEED_P99 = 1.34, 4.5

INIT_CWND = 20  # DCTCP's initial window, packets
SCENARIO = """# Written by scripts/results/panama.py.
name: panama
seed: 1
topology: {kind: leaf_spine, tors: 1, spines: 1, hosts_per_tor: 16,
           link_rate: 100Gbps, link_delay: 1us}
switch: {queues: 8, port_buffer: 512KB, ecn_threshold: 65pkts}
transport: {kind: dctcp, rto_min: 1ms, init_cwnd: %d}
aggregation: {switch: tor0, memory: 4MiB, block_elems: 64}
stop_at: 10s
""" % INIT_CWND

PER_CHUNK_LABEL = "ring, a connection per chunk"
# The job's size: 2, 4 and 8 ranks at one load, without PFC.
SIZES = (2, 4, RANKS)
SIZE_LOAD = 0.5

MT_RACKS, MT_SPINES, MT_HOSTS = 4, 4, 4
MT_LOAD = 0.5
MT_VARIANTS = (("ring", None, "ring (no aggregation)"),
               ("hina", "none", "one tree (HINA), fixed window"),
               ("mtina", "none", "a tree per spine (MTINA), fixed window"),
               ("mtina", "panama", "a tree per spine + PANAMA"))

SH_RACKS, SH_SPINES, SH_HOSTS, SH_JOBS = 4, 4, 8, 2
SH_LOAD = 0.4

VARIANTS = (("ring", None, False, "ring (no aggregation)"),
            ("ina", "none", False, "INA, fixed window"),
            ("ina", "panama", False, "INA + PANAMA"),
            ("ina", "panama", True, "INA + PANAMA, lossless (PFC)"))


def model(scale):
    sizes, header = common.read_profile("resnet50")
    compute = float(header["forward_us"]) + float(header["backward_us"])
    return 4 * int(sum(sizes) * scale / 4), compute * scale


def one_rack_run(scale, algo, cc, pfc, load, ranks, tag, exponents=EXPONENTS,
                 persistent=True):
    """A run of the one-ToR set-up: |ranks| ranks (h0...) synchronizing
    by |algo| / |cc| beside web-search traffic at |load|, a DCTCP
    connection per pair of ranks if |persistent|, else per transfer; its
    id and its "load" parameter are |tag|."""
    b, compute = model(scale)
    fields = ["algo: %s" % algo, "bytes: %d" % b,
              "iterations: %d" % ITERATIONS,
              "compute_time: %.3fus" % compute,
              "hosts: [%s]" % ", ".join("h%d" % h for h in range(ranks))]
    if cc:
        fields += ["window: %d" % WINDOW,
                   "rto: %s" % (LOSSLESS_RTO if pfc else RTO),
                   "cc: %s" % cc, "exponents: %s" % exponents,
                   "min_bytes: %d" % int(PANAMA_MIN_BYTES * scale)]
    bg = ("{distribution: websearch, load: %g, start: 0us, "
          "duration: %dms}" % (load, BACKGROUND_MS))
    sets = ["workload.collective={%s}" % ", ".join(fields),
            "workload.background=" + bg]
    if pfc:
        sets.append("switch.pfc=" + PFC)
    if not persistent:
        sets.append("transport.persistent=false")
    return {"id": "%s-%s%s-%s" % (algo, cc or "dctcp",
                                  "-pfc" if pfc else "", tag),
            "set": sets,
            "params": {"algo": algo, "cc": cc or "",
                       "pfc": "1" if pfc else "", "load": tag}}


def runs(scale):
    out = [one_rack_run(scale, algo, cc, pfc, load, RANKS, "%g" % load)
           for load in LOADS for algo, cc, pfc, _ in VARIANTS]
    # The job's size at one load (its 8 ranks are the table above's).
    out += [one_rack_run(scale, algo, cc, pfc, SIZE_LOAD, n, "n%d" % n)
            for n in SIZES if n != RANKS
            for algo, cc, pfc, _ in VARIANTS if not pfc]
    # The ring with a connection per transfer (chunk), as the simulator's
    # DCTCP ran every collective until 2026-12-02.
    out += [one_rack_run(scale, "ring", None, False, load, RANKS,
                         "per-chunk-%g" % load, persistent=False)
            for load in LOADS]
    # PANAMA with the exponents agreed through the network, as dlcp's
    # runtime, over this scenario's DCTCP.
    out += [one_rack_run(scale, "ina", "panama", False, load, RANKS,
                         "agreed-%g" % load, exponents="agreed")
            for load in LOADS]
    return out


def spine_tree(spine, racks):
    return "[%s]" % ", ".join("[tor%d, spine%d]" % (t, spine)
                              for t in range(racks))


def tree_runs(scale, tag, racks, spines, hosts_per_tor, jobs, load):
    """The variants of MT_VARIANTS on a leaf-spine of |racks| x
    |hosts_per_tor| hosts under |spines| spines: |jobs| jobs, each with
    hosts_per_tor / jobs ranks in every rack, on trees under every spine
    (one for HINA), beside web-search traffic at |load|.  Run ids start
    with |tag|, which is also their "load" parameter."""
    b, compute = model(scale)
    per_job = hosts_per_tor // jobs
    out = []
    for algo, cc, _ in MT_VARIANTS:
        specs = []
        for j in range(jobs):
            hosts = ["h%d" % (t * hosts_per_tor + j * per_job + k)
                     for t in range(racks) for k in range(per_job)]
            fields = ["algo: %s" % algo, "bytes: %d" % b,
                      "iterations: %d" % ITERATIONS,
                      "compute_time: %.3fus" % compute,
                      "hosts: [%s]" % ", ".join(hosts)]
            if cc:
                fields += ["window: %d" % WINDOW, "gpus_per_host: 1",
                           "cc: %s" % cc, "exponents: %s" % EXPONENTS]
            specs.append("{%s}" % ", ".join(fields))
        sets = ["topology={kind: leaf_spine, tors: %d, spines: %d, "
                "hosts_per_tor: %d, link_rate: 100Gbps, link_delay: 1us}" % (
                    racks, spines, hosts_per_tor)]
        if cc:
            trees = ("tree: " + spine_tree(0, racks) if algo == "hina"
                     else "trees: [%s]" % ", ".join(
                         spine_tree(sp, racks) for sp in range(spines)))
            # Two windows of groups of two jobs at most.
            sets.append("aggregation={%s, memory: 4MiB, block_elems: 64}"
                        % trees)
        bg = ("{distribution: websearch, load: %g, start: 0us, "
              "duration: %dms}" % (load, BACKGROUND_MS))
        sets += ["workload.collective=[%s]" % ", ".join(specs),
                 "workload.background=" + bg]
        out.append({"id": "%s-%s-%s" % (tag, algo, cc or "dctcp"),
                    "set": sets,
                    "params": {"algo": algo, "cc": cc or "", "pfc": "",
                               "load": tag}})
    return out


def find(rows, algo, cc, load, pfc=False):
    """The run of |algo| / |cc| at |load| (a number, or a run tag)."""
    want = load if isinstance(load, str) else "%g" % load
    for r in rows:
        if ((r["algo"], r["cc"], r["load"], r.get("pfc", "")) ==
                (algo, cc or "", want, "1" if pfc else "")):
            return r
    return None


def short_flows(build, run_id):
    """(mean, p99) FCT in us of the background flows under SHORT_BYTES."""
    path = os.path.join(build, "results", NAME, "runs", run_id, "flows.csv")
    try:
        with open(path) as f:
            fct = [float(r["fct_us"]) for r in csv.DictReader(f)
                   if r["group"] == "background" and
                   int(r["size_bytes"]) < SHORT_BYTES and
                   r["fct_us"] != ""]
    except (OSError, ValueError):
        return float("nan"), float("nan")
    if not fct:
        return float("nan"), float("nan")
    return sum(fct) / len(fct), common.percentile(fct, 0.99)


def collective_flows(build, run_id):
    """The rows of run |run_id|'s flows.csv that belong to the collective
    (the ring's DCTCP flows); None if the file cannot be read."""
    path = os.path.join(build, "results", NAME, "runs", run_id, "flows.csv")
    try:
        with open(path) as f:
            return [r for r in csv.DictReader(f)
                    if r["group"] == "collective"]
    except OSError:
        return None


def ring_marked_share(build, run_id):
    """The share of the ring's DCTCP packets whose ACK echoed a CE mark."""
    rows = collective_flows(build, run_id)
    if rows is None:
        return float("nan")
    sent = sum(int(r["pkts_sent"]) for r in rows)
    return (sum(int(r["ecn_echoes"]) for r in rows) / sent if sent
            else float("nan"))


def iteration_ms(r, job=0):
    if (r is None or r["status"] != "ok" or
            r.get("coll%d.done" % job) != "True"):
        return float("nan")
    return common.num(r, "coll%d.iteration_mean_us" % job) / 1e3


def report(rows, scale, build):
    b, compute = model(scale)
    md = ["## PANAMA: aggregation beside short flows (PANAMA seed)", "",
          "Command: `scripts/results/run.py --only panama`.  One ToR, 16 "
          "hosts at 100 Gbit/s, 1 us links, 512 KB ports marking ECN at 65 "
          "packets; the ToR runs the aggregation core.  A job of %d ranks "
          "(h0-h%d) all-reduces ResNet50's gradient x %g (%.1f MB, %.2f ms "
          "of compute per iteration), %d iterations, while web-search "
          "flows run between all 16 hosts for %d ms at the load shown.  "
          "INA: 1 KiB of gradient a datagram, at most %d groups in flight "
          "per rank, RTO %s; only all-reduces above PANAMA's 40 MB x %g "
          "(%.1f MB) use the switch, which this job's does.  Short flows: "
          "background flows under %d KB.  The INA ranks take the groups' "
          "exponents as given, as the seed's hosts their scaling factor "
          "(dlcp's agreement on them: below the table)." % (
              RANKS, RANKS - 1, scale, b / 1e6, compute / 1e3, ITERATIONS,
              BACKGROUND_MS, WINDOW, RTO, scale,
              PANAMA_MIN_BYTES * scale / 1e6, SHORT_BYTES // 1000), ""]
    head = ["load", "synchronization", "job iteration (ms)",
            "short flows mean (us)", "short flows p99 (us)"]
    body = []
    table = {}
    for load in LOADS:
        for algo, cc, pfc, label in VARIANTS:
            r = find(rows, algo, cc, load, pfc)
            it = iteration_ms(r)
            mean, p99 = short_flows(build, r["id"]) if r else (
                float("nan"), float("nan"))
            table[(load, label)] = (it, mean, p99)
            body.append(["%g" % load, label, "%.2f" % it, "%.0f" % mean,
                         "%.0f" % p99])
    md += [common.table(head, body), ""]
    ratios = []
    for load in LOADS:
        ring, fixed, pan, lossless = (table[(load, v[3])] for v in VARIANTS)
        ratios.append("load %g: job time ring / PANAMA %.2fx, fixed window "
                      "/ PANAMA %.2fx; short-flow p99 fixed window / PANAMA "
                      "%.2fx, ring / PANAMA %.2fx; lossless PANAMA: job "
                      "time ring / it %.2fx, short-flow p99 ring / it "
                      "%.2fx" % (
                          load, ring[0] / pan[0], fixed[0] / pan[0],
                          fixed[2] / pan[2], ring[2] / pan[2],
                          ring[0] / lossless[0], ring[2] / lossless[2]))
    md += ["Seed: the large job's training time up to %.2fx shorter and "
           "the short flows' p99 up to %.1fx better.  Here: %s." % (
               SEED_TIME, SEED_P99, "; ".join(ratios)), ""]
    agreed = []
    for load in LOADS:
        r = find(rows, "ina", "panama", "agreed-%g" % load)
        agreed.append("%g: %.2f ms against %.2f (the agreement %.2f ms "
                      "of a %.2f ms all-reduce)" % (
                          load, iteration_ms(r),
                          table[(load, VARIANTS[2][3])][0],
                          common.num(r, "coll0.agree_mean_us") / 1e3
                          if r else float("nan"),
                          common.num(r, "coll0.collective_mean_us") / 1e3
                          if r else float("nan")))
    md += ["**The exponents agreed.**  dlcp's ranks agree on every "
           "group's exponent before an all-reduce goes to the switch (an "
           "all-reduce MAX of an int32 per group; docs/ina.md).  Run here "
           "over the scenario's DCTCP, whose 1 ms RTO_min its small flows "
           "meet when the background's queues drop a packet, it takes INA "
           "+ PANAMA's job iteration, by load, to %s with the exponents "
           "given; dlcp's runtime runs it over MLT.  The table takes the "
           "exponents as given." %
           "; ".join(agreed), ""]
    per_chunk = {ld: iteration_ms(find(rows, "ring", None,
                                       "per-chunk-%g" % ld))
                 for ld in LOADS}
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for _, _, _, label in VARIANTS:
        axes[0].plot(LOADS, [table[(ld, label)][0] for ld in LOADS],
                     marker="o", label=label)
        axes[1].plot(LOADS, [table[(ld, label)][2] for ld in LOADS],
                     marker="o", label=label)
    axes[0].plot(LOADS, [per_chunk[ld] for ld in LOADS], marker="o",
                 linestyle="--", label=PER_CHUNK_LABEL)
    axes[0].set_xlabel("background load")
    axes[0].set_ylabel("job iteration (ms)")
    axes[0].set_yscale("log")
    axes[1].set_xlabel("background load")
    axes[1].set_ylabel("short-flow p99 FCT (us)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![PANAMA](results/%s.png)" % NAME, ""]
    md += size_report(rows, scale)
    md += connections_report(build, table, per_chunk)
    md += ["### Across racks: a tree per spine", "",
           "%d racks of %d hosts under %d spines (100 Gbit/s, 1 us links); "
           "one job of %d ranks, one per host, the same gradient and "
           "compute; web-search traffic between all hosts at load %g.  "
           "With PANAMA every rank keeps a window per tree (the seed runs "
           "its congestion control per tree; the groups take the trees in "
           "turn)." % (
               MT_RACKS, MT_HOSTS, MT_SPINES, MT_RACKS * MT_HOSTS, MT_LOAD),
           ""]
    body = []
    mt = {}
    for algo, cc, label in MT_VARIANTS:
        r = find(rows, algo, cc, "mt")
        it = iteration_ms(r)
        mean, p99 = short_flows(build, r["id"]) if r else (
            float("nan"), float("nan"))
        mt[label] = (it, p99)
        body.append([label, "%.2f" % it, "%.0f" % mean, "%.0f" % p99])
    md += [common.table(["synchronization", "job iteration (ms)",
                         "short flows mean (us)", "short flows p99 (us)"],
                        body), ""]
    labels = [v[2] for v in MT_VARIANTS]
    md += ["Ratios (lower is better): a tree per spine over one tree, job "
           "time x%.2f and short-flow p99 x%.2f; PANAMA's window over the "
           "fixed one on the same trees, job time x%.2f and short-flow p99 "
           "x%.2f." % (
               mt[labels[2]][0] / mt[labels[1]][0],
               mt[labels[2]][1] / mt[labels[1]][1],
               mt[labels[3]][0] / mt[labels[2]][0],
               mt[labels[3]][1] / mt[labels[2]][1]), ""]
    md += shared_report(rows, build)
    marks, ring_marks = {}, {}
    for load in LOADS:
        r = find(rows, VARIANTS[2][0], VARIANTS[2][1], load)
        res = common.num(r, "coll0.ina_results") if r else 0.0
        marks[load] = (common.num(r, "coll0.ina_results_marked") / res
                       if res else float("nan"))
        r = find(rows, VARIANTS[0][0], VARIANTS[0][1], load)
        ring_marks[load] = (ring_marked_share(build, r["id"]) if r
                            else float("nan"))
    md += differences(table, marks, ring_marks)
    md += common.unfinished_note(rows)
    return "\n".join(md)


def ring_flows(build, run_id):
    """(flows, packets per flow) of the ring's DCTCP flows in run
    |run_id|."""
    rows = collective_flows(build, run_id)
    if rows is None:
        return 0, float("nan")
    pkts = sum(int(r["pkts_sent"]) for r in rows)
    return len(rows), pkts / len(rows) if rows else float("nan")


def slow_start_rounds(pkts):
    """Round trips of slow start from INIT_CWND that send |pkts|."""
    rounds, sent, cwnd = 0, 0, INIT_CWND
    while sent < pkts:
        sent, cwnd, rounds = sent + cwnd, 2 * cwnd, rounds + 1
    return rounds


def connections_report(build, table, per_chunk):
    """The ring over a DCTCP connection per pair of neighbours (the table's)
    against a connection per chunk (|per_chunk|: job iteration per load),
    beside PANAMA, at every load."""
    ring_label, pan_label = VARIANTS[0][3], VARIANTS[2][3]
    body, lead = [], []
    for load in LOADS:
        ring, pan = table[(load, ring_label)][0], table[(load, pan_label)][0]
        lead.append((load, per_chunk[load] / pan))
        body.append(["%g" % load, "%.2f" % ring, "%.2f" % per_chunk[load],
                     "%.2f" % pan, "%.2fx" % (ring / pan),
                     "%.2fx" % (per_chunk[load] / pan)])
    n_chunk, p_chunk = ring_flows(build, "ring-dctcp-%g" % LOADS[-1])
    ahead = [ld for ld, x in lead if x > 1.0]
    return ["### The ring's connections", "",
            "The ring above keeps one DCTCP connection per pair of "
            "neighbours, as Gloo's ranks keep one TCP connection per pair "
            "(`transport.persistent`, the simulator's default): its "
            "pipelining chunks (%d transfers of %.0f packets each in a run "
            "at load %g) ride it in order under one window, which settles "
            "where DCTCP's marks hold it.  With a connection per chunk "
            "(`transport.persistent: false`, the default until 2026-12-02) "
            "each chunk starts in slow start from an initial window of %d "
            "packets, which sends %.0f packets in %d round trips if no mark "
            "cuts it, so a chunk is mostly sent before its window could "
            "settle, and the chunks a rank has in flight to its neighbour "
            "each hold such a window.  Job iteration in ms:" % (
                n_chunk, p_chunk, LOADS[-1], INIT_CWND, p_chunk,
                slow_start_rounds(p_chunk)), "",
            common.table(["load", ring_label, PER_CHUNK_LABEL, pan_label,
                          "ring / PANAMA", "per chunk / PANAMA"], body), "",
            "Against the ring with a connection per chunk PANAMA is ahead "
            "at load %s (of %s): under background traffic every new "
            "connection's initial window takes a share that a window in "
            "DCTCP's equilibrium would not, and the more background, the "
            "more that share is worth." % (
                ", ".join("%g" % ld for ld in ahead) or "none",
                ", ".join("%g" % ld for ld, _ in lead)), ""]


def size_report(rows, scale):
    """The job's size at SIZE_LOAD: PANAMA against the ring and the fixed
    window with 2, 4 and 8 ranks."""
    md = ["### The job's size", "",
          "The one-ToR set-up at load %g with the job on h0 to h(n-1), "
          "without PFC (the table above's %d-rank runs for n = %d); job "
          "iteration in ms, %.2f ms of it compute." % (
              SIZE_LOAD, RANKS, RANKS, model(scale)[1] / 1e3), ""]
    body, by_n = [], {}
    for n in SIZES:
        tag = SIZE_LOAD if n == RANKS else "n%d" % n
        its = [iteration_ms(find(rows, algo, cc, tag))
               for algo, cc, pfc, _ in VARIANTS if not pfc]
        by_n[n] = its
        body.append(["%d" % n] + ["%.2f" % x for x in its] +
                    ["%.2fx" % (its[0] / its[2])])
    labels = [v[3] for v in VARIANTS if not v[2]]
    md += [common.table(["ranks"] + labels + ["ring / PANAMA"], body), ""]
    lead = [by_n[n][0] / by_n[n][2] for n in SIZES]
    pairs = list(zip(lead, lead[1:]))
    trend = ("grows" if all(a < b for a, b in pairs) else
             "shrinks" if all(a > b for a, b in pairs) else
             "does not move steadily")
    md += ["PANAMA's lead over the ring %s as the job grows (ring / "
           "PANAMA %s at %s ranks).  Two things pull against each other: "
           "the ring moves 2(n-1)/n of the vector through every host link "
           "(%s at those sizes) where INA moves it once, while a PANAMA "
           "group's result waits for the last of the n contributions, "
           "every rank's window following its own links' marks, so the "
           "more ranks, the more often some rank's window or queue holds "
           "every other rank's groups back.  The fixed window keeps up to "
           "%d groups in flight per rank and was faster than PANAMA's at "
           "%d of %d sizes." % (
               trend, " / ".join("%.2fx" % x for x in lead),
               " / ".join("%d" % n for n in SIZES),
               " / ".join("%.2f" % (2.0 * (n - 1) / n) for n in SIZES),
               WINDOW,
               sum(1 for n in SIZES if by_n[n][1] < by_n[n][2]),
               len(SIZES)), ""]
    return md


def shared_report(rows, build):
    md = ["### A shared cluster: two jobs, oversubscribed uplinks", "",
          "%d racks of %d hosts under %d spines (100 Gbit/s, 1 us links: "
          "the uplinks %d:1 oversubscribed); %d jobs of %d ranks, %d in "
          "every rack each, the same gradient and compute, their trees "
          "sharing every switch and its pool; web-search traffic between "
          "all hosts at load %g.  Job iteration: the mean of the jobs' "
          "means." % (SH_RACKS, SH_HOSTS, SH_SPINES, SH_HOSTS // SH_SPINES,
                      SH_JOBS, SH_RACKS * SH_HOSTS // SH_JOBS,
                      SH_HOSTS // SH_JOBS, SH_LOAD), ""]
    body = []
    sh = {}
    for algo, cc, label in MT_VARIANTS:
        r = find(rows, algo, cc, "sh")
        its = [iteration_ms(r, j) for j in range(SH_JOBS)]
        it = sum(its) / len(its)
        mean, p99 = short_flows(build, r["id"]) if r else (
            float("nan"), float("nan"))
        sh[label] = (it, p99)
        body.append([label, "%.2f" % it,
                     " / ".join("%.2f" % x for x in its),
                     "%.0f" % mean, "%.0f" % p99])
    md += [common.table(["synchronization", "job iteration (ms)",
                         "per job (ms)", "short flows mean (us)",
                         "short flows p99 (us)"], body), ""]
    labels = [v[2] for v in MT_VARIANTS]
    ring, hina, mtina, pan = (sh[x] for x in labels)
    md += ["Ratios: job time ring / PANAMA %.2fx, one tree (fixed window) "
           "/ PANAMA %.2fx, a tree per spine (fixed window) / PANAMA %.2fx; "
           "short-flow p99 ring / PANAMA %.2fx, one tree / PANAMA %.2fx, "
           "a tree per spine / PANAMA %.2fx (the seed: up to %.2fx and "
           "%.1fx)." % (ring[0] / pan[0], hina[0] / pan[0],
                        mtina[0] / pan[0], ring[1] / pan[1],
                        hina[1] / pan[1], mtina[1] / pan[1], SEED_TIME,
                        SEED_P99), ""]
    marks = {label: marked(find(rows, algo, cc, "sh"))
             for algo, cc, label in MT_VARIANTS if cc}
    ranks = SH_RACKS * SH_HOSTS // SH_JOBS
    md += ["Read together: with one tree every job's partial sums and "
           "finals share spine0's links, and the short flows crossing them "
           "wait behind it (p99 x%.2f a tree per spine's); trees under "
           "every spine spread that load, which is the seed's short-flow "
           "gain, while the job time moves x%.2f.  PANAMA's window on the "
           "same trees changes the short flows' p99 x%.2f and the job time "
           "x%.2f.  A group's result carries the OR of the marks of every "
           "link its %d contributions and its final crossed: %.0f %% of "
           "the results were marked with one tree, %.0f %% with a tree per "
           "spine and a fixed window (the job's own queues), %.0f %% with "
           "PANAMA's window, which was cut %.0f times per rank in %.0f "
           "results, once every %.1f: a DCTCP window in equilibrium near "
           "2 / (marked fraction) groups, against the fixed window's %d." % (
               hina[1] / mtina[1], mtina[0] / hina[0], pan[1] / mtina[1],
               pan[0] / mtina[0], ranks,
               100 * marks[labels[1]][0], 100 * marks[labels[2]][0],
               100 * marks[labels[3]][0],
               marks[labels[3]][1] / (SH_RACKS * SH_HOSTS),
               marks[labels[3]][2] / (SH_RACKS * SH_HOSTS),
               marks[labels[3]][2] / max(1.0, marks[labels[3]][1]),
               WINDOW), ""]
    return md


def marked(r):
    """(marked fraction of results, window cuts, results) over the jobs of
    run |r|."""
    def total(key):
        return sum(common.num(r, "coll%d.%s" % (j, key)) if r
                   else float("nan") for j in range(SH_JOBS))
    res = total("ina_results")
    return (total("ina_results_marked") / res if res else float("nan"),
            total("ina_cwnd_cuts"), res)


def marked_as_often(marks, ring_marks, behind):
    """How the ring's marked share compares with PANAMA's where PANAMA is
    behind (the loads |behind|), so that the OR is or is not a suspect."""
    if not behind:
        return ""
    if all(ring_marks[ld] >= marks[ld] for ld in behind):
        return (" as often or more where PANAMA is behind, so the OR is "
                "not what puts it there")
    return " less often where PANAMA is behind"


def differences(table, marks, ring_marks):
    """Why the figures differ from the seed's, with the directions read
    from |table|, the marked share of PANAMA's results per load from
    |marks| and that of the ring's packets from |ring_marks|."""
    ring = [table[(ld, VARIANTS[0][3])] for ld in LOADS]
    fixed = [table[(ld, VARIANTS[1][3])] for ld in LOADS]
    pan = [table[(ld, VARIANTS[2][3])] for ld in LOADS]
    slower = sum(1 for f, p in zip(fixed, pan) if p[0] > f[0])
    faster = ["%g (%.2fx)" % (ld, r[0] / p[0])
              for ld, r, p in zip(LOADS, ring, pan) if p[0] < r[0]]
    behind = [ld for ld, r, p in zip(LOADS, ring, pan) if p[0] >= r[0]]
    direction = (
        "Against the ring, PANAMA's job time is shorter at background "
        "load %s, the seed's direction (up to %.2fx), and not at %s.  The "
        "share of PANAMA's results that carry a mark (the OR over a "
        "group's %d contributions and its result's way back) grows with "
        "the background: %s; a DCTCP window cut once a window by half "
        "the marked share settles near 2 / (marked share) groups, so a "
        "heavier background, whose queues the job's cuts cannot drain, "
        "holds the job's windows lower.  The ring's DCTCP packets were "
        "marked%s (%s), and its windows too sit near 2 / (marked share) "
        "packets.  But a ring connection's window is paced by its own "
        "path's round trip, while a group's result comes when the "
        "slowest of the %d contributions does, each rank's window cut "
        "by its own link's marks: the same bytes in flight per rank move "
        "at the pace of the job's most congested link." % (
            ", ".join(faster) or "none", SEED_TIME,
            ", ".join("%g" % ld for ld in behind) or "none", RANKS,
            ", ".join("%.1f %% at %g" % (100 * marks[ld], ld)
                      for ld in LOADS),
            marked_as_often(marks, ring_marks, behind),
            ", ".join("%.1f %% at %g" % (100 * ring_marks[ld], ld)
                      for ld in LOADS), RANKS))
    return [direction, "",
        "How this differs from the seed, and why: the seed attributes its "
        "gain in training time to spreading a job's aggregation over "
        "several trees (one per spine) and its short-flow gain to the "
        "window keeping the aggregation traffic out of the queues the "
        "short flows share; it does not give its set-up in enough detail "
        "to rebuild it, so both set-ups here are this experiment's choice.  "
        "Without congestion control the job's ranks keep up to %d KiB in "
        "flight each and take the links first; with it every rank's "
        "window yields to the background traffic on its own links, and a "
        "group completes at the pace of its slowest rank, so the job "
        "moves at the pace of the most congested of its 16 host links: "
        "its iterations are slower than with the fixed window at %d of %d "
        "loads.  (A variant where every rank echoed its marks to the "
        "switch, which ORed them into every rank's next result so that "
        "all windows moved in step, was 2-3x slower still for the same "
        "short-flow tail, and was dropped.)  The ring moves 2(n-1)/n of "
        "the vector through every link against INA's one, over DCTCP." % (
            WINDOW, slower, len(LOADS)), ""]


def main(build, jobs, full):
    # INA datagrams carry the real vector: at most 1/16 of ResNet50 here.
    def capped(scale):
        return min(scale, 1.0 / 16)
    return common.experiment(
        NAME, build, jobs, full,
        lambda s: (runs(capped(s)) +
                   tree_runs(capped(s), "mt", MT_RACKS, MT_SPINES, MT_HOSTS,
                             1, MT_LOAD) +
                   tree_runs(capped(s), "sh", SH_RACKS, SH_SPINES, SH_HOSTS,
                             SH_JOBS, SH_LOAD)),
        lambda rows, s, b: report(rows, capped(s), b),
        scenario_text=SCENARIO)
