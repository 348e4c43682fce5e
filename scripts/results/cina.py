"""RA-INA/CINA seed, chapter 4: CINA's chain of ToR aggregators against
HINA, ring and PS, in the simulator and in the seed's closed forms.

Racks of 4 hosts with 4 GPUs each, 2 to 8 racks on a non-blocking
leaf-spine at 100 Gbit/s.  CINA (algo cina, docs/ina.md) ring-reduces each
host's GPUs to its master in k chunks, sums the masters at every ToR and
passes partial sums along the ToR chain; ring and PS are src/coll's, one
rank per host, over DCTCP.  The gradient is ResNet50's, at 1/16 (also
with --full: INA datagrams carry the real vector, which the simulator
bounds at 256 MiB per job).  Every simulated time is set beside
scripts/dlcp-ina-model's prediction for the same configuration.  HINA
(aggregation at every tier) runs on a three-tier fat-tree; MTINA is the
model's only.
"""
import importlib.machinery
import importlib.util
import math
import os

import common

NAME = "cina"
RACKS = (2, 4, 8)
HOSTS_PER_RACK = 4
GPUS = 4
COARSE_CHUNKS = 16   # the seed's k: a few chunks per gradient
BLOCK_ELEMS = 64
GROUP_BLOCKS = 4     # src/coll/ina's default: 1 KiB per datagram
GROUP_BYTES = 4 * BLOCK_ELEMS * GROUP_BLOCKS
WINDOW = 1024        # groups in flight per master: covers the chain's RTT
LINK_US = 1.0        # every link's one-way delay
INTRA_GBPS = 2400.0  # NVLink-class shared memory between a host's GPUs
MAX_SCALE = 1.0 / 16
AGREE = 15.0         # the agreement the model should reach, in %
# Seed: the largest node count on a three-tier network.
SEED_CINA_NODES, SEED_HINA_NODES = 14338, 3600

SCENARIO = """# Written by scripts/results/cina.py.
name: cina
seed: 1
topology: {kind: leaf_spine, tors: 2, spines: %d, hosts_per_tor: %d,
           link_rate: 100Gbps, link_delay: %gus}
switch: {queues: 8, port_buffer: 512KB, ecn_threshold: 65pkts}
transport: {kind: dctcp, rto_min: 1ms, init_cwnd: 20}
aggregation: {chain: [tor0, tor1], memory: 4MiB, block_elems: %d}
stop_at: 10s
""" % (HOSTS_PER_RACK, HOSTS_PER_RACK, LINK_US, BLOCK_ELEMS)


def load_model():
    path = os.path.join(common.ROOT, "scripts", "dlcp-ina-model")
    loader = importlib.machinery.SourceFileLoader("ina_model", path)
    spec = importlib.util.spec_from_loader("ina_model", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


MODEL = load_model()


def gradient_bytes(scale):
    sizes, _ = common.read_profile("resnet50")
    return 4 * int(sum(sizes) * scale / 4)


def fine_chunks(nbytes):
    """k with one chunk per datagram: the simulator's pipeline unit."""
    return math.ceil(nbytes / GROUP_BYTES)


# Bytes a master's link carries per group: the contribution (INA header,
# IPv4 and UDP around the 1 KiB payload) and the ACK of its result.
WIRE_PER_GROUP = GROUP_BYTES + 32 + 28 + 32 + 28
# DCTCP's first window when a connection should start at line rate, as
# the closed forms assume from the first byte.
LINE_RATE_CWND = 1000


def spine_tree(racks, spine):
    """An aggregation tree on a leaf-spine: every ToR under |spine|."""
    return "[%s]" % ", ".join("[tor%d, spine%d]" % (t, spine)
                              for t in range(racks))


def mtina_trees(racks):
    """MTINA on a leaf-spine: one tree per spine."""
    return "[%s]" % ", ".join(spine_tree(racks, s)
                              for s in range(HOSTS_PER_RACK))


def hina_tree(racks):
    """HINA on a leaf-spine: aggregation at both tiers in one tree, under
    spine0 (MTINA with a single tree)."""
    return spine_tree(racks, 0)


# Placeholder the runs replace with the rack count's trees.
MTINA_SETS = ["aggregation=MTINA"]


def variants(nbytes):
    """(id, algo, GPUs per host, chunks, label, extra --set) of every
    scheme run."""
    return (("ring", "ring", 1, COARSE_CHUNKS, "ring (hosts)", []),
            ("ring-lr", "ring", 1, COARSE_CHUNKS,
             "ring (hosts), first window %d" % LINE_RATE_CWND,
             ["transport.init_cwnd=%d" % LINE_RATE_CWND]),
            ("ps", "ps", 1, COARSE_CHUNKS, "PS (hosts)", []),
            ("ps-lr", "ps", 1, COARSE_CHUNKS,
             "PS (hosts), first window %d" % LINE_RATE_CWND,
             ["transport.init_cwnd=%d" % LINE_RATE_CWND]),
            ("cina-k%d" % COARSE_CHUNKS, "cina", GPUS, COARSE_CHUNKS,
             "CINA, k = %d" % COARSE_CHUNKS, []),
            ("cina-kfine", "cina", GPUS, fine_chunks(nbytes),
             "CINA, k = %d (1 KiB)" % fine_chunks(nbytes), []),
            ("mtina-k%d" % COARSE_CHUNKS, "mtina", GPUS, COARSE_CHUNKS,
             "MTINA, k = %d" % COARSE_CHUNKS, MTINA_SETS),
            ("mtina-kfine", "mtina", GPUS, fine_chunks(nbytes),
             "MTINA, k = %d (1 KiB)" % fine_chunks(nbytes), MTINA_SETS))


def job(algo, nbytes, gpus, chunks):
    fields = ["algo: %s" % algo, "bytes: %d" % nbytes, "iterations: 1"]
    if algo in ("cina", "hina"):
        fields += ["window: %d" % WINDOW, "gpus_per_host: %d" % gpus,
                   "chunks: %d" % chunks, "intra_rate: %gGbps" % INTRA_GBPS]
    return "{" + ", ".join(fields) + "}"


# The three-tier part: a k = 4 fat-tree (16 hosts, 8 edge switches of 2
# hosts, 4 pods), where HINA aggregates at every tier (edge, one
# aggregation switch per pod, core0) and CINA chains the 8 edge switches.
FAT_K = 4
FAT_HOSTS_PER_EDGE = FAT_K // 2
FAT_EDGES = FAT_K * FAT_K // 2
FAT_TOPOLOGY = ("{kind: fat_tree, k: %d, link_rate: 100Gbps, link_delay: "
                "%gus}" % (FAT_K, LINK_US))


def fat_edges():
    return ["edge%d_%d" % (p, i) for p in range(FAT_K)
            for i in range(FAT_K // 2)]


def fat_aggregation(vid):
    """The aggregation section of a fat-tree run: HINA's tree rooted at
    core0 through each pod's first aggregation switch, or CINA's chain of
    the edge switches."""
    if vid.startswith("hina"):
        pairs = ["[%s, agg%s_0]" % (e, e[4:].split("_")[0])
                 for e in fat_edges()]
        pairs += ["[agg%d_0, core0]" % p for p in range(FAT_K)]
        where = "tree: [%s]" % ", ".join(pairs)
    else:
        where = "chain: [%s]" % ", ".join(fat_edges())
    return "{%s, memory: 4MiB, block_elems: %d}" % (where, BLOCK_ELEMS)


def fat_variants(nbytes):
    """(id, algo, GPUs per host, chunks, label, extra --set) of the
    fat-tree runs."""
    out = []
    for scheme in ("hina", "cina"):
        for k, kl in ((COARSE_CHUNKS, "%d" % COARSE_CHUNKS),
                      (fine_chunks(nbytes), "fine")):
            out.append(("%s-k%s" % (scheme, kl), scheme, GPUS, k,
                        "%s, k = %d" % (scheme.upper(), k), []))
    out.append(("ring-lr", "ring", 1, COARSE_CHUNKS,
                "ring (hosts), first window %d" % LINE_RATE_CWND,
                ["transport.init_cwnd=%d" % LINE_RATE_CWND]))
    return out


# The training part: the seed's chapter-4 comparison (training time,
# throughput, scaling efficiency, speedup) for VGG19 and ResNet50, one GPU
# per host (so ring and PS, which run one rank per host, compare like for
# like), 4 racks of 4 hosts; each iteration computes the profile's forward
# and backward time, then all-reduces the gradient.  Both models at 1/64:
# INA datagrams carry the real vector and VGG19's 575 MB x 16 ranks must
# fit the simulator's 256 MiB per INA job.
TRAIN_SCALE = 1.0 / 64
TRAIN_RACKS = 4
TRAIN_ITERATIONS = 3
TRAIN_BATCH = 32     # the profiles' batch per GPU
TRAIN_MODELS = ("vgg19", "resnet50")
TRAIN_ALGOS = (("ring", "ring"), ("ps", "PS"), ("hina", "HINA"),
               ("cina", "CINA"), ("mtina", "MTINA"))


def train_model(name):
    """(gradient bytes, compute us per iteration) of a profile at
    TRAIN_SCALE."""
    sizes, header = common.read_profile(name)
    compute = float(header["forward_us"]) + float(header["backward_us"])
    return 4 * int(sum(sizes) * TRAIN_SCALE / 4), compute * TRAIN_SCALE


def train_runs():
    out = []
    chain = ", ".join("tor%d" % i for i in range(TRAIN_RACKS))
    for model in TRAIN_MODELS:
        nbytes, compute = train_model(model)
        for algo, _ in TRAIN_ALGOS:
            fields = ["algo: %s" % algo, "bytes: %d" % nbytes,
                      "iterations: %d" % TRAIN_ITERATIONS,
                      "compute_time: %.3fus" % compute]
            if algo in ("hina", "cina", "mtina"):
                fields += ["window: %d" % WINDOW, "gpus_per_host: 1"]
            sets = ["topology.tors=%d" % TRAIN_RACKS,
                    "aggregation.chain=[%s]" % chain,
                    "workload.collective={%s}" % ", ".join(fields)]
            if algo == "mtina":
                sets.append("aggregation={trees: %s, memory: 4MiB, "
                            "block_elems: %d}" % (mtina_trees(TRAIN_RACKS),
                                                  BLOCK_ELEMS))
            elif algo == "hina":
                sets.append("aggregation={tree: %s, memory: 4MiB, "
                            "block_elems: %d}" % (hina_tree(TRAIN_RACKS),
                                                  BLOCK_ELEMS))
            out.append({"id": "train-%s-%s" % (model, algo), "set": sets,
                        "params": {"variant": "train-" + algo,
                                   "racks": model}})
    return out


def train_report(rows):
    """The seed's four training metrics from the simulated iterations."""
    n = TRAIN_RACKS * HOSTS_PER_RACK
    head = ["model", "scheme", "iteration (ms)", "throughput (samples/s)",
            "scaling efficiency", "speedup (%d GPUs)" % n]
    body = []
    for model in TRAIN_MODELS:
        nbytes, compute = train_model(model)
        for algo, label in TRAIN_ALGOS:
            r = find(rows, "train-" + algo, model)
            ok = r is not None and r["status"] == "ok" and \
                r.get("coll0.done") == "True"
            it = common.num(r, "coll0.iteration_mean_us") if ok else \
                float("nan")
            # One GPU alone computes and never communicates: efficiency is
            # the share of an iteration spent computing, speedup n times it.
            eff = compute / it
            body.append([model, label, "%.2f" % (it / 1e3),
                         "%.0f" % (TRAIN_BATCH * n / (it / 1e6)),
                         "%.1f %%" % (100 * eff), "%.1f" % (n * eff)])
    return ["### Training: VGG19 and ResNet50 (the seed's chapter-4 "
            "metrics)", "",
            "%d racks of %d hosts, one GPU per host (%d GPUs), both models "
            "x %g (gradient and compute time), %d iterations of compute "
            "then all-reduce (no overlap with the backward pass), batch %d "
            "per GPU.  Throughput = batch x GPUs / iteration; scaling "
            "efficiency = compute / iteration (one GPU never "
            "communicates); speedup = GPUs x efficiency; the throughputs "
            "are those of the scaled models.  On this leaf-spine HINA "
            "aggregates at both tiers in one tree (every ToR under "
            "spine0), MTINA in one tree per spine.  "
            "The seed shows these metrics as figures only; the text this "
            "project has gives no numbers to set beside them." % (
                TRAIN_RACKS, HOSTS_PER_RACK, n, TRAIN_SCALE,
                TRAIN_ITERATIONS, TRAIN_BATCH), "",
            common.table(head, body), ""]


def runs(scale):
    nbytes = gradient_bytes(scale)
    out = train_runs()
    for vid, algo, gpus, chunks, _, extra in fat_variants(nbytes):
        # Ring runs keep an (unused) aggregation section: the base
        # scenario's names the leaf-spine's ToRs.
        sets = ["topology=" + FAT_TOPOLOGY,
                "workload.collective=" + job(algo, nbytes, gpus, chunks),
                "aggregation=" + fat_aggregation(vid)]
        out.append({"id": "fat-%s" % vid, "set": sets + extra,
                    "params": {"variant": vid, "racks": "fat"}})
    for racks in RACKS:
        chain = ", ".join("tor%d" % i for i in range(racks))
        for vid, algo, gpus, chunks, _, extra in variants(nbytes):
            if extra == MTINA_SETS:
                extra = ["aggregation={trees: %s, memory: 4MiB, "
                         "block_elems: %d}" % (mtina_trees(racks),
                                               BLOCK_ELEMS)]
            out.append({"id": "%s-%d" % (vid, racks),
                        "set": ["topology.tors=%d" % racks,
                                "aggregation.chain=[%s]" % chain,
                                "workload.collective=" +
                                job(algo, nbytes, gpus, chunks)] + extra,
                        "params": {"variant": vid, "racks": racks}})
    return out


def config(racks, nbytes, gpus, chunks, fat=False):
    """The model's configuration of one simulated set-up: every link
    100 Gbit/s with LINK_US; a host-to-host path of 4 links (leaf-spine)
    or 6 (fat-tree, through a core)."""
    return MODEL.Config(n=gpus, h=FAT_HOSTS_PER_EDGE if fat else
                        HOSTS_PER_RACK, racks=racks,
                        bytes_=nbytes, chunks=chunks, trees=HOSTS_PER_RACK,
                        dtd_bps=INTRA_GBPS * 1e9, dtd_s=0.0, htl_bps=100e9,
                        htl_s=LINK_US * 1e-6, lts_bps=100e9,
                        lts_s=LINK_US * 1e-6,
                        min_s=(6 if fat else 4) * LINK_US * 1e-6)


def predicted_us(vid, racks, nbytes, gpus, chunks):
    scheme = vid.split("-")[0]
    fat = racks == "fat"
    c = config(FAT_EDGES if fat else racks, nbytes, gpus, chunks, fat)
    return MODEL.MODELS[scheme](c) * 1e6


def wire_bytes(nbytes):
    """The bytes CINA really puts on a master's link for |nbytes|."""
    return fine_chunks(nbytes) * WIRE_PER_GROUP


def find(rows, vid, racks):
    for r in rows:
        if r["variant"] == vid and r["racks"] == str(racks):
            return r
    return None


def sim_us(r):
    """The simulated all-reduce less the ranks' agreement on the groups'
    exponents, which dlcp's hosts run first (an all-reduce MAX of an
    int32 per group) and the seed's models, scaling nothing, leave out."""
    if r is None or r["status"] != "ok" or r.get("coll0.done") != "True":
        return float("nan")
    agree = common.num(r, "coll0.agree_mean_us")
    return common.num(r, "coll0.collective_mean_us") - (
        0.0 if math.isnan(agree) else agree)


def report(rows, scale, build):
    nbytes = gradient_bytes(scale)
    md = ["## CINA: the ToR chain against HINA, MTINA, ring and PS, and the "
          "seed's cost models (RA-INA/CINA seed, chapter 4)", "",
          "Command: `scripts/results/run.py --only cina`.  Racks of %d hosts "
          "on a non-blocking leaf-spine (%d spines), every link 100 Gbit/s "
          "with %g us; ResNet50's gradient x %g = %.2f MB per rank, one "
          "all-reduce.  CINA: %d GPUs per host ring-reduce to the master "
          "at %g Gbit/s in k chunks (the seed's n + k - 2 steps), each ToR "
          "of the chain runs src/proto/agg (%d-element blocks, groups of %d "
          "blocks, window %d), partial sums go down the chain and finals "
          "come back along it.  Ring and PS: src/coll over DCTCP, one rank "
          "per host.  Model: `scripts/dlcp-ina-model` with the same "
          "figures (B = 100 Gbit/s, a_htl = a_lts = %g us, a_min = %g us "
          "over the 4 links of a host-to-host path, B_dtd = %g Gbit/s)." % (
              HOSTS_PER_RACK, HOSTS_PER_RACK, LINK_US, scale, nbytes / 1e6,
              GPUS, INTRA_GBPS, BLOCK_ELEMS, GROUP_BLOCKS, WINDOW, LINK_US,
              4 * LINK_US, INTRA_GBPS) +
          "  The simulated times of CINA, HINA and MTINA leave out the "
          "ranks' agreement on the groups' exponents that comes first (an "
          "all-reduce MAX of an int32 per group through the network, as "
          "dlcp's runtime; the models have no such step).", "",
          "### Synchronization time: simulated vs predicted (us)", ""]
    head = ["racks", "GPUs (CINA)", "scheme", "simulated", "model",
            "sim vs model", "model, K on the wire", "sim vs that"]
    body = []
    diffs, wdiffs = {}, {}
    for racks in RACKS:
        for vid, algo, gpus, chunks, label, _ in variants(nbytes):
            s = sim_us(find(rows, vid, racks))
            m = predicted_us(vid, racks, nbytes, gpus, chunks)
            d = 100 * (s / m - 1)
            diffs[(vid, racks)] = d
            row = [racks, racks * HOSTS_PER_RACK * GPUS, label, "%.1f" % s,
                   "%.1f" % m, common.pct(d), "", ""]
            if algo in ("cina", "mtina"):
                w = predicted_us(vid, racks, wire_bytes(nbytes), gpus,
                                 chunks)
                wdiffs[(vid, racks)] = 100 * (s / w - 1)
                row[6:] = ["%.1f" % w, common.pct(wdiffs[(vid, racks)])]
            body.append(row)
    md += [common.table(head, body), ""]
    head = ["racks", "HINA (model, k = %d)" % COARSE_CHUNKS,
            "CINA (model, k = %d)" % COARSE_CHUNKS]
    body = []
    for racks in RACKS:
        c = config(racks, nbytes, GPUS, COARSE_CHUNKS)
        body.append([racks, "%.1f" % (MODEL.t_hina(c) * 1e6),
                     "%.1f" % (MODEL.t_cina(c) * 1e6)])
    md += ["MTINA runs one tree per spine (S = %d), every ToR under each, "
           "groups round-robin over the trees.  HINA is not run on the "
           "leaf-spine: its form's 2 (K/(k B_lts) + a_lts) are two tiers "
           "above the ToR, which a leaf-spine does not have (the fat-tree "
           "table below is its simulated counterpart); its model times "
           "for the leaf-spine set-ups, beside CINA's (us):" %
           HOSTS_PER_RACK, "", common.table(head, body), ""]
    md += ["### Three tiers: HINA and CINA on a fat-tree (us)", "",
           "k = %d fat-tree (16 hosts, %d edge switches of %d hosts, 4 "
           "pods, 6 links through a core): HINA aggregates at all three "
           "tiers (every edge switch, each pod's first aggregation switch, "
           "core0), CINA chains the %d edge switches; the model takes "
           "a_min = 6 us." % (FAT_K, FAT_EDGES, FAT_HOSTS_PER_EDGE,
                               FAT_EDGES), ""]
    head = ["scheme", "simulated", "model", "sim vs model",
            "model, K on the wire", "sim vs that"]
    body = []
    for vid, algo, gpus, chunks, label, _ in fat_variants(nbytes):
        s = sim_us(find(rows, vid, "fat"))
        m = predicted_us(vid, "fat", nbytes, gpus, chunks)
        d = 100 * (s / m - 1)
        diffs[(vid, "fat")] = d
        row = [label, "%.1f" % s, "%.1f" % m, common.pct(d), "", ""]
        if algo != "ring":
            w = predicted_us(vid, "fat", wire_bytes(nbytes), gpus, chunks)
            wdiffs[(vid, "fat")] = 100 * (s / w - 1)
            row[4:] = ["%.1f" % w, common.pct(wdiffs[(vid, "fat")])]
        body.append(row)
    md += [common.table(head, body), ""]
    fine = [diffs[("cina-kfine", r)] for r in RACKS]
    wfine = [wdiffs[("cina-kfine", r)] for r in RACKS]
    coarse = [diffs[("cina-k%d" % COARSE_CHUNKS, r)] for r in RACKS]
    ring = [diffs[("ring", r)] for r in RACKS]
    ring_lr = [diffs[("ring-lr", r)] for r in RACKS]
    ps = [diffs[("ps", r)] for r in RACKS]
    ps_lr = [diffs[("ps-lr", r)] for r in RACKS]

    def listed(ds):
        return ", ".join("%+.1f" % d for d in ds)
    md += ["**Where the model's assumptions hold, it agrees.**  With one "
           "chunk per datagram (k = %d), the unit the switches really "
           "pipeline, CINA's simulated time is %s %% off the model's at "
           "2, 4 and 8 racks (target: within %.0f %%).  The model counts "
           "K bytes on the master's link; the link carries %d bytes per "
           "1 KiB of gradient (the contribution's INA, UDP and IPv4 headers "
           "and the ACK of its result, +%.1f %%): given those bytes the "
           "model is %s %% off, the rest being the finals' way back along "
           "the chain (2 links per further rack) where the model has one "
           "a_min.  Ring over DCTCP whose connections start at line rate (first "
           "window %d packets), as the form assumes, is %s %% off "
           "2(N-1)(K/(N B) + a).  On the three-tier fat-tree, given the "
           "bytes on the wire, HINA is %+.1f %% and CINA %+.1f %% off "
           "(k = %d), and ring %+.1f %%." % (
               fine_chunks(nbytes), listed(fine), AGREE, WIRE_PER_GROUP,
               100 * (WIRE_PER_GROUP / GROUP_BYTES - 1), listed(wfine),
               LINE_RATE_CWND, listed(ring_lr),
               wdiffs[("hina-kfine", "fat")], wdiffs[("cina-kfine", "fat")],
               fine_chunks(nbytes), diffs[("ring-lr", "fat")]), "",
           "**Where they do not, it does not, and this is why.**  With the "
           "seed's coarse k = %d the model charges each further ToR of the "
           "chain, and the multicast back, a whole chunk (K/(k B_lts)): it "
           "assumes a switch stores and forwards chunks.  The simulated "
           "switches aggregate and pass on every datagram as it completes "
           "(as a programmable switch does), so the chain costs packets, "
           "not chunks, and the simulation is %s the model (%s %% at 2, 4 "
           "and 8 racks), the gap growing with the chain (HINA on the "
           "fat-tree, k = %d: %+.1f %%, two tiers priced a chunk each).  "
           "MTINA's form, (k+1)(S+1) K/(k S B) + (S+1) a, charges "
           "(S+1)/S K/B (%.2f K/B for S = %d) where every host link "
           "carries K once however many trees share the fabric above it, "
           "so the simulation is %s %% off it at 2, 4 and 8 racks even "
           "with one chunk per datagram (%s %% given the bytes on the "
           "wire); the seed does not derive the extra tree's worth.  "
           "The ring "
           "over DCTCP, one connection per pair of neighbours as Gloo's "
           "ranks keep (`transport.persistent`), is %s %% off: its 2(N-1) "
           "steps pass one window on from step to step, as the model's "
           "pipelined ring assumes.  PS is %s %% off: the seed's form is a dedicated server "
           "per shard with every worker's push and pull overlapping chunk "
           "by chunk ((k+1)/k K/B), while src/coll's PS co-locates the "
           "shards on the ranks, so each host link carries 2(N-1)/N K each "
           "way, the pull waits for the push, and every rank takes N-1 "
           "concurrent connections (incast: ECN back-off and buffer drops, so "
           "a first window of %d makes it worse: %s %%)." % (
               COARSE_CHUNKS, "below" if max(coarse) < 0 else "off",
               listed(coarse), COARSE_CHUNKS,
               diffs[("hina-k%d" % COARSE_CHUNKS, "fat")],
               (HOSTS_PER_RACK + 1) / HOSTS_PER_RACK, HOSTS_PER_RACK,
               listed([diffs[("mtina-kfine", r)] for r in RACKS]),
               listed([wdiffs[("mtina-kfine", r)] for r in RACKS]),
               listed(ring),
               listed(ps), LINE_RATE_CWND, listed(ps_lr)), ""]
    scale_r = MODEL.scale_limits(32, 64, 1)
    md += train_report(rows)
    md += ["### Largest node count on a three-tier network", "",
           "`scripts/dlcp-ina-model scale` (derivation in docs/ina.md, "
           "\"Cost models\"): with 32-port programmable switches and 64-port "
           "commodity ones, HINA (every tier programmable) reaches %d hosts "
           "and CINA (programmable ToRs only) %d, %.2fx; the seed states "
           "%d vs %d (%.2fx) without its derivation or switch figures." % (
               scale_r["hina_hosts"], scale_r["cina_hosts"],
               scale_r["cina_hosts"] / scale_r["hina_hosts"],
               SEED_CINA_NODES, SEED_HINA_NODES,
               SEED_CINA_NODES / SEED_HINA_NODES), ""]
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8.4, 3.8))
    for (vid, _, gpus, chunks, label, extra), color in zip(
            variants(nbytes), ("C0", "C4", "C1", "C5", "C2", "C3", "C6",
                               "C7")):
        ax.plot(RACKS, [sim_us(find(rows, vid, r)) for r in RACKS],
                marker="o", color=color, label=label + ", simulated")
        if vid.endswith("-lr"):
            continue  # the same model line as the variant without "-lr"
        ax.plot(RACKS, [predicted_us(vid, r, nbytes, gpus, chunks)
                        for r in RACKS], linestyle="--", color=color,
                label=label + ", model")
    ax.set_xlabel("racks (ToRs on the chain)")
    ax.set_ylabel("synchronization time (us)")
    ax.set_xticks(RACKS)
    ax.set_yscale("log")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(common.plot_path(NAME))
    plt.close(fig)
    md += ["![CINA](results/%s.png)" % NAME, ""]
    md += ["The runtime's chain (a `dlcp-switch` per rack on the "
           "emulated testbed, `make bench-cina`) is in docs/ina.md, "
           "\"CINA in the runtime\".  Not here: the seed's own training "
           "figures as numbers to set beside the table above (its text has "
           "none); training with communication overlapping the backward "
           "pass.", ""]
    md += common.unfinished_note(rows)
    return "\n".join(md)


def main(build, jobs, full):
    def capped(scale):
        return min(scale, MAX_SCALE)
    return common.experiment(
        NAME, build, jobs, full, lambda s: runs(capped(s)),
        lambda rows, s, b: report(rows, capped(s), b),
        scenario_text=SCENARIO)
