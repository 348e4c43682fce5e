"""RA-INA/CINA seed, chapter 3: in-network aggregation at one switch.

(a) Three jobs share one ToR's aggregator pool: the mean job completion
    time (JCT) of RA-INA (shared pool, busy groups by ring) against
    SwitchML-style static partitioning (plain INA in a third of the pool
    each, the window sized to the partition, as SwitchML sizes its slots)
    and against ring all-reduce, over a sweep of the switch's memory; plain
    INA on the shared pool (first come, first served, busy groups wait,
    the window kept inside the share a BUSY names) is shown too.
(b) One job of 4 ranks: busbw of INA and RA-INA against ring and PS.
The switch runs src/proto/agg, the hosts src/coll/ina (docs/ina.md); the
ring and PS baselines run src/coll over DCTCP.  Models: VGG19 and ResNet50
(the seed's chapter-4 models; chapter 3 names none), their gradient bytes
and compute times from workloads/profiles, scaled by 1/16 (also with
--full: see main).
"""

import common

NAME = "ina"
MEMORY_KIB = (16, 64, 256, 1024)
JOBS = (("vgg19", (0, 1, 2, 3)), ("resnet50", (4, 5, 6, 7)),
        ("resnet50", (8, 9, 10, 11)))
ITERATIONS = 3
WINDOW = 64          # src/coll/ina's default window (groups per rank)
BLOCK_ELEMS = 64     # the seed's 64-element blocks
RTO = "50us"         # about 10 RTTs of this network
SINGLE_ALGOS = ("ring", "ps", "ina", "ra_ina")
# The three jobs again on 10 Gbps links, where communication outweighs
# compute as it does on the seed's testbeds; RA-INA, SwitchML-style, plain
# INA and ring only, the hosts' RTO scaled with the serialization times.
SLOW_RATE, SLOW_RTO = "10Gbps", "500us"
SLOW_LABEL = "10 Gbps"
MAX_SCALE = 1.0 / 16
# dlcp's software switch: bench-agg_switch core handled 7.4-8.9 M datagrams
# per second on one core at 1 KiB (docs/ina.md, "Measurements"), about
# 120 ns each: the single job is also run with that cost per packet.
SOFTWARE_PER_PACKET = "120ns"
# Its hosts' RTO must exceed the switch's queueing delay (up to 1024
# packets x 120 ns), or re-sends of packets still queued swamp it.
SOFTWARE_RTO = "500us"
# Seed: RA-INA's mean JCT 25.4 % below SwitchML's and 18.1 % below ring's;
# single job +57 % throughput over ring and 2.0x over PS.
SEED_VS_STATIC, SEED_VS_RING = -25.4, -18.1
SEED_OVER_RING, SEED_OVER_PS = 57.0, 2.0

SCENARIO = """# Written by scripts/results/ina.py.
name: ina
seed: 1
topology: {kind: leaf_spine, tors: 1, spines: 1, hosts_per_tor: 12,
           link_rate: 100Gbps, link_delay: 1us}
switch: {queues: 8, port_buffer: 512KB, ecn_threshold: 65pkts}
transport: {kind: dctcp, rto_min: 1ms, init_cwnd: 20}
aggregation: {switch: tor0, memory: 1MiB, block_elems: %d}
stop_at: 60s
""" % BLOCK_ELEMS

# (algo, pool policy, label)
MULTI = (("ra_ina", "shared", "RA-INA"), ("ina", "static", "SwitchML-style"),
         ("ina", "shared", "INA, shared FCFS"), ("ring", "shared", "ring"),
         ("ra_ina", "auto", "RA-INA, auto claims"),
         ("ra_ina", "claims", "RA-INA, always claims"))


def model(name, scale):
    """(gradient bytes, compute time per iteration in us) of a profile."""
    sizes, header = common.read_profile(name)
    compute = float(header["forward_us"]) + float(header["backward_us"])
    return 4 * int(sum(sizes) * scale / 4), compute * scale


def job(algo, name, hosts, scale, window, rto=RTO, claim=False):
    b, compute = model(name, scale)
    fields = ["algo: %s" % algo, "bytes: %d" % b,
              "iterations: %d" % ITERATIONS,
              "compute_time: %.3fus" % compute,
              "hosts: [%s]" % ", ".join("h%d" % h for h in hosts)]
    if algo in ("ina", "ra_ina"):
        fields += ["rto: %s" % rto, "window: %d" % window]
    if claim:
        fields.append("claim: %s" % claim)
    return "{" + ", ".join(fields) + "}"


def static_window(kib):
    """SwitchML's slots: the job's third of the pool, in groups of 4."""
    aggs = kib * 1024 // (4 * BLOCK_ELEMS)
    return max(1, aggs // len(JOBS) // 4)


def multi_runs(scale, configs, rate=None, rto=RTO):
    """The three jobs with each of |configs| at every memory size, on the
    scenario's links or on |rate| ones (then "part" is "multi-RATE")."""
    out = []
    part = "multi" if rate is None else "multi-" + rate
    for algo, policy, label in configs:
        for kib in MEMORY_KIB if algo != "ring" else MEMORY_KIB[:1]:
            window = static_window(kib) if policy == "static" else WINDOW
            claim = {"claims": "always", "auto": "auto"}.get(policy)
            jobs = [job(algo, m, h, scale, window, rto=rto, claim=claim)
                    for m, h in JOBS]
            sets = ["aggregation.memory=%dKiB" % kib,
                    "aggregation.policy=" +
                    ("shared" if claim else policy),
                    "workload.collective=[%s]" % ", ".join(jobs)]
            if policy == "static":
                sets.append("aggregation.static_parts=%d" % len(JOBS))
            if rate is not None:
                sets.append("topology.link_rate=" + rate)
            out.append({"id": "%s-%s-%s-%d" % (part, algo, policy, kib),
                        "set": sets,
                        "params": {"part": part, "algo": algo,
                                   "policy": policy, "memory_kib": kib}})
    return out


def runs(scale):
    out = multi_runs(scale, MULTI)
    out += multi_runs(scale, MULTI[:4], SLOW_RATE, SLOW_RTO)
    for algo in SINGLE_ALGOS:
        variants = [("shared", [], RTO)]
        if algo in ("ina", "ra_ina"):
            variants.append(("software", ["aggregation.per_packet=" +
                                          SOFTWARE_PER_PACKET], SOFTWARE_RTO))
        for switch, extra, rto in variants:
            out.append({"id": "single-%s-%s" % (algo, switch),
                        "set": ["workload.collective=[%s]" % job(
                            algo, "resnet50", (0, 1, 2, 3), scale,
                            WINDOW, rto)] + extra,
                        "params": {"part": "single", "algo": algo,
                                   "policy": switch, "memory_kib": 1024}})
    return out


def find(rows, part, algo, policy, kib):
    for r in rows:
        if (r["part"], r["algo"], r["policy"]) == (part, algo, policy) and \
                (algo == "ring" or r["memory_kib"] == str(kib)):
            return r
    return None


def mean_jct_ms(r):
    """Mean over the jobs of their completion time (every iteration's
    duration summed), NaN unless every job is done."""
    if r is None or r["status"] != "ok":
        return float("nan")
    jcts = []
    for j in range(len(JOBS)):
        if r.get("coll%d.done" % j) != "True":
            return float("nan")
        jcts.append(common.num(r, "coll%d.iteration_mean_us" % j) *
                    ITERATIONS / 1e3)
    return sum(jcts) / len(jcts)


def mean_allreduce_ms(r):
    """Mean over jobs and iterations of the slowest rank's all-reduce: the
    communication alone, without the compute between iterations."""
    if r is None or r["status"] != "ok":
        return float("nan")
    return sum(common.num(r, "coll%d.collective_mean_us" % j)
               for j in range(len(JOBS))) / len(JOBS) / 1e3


def ring_share(r):
    """RA-INA: the fraction of groups given a ring verdict, all jobs."""
    ina = sum(common.num(r, "coll%d.ina_groups" % j) for j in range(3))
    ring = sum(common.num(r, "coll%d.ring_groups" % j) for j in range(3))
    return ring / (ina + ring) if ina + ring else float("nan")


def differences(rows):
    """Why the figures differ from the seed's; the directions quoted are
    read from |rows|."""
    small = MEMORY_KIB[0]
    ra = mean_jct_ms(find(rows, "multi", "ra_ina", "shared", small))
    ring = mean_jct_ms(find(rows, "multi", "ring", "shared", 0))
    ring_ar = mean_allreduce_ms(find(rows, "multi", "ring", "shared", 0))
    cl = [mean_allreduce_ms(find(rows, "multi", "ra_ina", "claims", k))
          for k in MEMORY_KIB]
    plain = [mean_allreduce_ms(find(rows, "multi", "ra_ina", "shared", k))
             for k in MEMORY_KIB]
    auto = [mean_allreduce_ms(find(rows, "multi", "ra_ina", "auto", k))
            for k in MEMORY_KIB]
    return [
        "How this differs from the seed, and why the numbers do: the "
        "seed's chapter 3 gives no set-up (models, workers, link rate, "
        "switch memory), so the one above is this experiment's choice, and "
        "the memory is swept instead of fixed.  dlcp's switch is not on "
        "the ring's path, so an RA-INA group decides at its first packet, "
        "which carries the payload: every rank uploads its share of a "
        "group that then gets a ring verdict, and sends it again in the "
        "ring (docs/ina.md, \"The simulator\"); RA-INA keeps that rare "
        "by sending no more groups than the pool may hold for it (below).  "
        "At %d KiB its mean JCT is %s ring's (%+.1f %%): the whole pool "
        "holds 16 KiB, less than one round trip of a 100 Gbps link, so a "
        "job that has it all still moves less per round trip than the "
        "ring.  The SwitchML-style "
        "baseline sizes each job's "
        "window to its partition, as SwitchML sizes its slots.  Plain INA "
        "on the shared pool (\"INA shared FCFS\", window 64) learns its "
        "share of the pool (the pool over the jobs sharing it: those "
        "holding aggregators or heard from in the last millisecond) from "
        "the switch's first BUSY answer in every all-reduce, sends back the "
        "groups it had out beyond it and keeps its window between half "
        "the share and all of it (docs/ina.md, \"The hosts' window in "
        "the pool\").  JCT includes each model's compute time (scaled with its "
        "bytes), which dominates at 100 Gbps and dilutes every difference; "
        "the second table shows the all-reduces alone.  A software switch "
        "would add a per-packet cost (aggregation.per_packet), which this "
        "run leaves at 0." % (small, "above" if ra > ring else "below",
                             100 * (ra / ring - 1)),
        "",
        "RA-INA's default (the RA-INA column) sends every group's payload "
        "at once (`claim: never`) and keeps the groups it has out within "
        "the most aggregators the switch's results have said it may hold "
        "(their cap: those it holds and its share of the free ones; "
        "docs/ina.md), "
        "so that only groups that other jobs' aggregators crowd out go to "
        "the ring.  Header-only claims send a group's header first and its "
        "payload only once the switch grants aggregators, so a ring group "
        "is never uploaded; a window of claims runs ahead of the window of "
        "contributions, beyond what the pool holds.  Always claiming "
        "(`claim: always`, last columns) gives %s against ring at %s KiB "
        "(the default: %s), and `claim: auto`, which claims while most "
        "recent verdicts are RING, %s; the default is at most %.1f %% "
        "slower than the better of the two at any size." % (
            " / ".join("%+.1f %%" % (100 * (c / ring_ar - 1)) for c in cl),
            " / ".join(str(k) for k in MEMORY_KIB),
            " / ".join("%+.1f %%" % (100 * (p / ring_ar - 1)) for p in plain),
            " / ".join("%+.1f %%" % (100 * (a / ring_ar - 1)) for a in auto),
            max(100 * (p / min(c, a) - 1)
                for a, c, p in zip(auto, cl, plain))),
        "",
        "Single job: with equal links every rank sends and receives S "
        "through the switch against 2(n-1)/n x S in a ring, so INA's busbw "
        "can exceed ring's by at most 2(n-1)/n = 1.5x for n = 4; the "
        "seed's +57 % needs more ranks or a ring slower than its links.  "
        "PS here is src/coll's sharded PS co-located on the ranks.", ""]


def slow_report(rows):
    """The three jobs on SLOW_RATE links: JCT and all-reduce time."""
    part = "multi-" + SLOW_RATE
    ring_run = find(rows, part, "ring", "shared", 0)
    ring, ring_ar = mean_jct_ms(ring_run), mean_allreduce_ms(ring_run)
    head = ["switch memory", "RA-INA", "SwitchML-style", "INA shared FCFS",
            "ring", "RA-INA vs SwitchML", "RA-INA vs ring",
            "all-reduce: RA-INA vs SwitchML", "all-reduce: RA-INA vs ring"]
    body, static, vs_static, vs_ring = [], [], [], []
    for kib in MEMORY_KIB:
        runs3 = [find(rows, part, a, p, kib) for a, p, _ in MULTI[:3]]
        ra, st, fc = (mean_jct_ms(r) for r in runs3)
        ra_ar, st_ar = (mean_allreduce_ms(r) for r in runs3[:2])
        static.append(st)
        vs_static.append(100 * (ra / st - 1))
        vs_ring.append(100 * (ra / ring - 1))
        body.append(["%d KiB" % kib, "%.2f" % ra, "%.2f" % st, "%.2f" % fc,
                     "%.2f" % ring, common.pct(100 * (ra / st - 1)),
                     common.pct(100 * (ra / ring - 1)),
                     common.pct(100 * (ra_ar / st_ar - 1)),
                     common.pct(100 * (ra_ar / ring_ar - 1))])
    sizes = " / ".join("%d" % k for k in MEMORY_KIB)
    return ["### The same three jobs on %s links: mean JCT (ms)" % SLOW_LABEL,
            "",
            "Everything as above but the links (and the hosts' RTO, %s); "
            "the models' compute times are the same, so communication "
            "weighs ten times as much in the JCT." % SLOW_RTO, "",
            common.table(head, body), "",
            "RA-INA against ring: %s at %s KiB (the seed: %+.1f %%).  "
            "Against SwitchML-style: %s.  SwitchML-style's JCT hardly "
            "moves with the memory here (%.2f-%.2f ms): at %s a job's "
            "third of even the smallest pool keeps its links busy, so "
            "static partitions cost nothing, while RA-INA still sends the "
            "groups that find no free aggregators through the slower ring.  "
            "RA-INA's lead over static partitions needs memory scarce "
            "against the links' bandwidth-delay product, as at 100 Gbps "
            "above." % (
                " / ".join(common.pct(x) for x in vs_ring), sizes,
                SEED_VS_RING,
                " / ".join(common.pct(x) for x in vs_static),
                min(static), max(static), SLOW_LABEL), ""]


def report(rows, scale, build):
    models = ", ".join("%s %.1f MB / %.1f ms compute" % (
        (m,) + tuple(x / d for x, d in zip(model(m, scale), (1e6, 1e3))))
        for m in ("vgg19", "resnet50"))
    md = ["## In-network aggregation: RA-INA, SwitchML-style static "
          "partitions, ring (RA-INA/CINA seed, chapter 3)", "",
          "Command: `scripts/results/run.py --only ina`.  One ToR, 12 hosts "
          "at 100 Gbps, 1 us links; the ToR runs the aggregation core "
          "(src/proto/agg, %d-element blocks, no per-packet cost: a "
          "line-rate pipeline as the seed's Tofino); hosts run src/coll/ina "
          "(window %d groups, RTO %s); ring and PS run src/coll over DCTCP. "
          "Three jobs of 4 ranks each (VGG19, ResNet50, ResNet50: %s; x %g "
          "of the real sizes), %d iterations each, all starting together; "
          "JCT = the job's iterations summed." % (
              BLOCK_ELEMS, WINDOW, RTO, models, scale, ITERATIONS), "",
          "### Three jobs, one switch: mean JCT (ms)", ""]
    ring = mean_jct_ms(find(rows, "multi", "ring", "shared", 0))
    head = ["switch memory", "aggregators", "RA-INA", "SwitchML-style "
            "(window)", "INA shared FCFS", "ring", "RA-INA vs SwitchML",
            "RA-INA vs ring", "RA-INA ring groups", "auto claims",
            "always claims"]
    body = []
    for kib in MEMORY_KIB:
        ra = mean_jct_ms(find(rows, "multi", "ra_ina", "shared", kib))
        st = mean_jct_ms(find(rows, "multi", "ina", "static", kib))
        fc = mean_jct_ms(find(rows, "multi", "ina", "shared", kib))
        cl = mean_jct_ms(find(rows, "multi", "ra_ina", "claims", kib))
        nc = mean_jct_ms(find(rows, "multi", "ra_ina", "auto", kib))
        body.append(["%d KiB" % kib, kib * 1024 // (4 * BLOCK_ELEMS),
                     "%.2f" % ra, "%.2f (%d)" % (st, static_window(kib)),
                     "%.2f" % fc, "%.2f" % ring,
                     common.pct(100 * (ra / st - 1)),
                     common.pct(100 * (ra / ring - 1)),
                     "%.0f %%" % (100 * ring_share(
                         find(rows, "multi", "ra_ina", "shared", kib))),
                     "%.2f" % nc, "%.2f" % cl])
    md += [common.table(head, body), "",
           "Seed: RA-INA's mean JCT %+.1f %% against SwitchML and %+.1f %% "
           "against ring." % (SEED_VS_STATIC, SEED_VS_RING), ""]
    md += ["### The same runs, communication only: mean all-reduce time "
           "(ms)", ""]
    head = ["switch memory", "RA-INA", "SwitchML-style", "INA shared FCFS",
            "ring", "RA-INA vs SwitchML", "RA-INA vs ring", "auto claims",
            "auto vs ring", "always claims", "always vs ring"]
    body = []
    ring_ar = mean_allreduce_ms(find(rows, "multi", "ring", "shared", 0))
    for kib in MEMORY_KIB:
        ra, st, fc = (mean_allreduce_ms(find(rows, "multi", a, p, kib))
                      for a, p, _ in MULTI[:3])
        cl = mean_allreduce_ms(find(rows, "multi", "ra_ina", "claims", kib))
        nc = mean_allreduce_ms(find(rows, "multi", "ra_ina", "auto", kib))
        body.append(["%d KiB" % kib, "%.3f" % ra, "%.3f" % st, "%.3f" % fc,
                     "%.3f" % ring_ar, common.pct(100 * (ra / st - 1)),
                     common.pct(100 * (ra / ring_ar - 1)), "%.3f" % nc,
                     common.pct(100 * (nc / ring_ar - 1)), "%.3f" % cl,
                     common.pct(100 * (cl / ring_ar - 1))])
    md += [common.table(head, body), ""]
    md += slow_report(rows)
    md += ["### One job of 4 ranks: busbw", ""]
    head = ["algorithm", "all-reduce (us)", "busbw (Gbit/s)", "vs ring"]
    body = []
    b = model("resnet50", scale)[0]
    bw = {}
    single = [(a, "shared", a) for a in SINGLE_ALGOS] + [
        (a, "software", "%s, software switch (%s per packet, RTO %s)" % (
            a, SOFTWARE_PER_PACKET, SOFTWARE_RTO)) for a in ("ina", "ra_ina")]
    for algo, switch, label in single:
        r = find(rows, "single", algo, switch, 1024)
        t = common.num(r, "coll0.collective_mean_us") if r else float("nan")
        # nccl-tests' convention: busbw = algbw x 2(n-1)/n, n = 4.
        bw[label] = b * 8 / (t * 1e3) * 2 * 3 / 4
        body.append([label, "%.1f" % t, "%.1f" % bw[label],
                     common.pct(100 * (bw[label] / bw["ring"] - 1))])
    md += [common.table(head, body), "",
           "Seed: RA-INA +%.0f %% throughput over ring, %.1fx PS.  Here "
           "INA / ring = %.2f and INA / PS = %.2f with a line-rate switch.  "
           "With the cost dlcp's software switch core measured per "
           "datagram on one core (%s), the switch handles 8 datagrams per "
           "group of 4 x 1 KiB contributions one at a time and becomes the "
           "bottleneck: INA / ring = %.2f." % (
               SEED_OVER_RING, SEED_OVER_PS, bw["ina"] / bw["ring"],
               bw["ina"] / bw["ps"], SOFTWARE_PER_PACKET,
               bw[single[-2][2]] / bw["ring"]), ""]
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for algo, policy, label in MULTI[:3]:
        ax.plot(MEMORY_KIB, [mean_jct_ms(find(rows, "multi", algo, policy,
                                                kib)) for kib in MEMORY_KIB],
                marker="o", label=label)
    ax.axhline(ring, color="gray", linestyle="--", label="ring")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("switch aggregator memory (KiB)")
    ax.set_ylabel("mean JCT (ms)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![INA](results/%s.png)" % NAME, ""]
    md += differences(rows)
    md += common.unfinished_note(rows)
    return "\n".join(md)


def main(build, jobs, full):
    # INA datagrams carry the real vectors (no buffer scaling), which the
    # simulator bounds at 256 MiB per job: VGG19's 575 MB x 4 ranks does
    # not fit, so even --full runs at 1/16.
    def capped(scale):
        return min(scale, MAX_SCALE)
    return common.experiment(
        NAME, build, jobs, full, lambda s: runs(capped(s)),
        lambda rows, s, b: report(rows, capped(s), b),
        scenario_text=SCENARIO)
