"""dlcp-testbed's command line: up, run, set, stats, list, down."""

import argparse
import json
import os
import re
import shutil
import signal
import sys
import time

from . import bpf, launch, state, system, topology

NOT_ROOT = 77  # ctest's skip code: the tests skip when we are not root
TOOLS = ("ip", "tc", "ethtool", "bpftool", "clang", "gcc", "unshare")
TOPOLOGY_KEYS = ("hosts", "racks", "spines", "rate", "fabric_rate", "mtu",
                 "queue", "burst_us", "dscp_prio", "ipv6", "host_gro", "loss",
                 "link_loss", "ecn_k", "agg_switch", "agg_chain", "agg_trees",
                 "agg_mem", "agg_threads", "agg_policy", "agg_static_parts")

DESCRIPTION = """\
An emulated cluster in network namespaces: N hosts in R racks (one switch
namespace per rack), S spines routing between racks with ECMP on L4 ports,
a rate limit on every link direction, random loss and ECN marking on the
switch side of links (a tc BPF filter), counters per link."""

EPILOG = """\
commands:
  up     make a testbed that stays until 'down ID'; prints its id
  run    run CMD once per host (ranks 0..N-1, torchrun's variables); with
         --id on a testbed made by 'up', otherwise on a new one that is
         removed afterwards (also on Ctrl-C or a failure)
  mpirun run an MPI program with Open MPI's mpirun, one rank per host,
         over TCP on the testbed's links (same --id / topology rules)
  set    change the loss / ECN configuration of a running testbed
  stats  per-link counters of a testbed (since 'up')
  list   testbeds on this machine
  down   remove testbeds: 'down ID...', 'down --stale', 'down --all'

Loss: --loss P drops each packet with probability P at the last switch port
before its destination host (so every host-to-host packet meets exactly one
such draw).  --link-loss LINK[:DIR]=P sets one link direction (repeatable,
applied after --loss): LINK is h<i>, r<r>-s<s>, hosts, fabric or all; DIR
up, down or both.  P is a fraction (0.01) or a percentage (1%).

Aggregation: --agg-switch BIN starts BIN (dlcp-switch) on rack 0's switch,
listening on its host-facing address 10.0.0.254, and every rank gets
DLCP_SWITCH pointing at it (in-network aggregation, docs/ina.md).  With
--agg-chain, one on every rack's switch (10.0.<r>.254), rack r's passing
its partial sums to rack r+1's (CINA's chain); every rank gets its rack's
switch as DLCP_SWITCH and the chain as DLCP_INA_CHAIN.  With --agg-trees
T, one on every rack's switch and one on each of spines 0..T-1, every
rack's a leaf of T trees rooted at the spines (group g up spine g mod T,
PANAMA's tree per spine); ranks get their rack's switch as DLCP_SWITCH,
every rack's as DLCP_INA_LEAVES and T as DLCP_INA_TREES.
See docs/testbed.md."""


class Interrupted(Exception):
    pass


def die(msg, code=1):
    print(f"dlcp-testbed: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_rate(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps|b)?", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected a rate such as 1gbit, 100mbit or 10g")
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
    v = float(m.group(1)) * scale[m.group(2)]
    if m.group(3) == "bps":
        v *= 8  # tc's "bps" is bytes per second
    if not 1e5 <= v <= 1e12:
        raise argparse.ArgumentTypeError(f"'{text}': expected 100kbit..1tbit")
    return int(v)


def parse_bytes(text):
    m = re.fullmatch(r"(\d+)([kmg]?)i?b?", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected a size such as 512k or 4m")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1 << 20,
                              "g": 1 << 30}[m.group(2)]


def parse_prob(text):
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        v = -1
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected a probability in [0, 1] or a percentage")
    return v


def parse_link_loss(text):
    spec, eq, p = text.rpartition("=")
    if not eq or not spec:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected LINK[:DIR]=P, e.g. h0:up=1%")
    return spec, parse_prob(p)


def parse_host_list(text):
    """Host indices for run --on: comma-separated indices and a-b ranges,
    each host once; checked against the testbed's size by check_on."""
    out = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            a, b = -1, -2
        if a < 0 or b < a:
            raise argparse.ArgumentTypeError(
                f"'{text}': expected host indices and ranges, e.g. 0-3 or "
                f"4,6,7")
        out.extend(range(a, b + 1))
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"'{text}': a host is named twice")
    return out


def check_on(on, hosts):
    """Dies unless every index of run --on names one of |hosts| hosts."""
    bad = [i for i in on or () if i >= hosts]
    if bad:
        die(f"--on: host {bad[0]} does not exist (the testbed has hosts "
            f"0..{hosts - 1})", 2)


def int_range(lo, hi):
    def f(text):
        try:
            v = int(text)
        except ValueError:
            v = lo - 1
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(
                f"'{text}': expected an integer in {lo}..{hi}")
        return v
    return f


def add_loss_options(p):
    p.add_argument("--loss", type=parse_prob, default=0.0, metavar="P",
                   help="random loss at every switch port towards a host")
    p.add_argument("--link-loss", type=parse_link_loss, action="append",
                   default=[], metavar="LINK[:DIR]=P",
                   help="random loss on one link direction (repeatable)")
    p.add_argument("--ecn-k", type=parse_bytes, default=0, metavar="BYTES",
                   help="mark CE on ECT packets while a switch queue holds "
                        "more than BYTES (0: no marking, the default)")


def add_topology_options(p):
    p.add_argument("-n", "--hosts", type=int_range(1, 1000), default=4,
                   help="hosts, one rank each (default 4)")
    p.add_argument("--racks", type=int_range(1, 120), default=1,
                   help="racks, one switch each (default 1)")
    p.add_argument("--spines", type=int_range(0, 64), default=None,
                   help="spines between racks (default 2 with >= 2 racks)")
    p.add_argument("--rate", type=parse_rate, default=parse_rate("1gbit"),
                   help="rate of every host link direction (default 1gbit)")
    p.add_argument("--fabric-rate", type=parse_rate, default=None,
                   help="rate of rack-spine links (default: --rate)")
    p.add_argument("--mtu", type=int_range(576, 65000), default=1500,
                   help="MTU of every link (default 1500)")
    p.add_argument("--queue", type=parse_bytes, default=parse_bytes("512k"),
                   metavar="BYTES",
                   help="queue of every link direction (default 512k)")
    p.add_argument("--burst-us", type=int_range(1, 100000), default=250,
                   help="token bucket depth in microseconds at the link "
                        "rate, at least 4 MTUs (default 250)")
    p.add_argument("--dscp-prio", action="store_true",
                   help="strict priority by DSCP class selector (CS7 "
                        "first) on every link direction, one queue of "
                        "--queue bytes per class (HTB)")
    p.add_argument("--ipv6", action="store_true",
                   help="IPv6 beside IPv4 (fd00::<rack>:<host> in hex); "
                        "ranks get the IPv6 MASTER_ADDR, so dlcp jobs run "
                        "over IPv6, and so do --agg-switch's daemons "
                        "(mpirun stays on IPv4)")
    p.add_argument("--host-gro", action="store_true",
                   help="GRO on at every host's own interface, as a real "
                        "NIC coalesces what it receives (after the link's "
                        "limiter and loss filter; off everywhere else)")
    p.add_argument("--agg-switch", metavar="BIN", default=None,
                   help="run the aggregation switch BIN (dlcp-switch) on "
                        "rack 0's switch; ranks get DLCP_SWITCH")
    p.add_argument("--agg-chain", action="store_true",
                   help="with --agg-switch: one on every rack's switch, "
                        "chained rack 0 -> 1 -> ... (CINA)")
    p.add_argument("--agg-trees", type=int_range(1, 8), default=0,
                   metavar="T",
                   help="with --agg-switch: one on every rack's switch and "
                        "on spines 0..T-1, T trees rooted at the spines "
                        "(MTINA, PANAMA's tree per spine)")
    p.add_argument("--agg-mem", type=parse_bytes, default=parse_bytes("4m"),
                   metavar="BYTES",
                   help="its aggregator memory (default 4m)")
    p.add_argument("--agg-threads", type=int_range(1, 64), default=1,
                   help="its worker threads (default 1)")
    p.add_argument("--agg-policy", choices=("shared", "static"),
                   default="shared",
                   help="how jobs share its pool: first come first served, "
                        "or fixed partitions (default shared)")
    p.add_argument("--agg-static-parts", type=int_range(2, 1024),
                   default=None, metavar="N",
                   help="partitions of a static pool (default: the "
                        "switch's, min(its --max-jobs, 4))")
    add_loss_options(p)


def add_run_options(p):
    p.add_argument("--grace-ms", type=int_range(0, 600000), default=3000,
                   help="SIGTERM to SIGKILL when stopping ranks")
    p.add_argument("--stats", choices=("table", "json", "none"),
                   default="table",
                   help="per-link counters of the run, on stderr")
    p.add_argument("--stats-file", metavar="FILE",
                   help="also write the run's counters to FILE as JSON")


def parser():
    ap = argparse.ArgumentParser(
        prog="dlcp-testbed", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    up = sub.add_parser("up", help="make a testbed that stays")
    add_topology_options(up)
    run = sub.add_parser("run", help="run CMD once per host")
    run.add_argument("--id", help="an existing testbed (from 'up')")
    add_topology_options(run)
    run.add_argument("--port", type=int_range(1, 65535), default=29500,
                     help="MASTER_PORT (default 29500)")
    run.add_argument("--on", type=parse_host_list, default=None,
                     metavar="HOSTS",
                     help="only these hosts, ranks in this order: indices "
                          "and ranges, e.g. 0-3 or 4,6,7 (default: all)")
    add_run_options(run)
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    mpi = sub.add_parser("mpirun", help="run an MPI program, one rank per host")
    mpi.add_argument("--id", help="an existing testbed (from 'up')")
    add_topology_options(mpi)
    add_run_options(mpi)
    mpi.add_argument("--mca", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"),
                     help="extra Open MPI parameter (repeatable)")
    mpi.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- PROG ...")
    st = sub.add_parser("set", help="change loss and ECN of a testbed")
    st.add_argument("id")
    add_loss_options(st)
    stats = sub.add_parser("stats", help="per-link counters")
    stats.add_argument("id")
    stats.add_argument("--json", action="store_true")
    sub.add_parser("list", help="testbeds on this machine")
    down = sub.add_parser("down", help="remove testbeds")
    down.add_argument("ids", nargs="*", metavar="ID")
    down.add_argument("--stale", action="store_true",
                      help="those whose 'run' process is gone")
    down.add_argument("--all", action="store_true",
                      help="every dlcp-testbed testbed on this machine")
    return ap


# --- making and removing ----------------------------------------------------

def topology_of(rec):
    return topology.build(state.prefix(rec["id"]), rec["hosts"], rec["racks"],
                          rec["spines"], rec.get("ipv6", False))


def loss_settings(t, rec, a):
    """{direction key: (loss, ecn rate bytes/s, ecn K)} from options |a|."""
    loss = {d.key: 0.0 for d in t.directions}
    for d in topology.select(t, "hosts:down"):
        loss[d.key] = a.loss
    for spec, p in a.link_loss:
        for d in topology.select(t, spec):
            loss[d.key] = p
    out = {}
    for d in t.directions:
        rate = rec["fabric_rate_bps"] if "-" in d.link else rec["rate_bps"]
        ecn = a.ecn_k > 0 and d.marks
        out[d.key] = (loss[d.key], rate // 8 if ecn else 0,
                      a.ecn_k if ecn else 0)
    return out


def make(a, owner):
    """Creates a testbed from options |a|; returns its record."""
    spines = a.spines if a.spines is not None else (2 if a.racks > 1 else 0)
    if a.agg_switch and not (os.path.isfile(a.agg_switch) and
                             os.access(a.agg_switch, os.X_OK)):
        die(f"--agg-switch {a.agg_switch}: not an executable file", 2)
    if a.agg_chain and not (a.agg_switch and a.racks >= 2):
        die("--agg-chain: needs --agg-switch and --racks >= 2", 2)
    if a.agg_trees and not (a.agg_switch and a.racks >= 2 and
                            not a.agg_chain and a.agg_trees <= spines):
        die(f"--agg-trees {a.agg_trees}: needs --agg-switch, --racks >= 2, "
            f"no --agg-chain and a spine per tree ({spines} spines)", 2)
    tb_id = state.new_id()
    rec = {"id": tb_id, "hosts": a.hosts, "racks": a.racks, "spines": spines,
           "rate_bps": a.rate, "fabric_rate_bps": a.fabric_rate or a.rate,
           "mtu": a.mtu, "queue_bytes": a.queue, "burst_us": a.burst_us,
           "dscp_prio": a.dscp_prio, "ipv6": a.ipv6, "host_gro": a.host_gro,
           "owner": state.owner_token(), "created": time.time()}
    try:
        t = topology_of(rec)
    except ValueError as e:
        die(str(e), 2)
    try:
        sets = loss_settings(t, rec, a)
    except ValueError as e:
        die(str(e), 2)
    state.save(rec)  # before any namespace: a crash leaves a stale record
    try:
        obj = os.path.join(state.dir_of(tb_id), "link.bpf.o")
        bpf.compile_object(obj)
        system.create(t, rec)
        rec["attached"] = bpf.attach(t, obj)
        bpf.configure(rec["attached"], sets)
    except BaseException:
        remove_or_warn(tb_id)
        raise
    rec["loss"] = {k: v[0] for k, v in sets.items()}
    rec["ecn_k"] = a.ecn_k
    rec["owner"] = owner
    if a.agg_switch:
        try:
            rec["agg_switch"] = start_agg_switches(t, a, tb_id)
        except BaseException:
            remove_or_warn(tb_id)
            raise
        rec["agg_trees"] = a.agg_trees
    state.save(rec)
    return rec


def trees_text(n):
    """"2 trees rooted at spines 0-1" for --agg-trees |n|."""
    return (f"{n} trees rooted at spines 0-{n - 1}" if n > 1 else
            "one tree rooted at spine 0")


def start_agg_switches(t, a, tb_id):
    """Starts the testbed's dlcp-switch daemons as |a| asks: rack 0's, or
    every rack's as a chain or as the leaves of trees (the spines' roots
    first, so the leaves find them).  Returns the switches the ranks use,
    comma-separated, rack by rack."""
    def start(log, **where):
        return launch.start_agg_switch(
            t, a.agg_switch, a.agg_mem, a.agg_threads,
            os.path.join(state.dir_of(tb_id), log), a.agg_policy,
            a.agg_static_parts, **where)

    for s in range(a.agg_trees):
        start(f"agg-switch-s{s}.log", ns=t.spines[s],
              bind="::" if t.ipv6 else "0.0.0.0")
    leaves = []
    for r in range(a.racks if a.agg_chain or a.agg_trees else 1):
        if a.agg_trees:
            parents = [launch.spine_agg_address(t, r, s)
                       for s in range(a.agg_trees)]
        elif a.agg_chain and r + 1 < a.racks:
            parents = [launch.agg_address(r + 1, t.ipv6)]
        else:
            parents = []
        leaves.append(start(f"agg-switch-r{r}.log" if r else
                            "agg-switch.log", ns=t.racks[r],
                            bind=launch.host_of(
                                launch.agg_address(r, t.ipv6)),
                            parents=parents))
    return ",".join(leaves)


def remove_or_warn(tb_id):
    failed = state.remove(tb_id)
    for f in failed:
        print(f"dlcp-testbed: could not remove {f}", file=sys.stderr)
    return not failed


def sweep_stale():
    for i in state.known_ids():
        if state.is_stale(i):
            remove_or_warn(i)


# --- counters -------------------------------------------------------------

def snapshot(t, rec):
    """Per direction: delivered packets/bytes, random losses, queue drops,
    ECN marks and other receive drops."""
    dev = system.link_counters(t)
    filt = bpf.read_stats(rec["attached"])
    out = {}
    for d in t.directions:
        f = filt[d.key]
        rx = dev[d.receiver.ns][d.receiver.dev].get("link", {})
        q = dev[d.limiter.ns][d.limiter.dev].get("qdisc", {})
        pk, by = rx.get("rx_packets", 0), rx.get("rx_bytes", 0)
        if d.hook == "ingress":  # counted on arrival, before the filter
            pk, by = pk - f["lost"], by - f["lost_bytes"]
        out[d.key] = {"link": d.link, "dir": d.dir, "packets": pk,
                      "bytes": by, "lost": f["lost"],
                      "queue_drops": q.get("drops", 0), "marked": f["marked"],
                      "other_drops": rx.get("rx_dropped", 0)}
    return out


def delta(after, before):
    out = {}
    for k, a in after.items():
        b = before.get(k, {})
        out[k] = {f: (v - b.get(f, 0) if isinstance(v, int) else v)
                  for f, v in a.items()}
    return out


def print_table(counters, f):
    cols = ("packets", "bytes", "lost", "queue_drops", "marked",
            "other_drops")
    f.write(f"{'link':<9} {'dir':<4} " +
            " ".join(f"{c:>12}" for c in cols) + "\n")
    for c in counters.values():
        f.write(f"{c['link']:<9} {c['dir']:<4} " +
                " ".join(f"{c[x]:>12}" for x in cols) + "\n")


# --- commands -------------------------------------------------------------

def install_signals(flag):
    """SIGINT/SIGTERM/SIGHUP set |flag|; outside the ranks' supervision
    they also interrupt (the finally blocks remove the testbed)."""
    def handler(sig, _):
        flag["sig"] = sig
        if not flag.get("supervising"):
            raise Interrupted(signal.Signals(sig).name)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def cmd_up(a):
    sweep_stale()
    flag = {}
    install_signals(flag)
    rec = make(a, None)
    t = topology_of(rec)
    print(rec["id"])
    for h in t.hosts:
        v6 = f", {h.addr6}" if h.addr6 else ""
        print(f"# rank {h.index}: namespace {h.ns}, {h.addr}{v6}, "
              f"rack{h.rack}",
              file=sys.stderr)
    if rec.get("agg_switch"):
        shape = ("" if "," not in rec["agg_switch"] else
                 f"; the leaves of {trees_text(rec['agg_trees'])}, rack "
                 f"by rack"
                 if rec.get("agg_trees") else "; a chain, rack by rack")
        print(f"# aggregation switch: {rec['agg_switch']} (DLCP_SWITCH of "
              f"every rank{shape})", file=sys.stderr)
    return 0


def cmd_run(a):
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if not argv:
        die("missing the command to run after '--'", 2)
    if a.id:
        defaults = vars(parser().parse_args([a.cmd]))
        given = [k for k in TOPOLOGY_KEYS if getattr(a, k) != defaults[k]]
        if given:
            die(f"--{given[0].replace('_', '-')} describes a new testbed; "
                f"with --id use the testbed as made (loss: "
                f"dlcp-testbed set)", 2)
    flag = {}
    install_signals(flag)
    made = None
    try:
        on = getattr(a, "on", None)  # run's; mpirun has every host
        if a.id:
            rec = state.load(a.id)
            check_on(on, rec["hosts"])
        else:
            check_on(on, a.hosts)
            sweep_stale()
            rec = made = make(a, state.owner_token())
            print(f"dlcp-testbed: testbed {rec['id']}: {rec['hosts']} hosts, "
                  f"{rec['racks']} racks, {rec['spines']} spines (removed "
                  f"when the run ends)", file=sys.stderr, flush=True)
        t = topology_of(rec)
        before = snapshot(t, rec)
        flag["supervising"] = True
        if "sig" in flag:
            raise Interrupted(signal.Signals(flag["sig"]).name)
        if a.cmd == "mpirun":
            extra = [x for name, value in a.mca for x in ("--mca", name, value)]
            jobs = launch.mpirun_jobs(t, argv, extra)
        else:
            jobs = launch.rank_jobs(t, argv, a.port, rec.get("agg_switch"),
                                    on, rec.get("agg_trees", 0))
        ranks = launch.Ranks(jobs, a.grace_ms / 1000)
        try:
            failed, status = ranks.supervise(lambda: "sig" in flag)
        finally:
            ranks.stop()
        flag["supervising"] = False
        counters = delta(snapshot(t, rec), before)
        if a.stats == "table":
            print_table(counters, sys.stderr)
        elif a.stats == "json":
            json.dump(counters, sys.stderr, indent=1)
            sys.stderr.write("\n")
        if a.stats_file:
            with open(a.stats_file, "w") as f:
                json.dump({"testbed": {k: rec.get(k) for k in (
                    "hosts", "racks", "spines", "rate_bps", "fabric_rate_bps",
                    "mtu", "queue_bytes", "dscp_prio", "ipv6",
                    "host_gro")},
                    "loss": rec["loss"],
                    "links": counters}, f, indent=1)
        if "sig" in flag:
            print(f"dlcp-testbed: stopped by "
                  f"{signal.Signals(flag['sig']).name}", file=sys.stderr)
            return 128 + flag["sig"]
        if failed is not None:
            who = "mpirun" if a.cmd == "mpirun" else f"rank {failed}"
            print(f"dlcp-testbed: failed: {who} "
                  f"{launch.describe(status)}", file=sys.stderr)
            return status if status > 0 else 128 - status
        return 0
    finally:
        if made is not None:
            remove_or_warn(made["id"])


def cmd_set(a):
    rec = state.load(a.id)
    t = topology_of(rec)
    try:
        sets = loss_settings(t, rec, a)
    except ValueError as e:
        die(str(e), 2)
    bpf.configure(rec["attached"], sets)
    rec["loss"] = {k: v[0] for k, v in sets.items()}
    rec["ecn_k"] = a.ecn_k
    state.save(rec)
    return 0


def cmd_stats(a):
    rec = state.load(a.id)
    c = snapshot(topology_of(rec), rec)
    if a.json:
        json.dump(c, sys.stdout, indent=1)
        print()
    else:
        print_table(c, sys.stdout)
    return 0


def cmd_list(_):
    for i in state.known_ids():
        r = state.record_or_none(i)
        if r is None:
            print(f"{i}  (no record: leftover)")
            continue
        how = ("up" if r.get("owner") is None else
               f"run by pid {r['owner']['pid']}" +
               ("" if state.owner_alive(r["owner"]) else " (gone: stale)"))
        agg = (f", aggregation switch {r['agg_switch']}" +
               (f" ({trees_text(r['agg_trees'])})" if r.get("agg_trees") else "")
               if r.get("agg_switch") else "")
        print(f"{i}  {r['hosts']} hosts, {r['racks']} racks, {r['spines']} "
              f"spines, {r['rate_bps'] / 1e9:g} Gbit/s, MTU {r['mtu']}"
              f"{', IPv6' if r.get('ipv6') else ''}"
              f"{', host GRO' if r.get('host_gro') else ''}{agg}, "
              f"{how}")
    return 0


def cmd_down(a):
    if not (a.ids or a.stale or a.all):
        die("down: name the testbeds (ID...), or --stale, or --all", 2)
    ids = set(a.ids)
    for i in a.ids:
        if i not in state.known_ids():
            die(f"no testbed '{i}' (see dlcp-testbed list)")
    known = state.known_ids()
    if a.all:
        ids |= set(known)
    if a.stale:
        ids |= {i for i in known if state.is_stale(i)}
    ok = all([remove_or_warn(i) for i in sorted(ids)])
    return 0 if ok else 1


def main(args=None):
    a = parser().parse_args(args)
    if os.geteuid() != 0:
        die("must run as root: namespaces, tc and BPF need CAP_NET_ADMIN "
            "and CAP_SYS_ADMIN (try: sudo dlcp-testbed ...)", NOT_ROOT)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        die(f"missing {', '.join(missing)} (make deps installs them)")
    cmd = {"up": cmd_up, "run": cmd_run, "mpirun": cmd_run, "set": cmd_set, "stats": cmd_stats,
           "list": cmd_list, "down": cmd_down}[a.cmd]
    try:
        return cmd(a)
    except ValueError as e:
        die(str(e), 2)
    except system.CommandError as e:
        die(str(e))
    except (Interrupted, KeyboardInterrupt) as e:
        die(f"interrupted ({e}); the testbed was removed", 130)
