#!/usr/bin/python3
"""bench-testbed.py BUILD_DIR: dlcp, Gloo and Open MPI all-reduce on the same
emulated cluster (tools/dlcp-testbed), taking turns.

For each profile (1 Gbit/s MTU 1500, 10 Gbit/s MTU 9000) one testbed of 4
hosts in one rack is made; for each random loss rate (0, 1 %, 0.1 %,
0.01 %, in that order, set with `dlcp-testbed set --loss`, i.e. at the
last switch port before each host) and each profile the implementations
run in turn, in rounds whose order rotates, so machine drift hits all of
them alike:

  dlcp       dlcp-bench, AUTO algorithm, loss bound p = 0 (exact), checked
  dlcp_pB    the same with loss bound B (BENCH_TESTBED_BOUND, default 0.01)
  gloo       bench/peers/gloo_allreduce, ring_chunked over gloo's TCP
  mpi        bench/peers/mpi_allreduce under `dlcp-testbed mpirun`
             (MPI_Allreduce, btl tcp between the namespaces)

Sizes: 64 KiB (200 timed iterations: an all-reduce whose transfers are
eager, where a TCP peer's 200 ms retransmission timeout weighs most),
4 MiB (50) and 64 MiB (10), split over 2 rounds; issue 14's targets are
read from the 4 MiB and 64 MiB cells.
Per cell the per-iteration times of all rounds are pooled (each time is
the slowest rank's) for p50, p90 (nearest rank) and max; wire efficiency
is busbw / link rate at the median (busbw = size * 2(n-1)/n / time);
delivered is dlcp's mean delivered fraction (TCP peers deliver all);
#wrong counts wrong elements in each run's checked last iteration.  For
dlcp's cells the report also sets the slowest tenth of the iterations
beside the middle half with dlcp-bench's per-iteration counters (the
peers' ACK hold, retransmissions, window timeouts): whether a tail
follows the network's losses or the hosts' scheduling.

Writes docs/performance-testbed.md and docs/performance-testbed.png (or,
in quick mode, the same two files under BUILD_DIR/bench-testbed/), and
keeps every raw JSON file and per-run link counters under
BUILD_DIR/bench-testbed/raw/.  Exits 1 if a run failed or a result was
wrong (the report still gets written).

Environment:
  BENCH_TESTBED_QUICK=1     1 round, 64 KiB x 20, 4 MiB x 10 and 64 MiB x 2,
                            loss 0 and 1 % only: a smoke test in a few
                            minutes
  BENCH_TESTBED_PROFILES    comma list of 1g, 10g (default both)
  BENCH_TESTBED_LOSS        comma list of loss rates, run in this order
                            (default 0,0.01,0.001,0.0001)
  BENCH_TESTBED_BOUND       dlcp's loss bound for the second dlcp row
  BENCH_TESTBED_IMPLS       subset of dlcp,dlcp_p,gloo,mpi
  BENCH_TESTBED_SIZES       subset of 64K,4M,64M
  BENCH_TESTBED_ROUNDS      rounds per cell (default 2, quick 1): a mean
                            that a few TCP timeouts move (Gloo's at 1 %
                            loss) needs 10-20 rounds to settle
  BENCH_TESTBED_TIMEOUT     seconds per run before it is stopped (600)
  BENCH_TESTBED_REPORT_ONLY=1  no runs: the report from the raw files of
                            the last (possibly interrupted) run
  BENCH_TESTBED_HOST_GRO=1  GRO on at the hosts' own interfaces
                            (`dlcp-testbed up --host-gro`, as real NICs)
  BENCH_TESTBED_NOTE        a paragraph added to the report as is
"""

import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "scripts", "results"))
import common  # noqa: E402  (build_peers)

TESTBED = os.path.join(HERE, "tools", "dlcp-testbed")
HOSTS = 4
KIB = 1 << 10
MIB = 1 << 20
PROFILES = {"1g": {"rate": "1gbit", "bps": 1e9, "mtu": 1500,
                   "label": "1 Gbit/s, MTU 1500"},
            "10g": {"rate": "10gbit", "bps": 1e10, "mtu": 9000,
                    "label": "10 Gbit/s, MTU 9000"}}


def log(msg):
    print(f"bench-testbed: {msg}", file=sys.stderr, flush=True)


def env_list(name, default):
    return [x for x in os.environ.get(name, default).split(",") if x]


class Bench:
    def __init__(self, build):
        self.build = build
        self.quick = os.environ.get("BENCH_TESTBED_QUICK", "") not in ("", "0")
        self.bound = float(os.environ.get("BENCH_TESTBED_BOUND", "0.01"))
        self.host_gro = os.environ.get("BENCH_TESTBED_HOST_GRO",
                                       "") not in ("", "0")
        self.timeout = float(os.environ.get("BENCH_TESTBED_TIMEOUT", "600"))
        self.profiles = env_list("BENCH_TESTBED_PROFILES", "1g,10g")
        self.losses = [float(x) for x in env_list(
            "BENCH_TESTBED_LOSS", "0,0.01" if self.quick else
            "0,0.01,0.001,0.0001")]
        self.impls = env_list("BENCH_TESTBED_IMPLS", "dlcp,dlcp_p,gloo,mpi")
        for p in self.profiles:
            if p not in PROFILES:
                sys.exit(f"bench-testbed: unknown profile '{p}' (1g, 10g)")
        for i in self.impls:
            if i not in ("dlcp", "dlcp_p", "gloo", "mpi"):
                sys.exit(f"bench-testbed: unknown implementation '{i}'")
        rounds = os.environ.get("BENCH_TESTBED_ROUNDS",
                                "1" if self.quick else "2")
        if not rounds.isdigit() or not 1 <= int(rounds) <= 1000:
            sys.exit(f"bench-testbed: BENCH_TESTBED_ROUNDS '{rounds}': "
                     "expected a count of 1 to 1000")
        self.rounds = int(rounds)
        self.report_only = os.environ.get("BENCH_TESTBED_REPORT_ONLY",
                                          "") not in ("", "0")
        self.cells = {}  # (profile, loss, bytes, impl) -> dict
        self.failures = []
        self.interrupted = []  # runs of a cut-short run, left out
        # (size, timed iterations per round, warm-up per run)
        self.sizes = ([(64 * KIB, 20, 2), (4 * MIB, 10, 2), (64 * MIB, 2, 1)]
                      if self.quick else
                      [(64 * KIB, 100, 5), (4 * MIB, 25, 3), (64 * MIB, 5, 1)])
        keep = env_list("BENCH_TESTBED_SIZES", "64K,4M,64M")
        for k in keep:
            if k not in ("64K", "4M", "64M"):
                sys.exit(f"bench-testbed: unknown size '{k}' (64K, 4M, 64M)")
        self.sizes = [s for s in self.sizes if short_size(s[0]) in keep]
        if not self.sizes:
            sys.exit("bench-testbed: BENCH_TESTBED_SIZES names no size "
                     "(64K, 4M, 64M)")
        self.outdir = os.path.join(build, "bench-testbed")
        self.raw = os.path.join(self.outdir, "raw")
        self.commit = head_commit()  # of the tree the runs measure
        # Before the first run: what else the machine was doing.
        self.load_before = open("/proc/loadavg").read().split()[:3]
        if self.report_only:
            self.rounds = 0
            return
        shutil.rmtree(self.raw, ignore_errors=True)
        os.makedirs(self.raw)
        self.dlcp_bench = os.path.join(build, "bin", "dlcp-bench")
        if not os.access(self.dlcp_bench, os.X_OK):
            sys.exit(f"bench-testbed: {self.dlcp_bench} missing (make build)")
        self.peers = common.build_peers(build, log)

    def name(self, impl):
        return f"dlcp_p{self.bound:g}" if impl == "dlcp_p" else impl

    def command(self, tb, impl, size, iters, warmup, out):
        s = str(size)
        size_args = ["-b", s, "-e", s, "-n", str(iters), "-w", str(warmup)]
        if impl in ("dlcp", "dlcp_p"):
            p = self.bound if impl == "dlcp_p" else 0
            return (["run", "--id", tb, "--", self.dlcp_bench] + size_args +
                    ["-p", f"{p:g}", "-c", "1", "-J", out], None)
        if impl == "gloo":
            store = tempfile.mkdtemp(prefix="dlcp-gloo-store.")
            return (["run", "--id", tb, "--", self.peers["gloo_allreduce"],
                     "--store", store, "--iface", "eth0", "-a",
                     "ring_chunked", "--json", out] + size_args, store)
        return (["mpirun", "--id", tb, "--", self.peers["mpi_allreduce"],
                 "--json", out] + size_args, None)

    def run_one(self, tb, profile, loss, impl, size, iters, warmup, rnd):
        tag = f"{profile}-loss{loss:g}-{size // KIB}K-{self.name(impl)}-r{rnd}"
        out = os.path.join(self.raw, tag + ".json")
        stats = os.path.join(self.raw, tag + ".links.json")
        argv, store = self.command(tb, impl, size, iters, warmup, out)
        argv = [TESTBED, argv[0], "--stats", "none", "--stats-file",
                stats] + argv[1:]
        logf = open(os.path.join(self.raw, tag + ".log"), "w")
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)  # dlcp-testbed stops the ranks
            rc = p.wait()
            rc = rc or 124
        finally:
            logf.close()
            if store:
                shutil.rmtree(store, ignore_errors=True)
        log(f"{tag}: exit {rc} after {time.monotonic() - t0:.0f} s")
        with open(os.path.join(self.raw, tag + ".rc"), "w") as f:
            f.write(f"{rc}\n")
        # The commit and the machine's load as of the last run, for a
        # report rebuilt later (BENCH_TESTBED_REPORT_ONLY).
        with open(os.path.join(self.raw, "run.json"), "w") as f:
            json.dump({"commit": self.commit, "host_gro": self.host_gro,
                       "loadavg_before": self.load_before, "loadavg":
                       open("/proc/loadavg").read().split()[:3]}, f)
        self.absorb(profile, loss, size, impl, tag, rc)

    def absorb(self, profile, loss, size, impl, tag, rc):
        """Adds run |tag|'s raw files (exit status |rc|) to its cell."""
        out = os.path.join(self.raw, tag + ".json")
        stats = os.path.join(self.raw, tag + ".links.json")
        cell = self.cells.setdefault((profile, loss, size, impl), {
            "times": [], "wrong": 0, "delivered": [], "failed": [],
            "lost": 0, "queue": 0, "marked": 0, "iterations": []})
        rows = []
        if os.path.exists(out):
            with open(out) as f:
                rows = [json.loads(line) for line in f if line.strip()]
        if rc != 0 or not rows:
            cell["failed"].append(f"{tag}: exit {rc} (log {tag}.log)")
            self.failures.append(cell["failed"][-1])
        for r in rows:
            cell["times"] += r["times_us"]
            it = r.get("iterations")  # dlcp-bench's, per iteration
            if it:
                cell["iterations"] += zip(
                    r["times_us"], it["ack_hold_us"], it["retransmissions"],
                    it["window_timeouts"], it["runq_wait_us"])
            cell["wrong"] += max(r["wrong"], 0)
            cell["delivered"].append(r["delivered"])
        if rows and any(r["wrong"] != 0 for r in rows):
            self.failures.append(f"{tag}: {cell['wrong']} wrong elements")
        if os.path.exists(stats):
            with open(stats) as f:
                links = json.load(f)["links"].values()
            cell["lost"] += sum(x["lost"] for x in links)
            cell["queue"] += sum(x["queue_drops"] for x in links)
            cell["marked"] += sum(x["marked"] for x in links)

    def cell_runs(self, tb, profile, loss):
        subprocess.run([TESTBED, "set", tb, "--loss", f"{loss:g}"],
                       check=True)
        for rnd in range(self.rounds):
            for size, iters, warmup in self.sizes:
                k = rnd % len(self.impls)
                for impl in self.impls[k:] + self.impls[:k]:
                    self.run_one(tb, profile, loss, impl, size, iters,
                                 warmup, rnd)

    def load_raw(self):
        """Rebuilds the cells from the raw files of an earlier (possibly
        interrupted) run instead of running (BENCH_TESTBED_REPORT_ONLY)."""
        pat = re.compile(r"^(1g|10g)-loss([0-9.e-]+)-(\d+)([KM])-"
                         r"(dlcp_p[0-9.e-]+|dlcp|gloo|mpi)-r(\d+)\.log$")
        stamps, keys = [], set()
        for name in sorted(os.listdir(self.raw)):
            m = pat.match(name)
            if not m:
                continue
            tag = name[:-4]
            profile, loss = m.group(1), float(m.group(2))
            size = int(m.group(3)) * (KIB if m.group(4) == "K" else MIB)
            impl = m.group(5)
            impl = "dlcp_p" if impl.startswith("dlcp_p") else impl
            rc_path = os.path.join(self.raw, tag + ".rc")
            if not os.path.exists(rc_path):
                self.interrupted.append(tag)  # still running when cut
                continue
            rc = int(open(rc_path).read())
            self.absorb(profile, loss, size, impl, tag, rc)
            self.rounds = max(self.rounds, int(m.group(6)) + 1)
            keys.add((profile, loss))
            stamps.append(os.path.getmtime(os.path.join(self.raw, name)))
        if not stamps:
            sys.exit(f"bench-testbed: no raw results in {self.raw}")
        self.profiles = [p for p in PROFILES if any(k[0] == p for k in keys)]
        self.losses = sorted({k[1] for k in keys})
        utc = datetime.timezone.utc
        self.started = datetime.datetime.fromtimestamp(min(stamps), utc)
        self.finished = datetime.datetime.fromtimestamp(max(stamps), utc)

    def run(self):
        """Loss rates in the order given (the most telling first, so a
        run cut short still has them), both profiles at each, one testbed
        per profile for the whole run."""
        started = datetime.datetime.now(datetime.timezone.utc)
        tbs = {}
        try:
            for profile in self.profiles:
                pr = PROFILES[profile]
                tbs[profile] = subprocess.run(
                    [TESTBED, "up", "-n", str(HOSTS), "--rate", pr["rate"],
                     "--mtu", str(pr["mtu"])] +
                    (["--host-gro"] if self.host_gro else []), check=True,
                    capture_output=True, text=True).stdout.strip()
                log(f"profile {pr['label']}: testbed {tbs[profile]}")
            for loss in self.losses:
                for profile in self.profiles:
                    self.cell_runs(tbs[profile], profile, loss)
        finally:
            for tb in tbs.values():
                subprocess.run([TESTBED, "down", tb])
        self.losses.sort()
        self.finished = datetime.datetime.now(datetime.timezone.utc)
        self.started = started
        with open(os.path.join(self.outdir, "results.json"), "w") as f:
            json.dump([{"profile": k[0], "loss": k[1], "bytes": k[2],
                        "impl": self.name(k[3]), **v}
                       for k, v in self.cells.items()], f)


def summary(cell):
    t = sorted(cell["times"])
    if not t:
        return None
    n = len(t)
    return {"n": n, "p50": t[n // 2] / 1e3,
            "p90": t[max(0, (9 * n + 9) // 10 - 1)] / 1e3, "max": t[-1] / 1e3,
            "mean": sum(t) / n / 1e3,
            "delivered": (sum(cell["delivered"]) / len(cell["delivered"])
                          if cell["delivered"] else 1.0)}


def pct(loss):
    return f"{loss * 100:g} %"


def size_label(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def short_size(size):
    return f"{size // MIB}M" if size >= MIB else f"{size // KIB}K"


def mean_ratio_ci(num, den, resamples=2000):
    """The 90 % bootstrap interval of mean(num) / mean(den), each cell's
    iterations resampled with replacement (seeded: the report is the same
    for the same raw files)."""
    rng = random.Random(1)
    r = sorted(sum(rng.choices(num, k=len(num))) / len(num) /
               (sum(rng.choices(den, k=len(den))) / len(den))
               for _ in range(resamples))
    return r[resamples // 20], r[resamples - resamples // 20 - 1]


def head_commit():
    return subprocess.run(["git", "-C", HERE, "rev-parse", "--short",
                           "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def targets(b):
    """Issue 14's testbed targets, each figure beside its target, from the
    cells measured (an empty list when a target's cells were not)."""
    def cell(profile, loss, size, impl):
        c = b.cells.get((profile, loss, size, impl))
        return summary(c) if c else None

    out = []
    sizes = [size for size, _, _ in b.sizes if size >= MIB]  # the issue's
    cells = [(p, size) for p in b.profiles for size in sizes]
    label = {p: PROFILES[p]["label"].split(",")[0] for p in b.profiles}
    ratios = []
    for p, size in cells:
        d, g = cell(p, 0.0, size, "dlcp"), cell(p, 0.0, size, "gloo")
        if d and g:
            ratios.append(f"{label[p]} {size_label(size)} "
                          f"{d['p50'] / g['p50']:.2f}x")
    if ratios:
        out.append("- 0 % loss, dlcp's median over Gloo's (target "
                   "≤ 1.05x): " + ", ".join(ratios) + ".")
    ratios = []
    for size in sizes:
        d, g = cell("10g", 0.01, size, "dlcp"), cell("10g", 0.01, size, "gloo")
        if d and g:
            lo, hi = mean_ratio_ci(b.cells[("10g", 0.01, size, "gloo")]["times"],
                                   b.cells[("10g", 0.01, size, "dlcp")]["times"])
            ratios.append(f"{size_label(size)} {d['mean']:,.1f} ms against "
                          f"{g['mean']:,.1f} ({g['mean'] / d['mean']:.2f}x, "
                          f"{lo:.2f}-{hi:.2f}x; n = {d['n']} and {g['n']})")
    if ratios:
        out.append("- 1 % loss at 10 Gbit/s, dlcp's mean against Gloo's "
                   "(target: 1.5x faster), with the ratio's 90 % bootstrap "
                   "interval over the iterations (a few TCP timeouts make "
                   "Gloo's mean, so few iterations leave it wide): " +
                   "; ".join(ratios) + ".")
    ratios = []
    bounded = b.name("dlcp_p")
    for p, size in cells:
        base = cell(p, 0.0, size, "dlcp_p")
        lossy = cell(p, 0.01, size, "dlcp_p")
        if base and lossy:
            ratios.append(
                f"{label[p]} {size_label(size)} {lossy['p90'] / base['p50']:.2f}x"
                f" / {lossy['max'] / base['p50']:.2f}x (lossless: "
                f"{base['p90'] / base['p50']:.2f}x / "
                f"{base['max'] / base['p50']:.2f}x)")
    if ratios:
        out.append(f"- 1 % loss, {bounded}: p90 / max over its own lossless "
                   f"median (target ≤ 1.2x), and the lossless cell's own "
                   f"p90 / max beside it: " + "; ".join(ratios) + ".")
    small = []
    for p in b.profiles:
        for size in (size for size, _, _ in b.sizes if size < MIB):
            row = [(impl, cell(p, 0.01, size, impl)) for impl in b.impls]
            row = [f"{b.name(impl)} {s['p90']:,.1f} / {s['max']:,.1f}"
                   for impl, s in row if s]
            if row:
                small.append(f"{label[p]} {size_label(size)}: " +
                             ", ".join(row))
    if small:
        out.append("- Not a target of the issue: at 1 % loss, p90 / max in "
                   "ms of the eager size, " + "; ".join(small) + ".")
    if out:
        out = ["## Against issue 14's targets", ""] + out + [""]
    return out


def slow_iterations(b):
    """What dlcp's transport did in its slowest iterations against its
    typical ones, from dlcp-bench's per-iteration counters (summed over
    the ranks): a tail that follows the peers' ACK hold or the ranks'
    run-queue wait is the hosts' scheduling, one that follows
    retransmissions or window timeouts is the network's or the
    protocol's."""
    rows = []
    for (profile, loss, size, impl), cell in sorted(b.cells.items()):
        its = sorted(cell["iterations"])
        n = len(its)
        if n < 10:
            continue
        middle, slowest = its[n // 4:3 * n // 4], its[-max(1, n // 10):]

        def mean(group, k, scale=1.0):
            return sum(i[k] for i in group) / len(group) * scale
        figures = " | ".join(
            f"{mean(middle, k, sc):,.1f} / {mean(slowest, k, sc):,.1f}"
            for k, sc in ((0, 1e-3), (1, 1.0), (4, 1e-3), (2, 1.0),
                          (3, 1.0)))
        rows.append(f"| {PROFILES[profile]['label']}, {size_label(size)} | "
                    f"{pct(loss)} | {b.name(impl)} | {n} | {figures} |")
    if not rows:
        return []
    return ["## dlcp's slowest iterations", "",
            "Per iteration, summed over the ranks (dlcp-bench's "
            "`iterations`): the peers' mean ACK hold (how long a receiving "
            "host held the packets its ACKs answer, from their arrival to "
            "the ACK: its process waiting to run or busy, not the "
            "network), how long the ranks' threads waited for a CPU while "
            "ready to run (the kernel's schedstat: the ranks, the emulated "
            "links' kernel work and the machine's neighbours share its "
            "cores), data retransmissions and send windows that timed "
            "out; the middle half of a cell's iterations by time against "
            "its slowest tenth.  A slow tail with more ACK hold or "
            "run-queue wait and no more retransmissions is the hosts' CPU, "
            "not loss.", "",
            "| cell | loss | implementation | n | time ms | ACK hold us | "
            "run-queue wait ms | retransmissions | window timeouts |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|"] + rows + [""]


def write_report(b, md_path, png_path):
    lines = []
    cmd = ("BENCH_TESTBED_QUICK=1 make bench-testbed" if b.quick
           else "make bench-testbed")
    try:
        with open(os.path.join(b.raw, "run.json")) as f:
            run = json.load(f)
        commit, load = run["commit"], run["loadavg"]
        before = run.get("loadavg_before")
        host_gro = run.get("host_gro", False)
    except (OSError, ValueError, KeyError):
        commit, load = head_commit(), open("/proc/loadavg").read().split()[:3]
        before, host_gro = None, b.host_gro
    gro_text = ("GRO on at the hosts' own interfaces (`--host-gro`), "
                if host_gro else "")
    load_text = (f"load average {' '.join(before)} before the run and "
                 f"{' '.join(load)} when it ended" if before else
                 f"load average {' '.join(load)} when the run ended")
    lines += [
        "# All-reduce on the emulated testbed: dlcp, Gloo and Open MPI",
        "",
        f"Produced by `{cmd}` (scripts/bench-testbed.py) on "
        f"{b.started:%Y-%m-%d}, {b.started:%H:%M}–{b.finished:%H:%M} UTC, "
        f"commit {commit}: {HOSTS} hosts (one rank each) in one rack of "
        f"`dlcp-testbed` (docs/testbed.md), TBF on every link direction, "
        f"{gro_text}"
        f"queue 512 KiB, random loss at the switch port towards each host "
        f"(so every packet meets one draw).  The implementations took "
        f"turns in {b.rounds} round(s) per cell, the order rotating; each "
        f"cell pools its rounds' timed iterations (column n); a time is "
        f"the slowest rank's.",
        "",
        f"**The machine is small and noisy**: {os.cpu_count()} cores, "
        f"a VM whose neighbours share its caches and memory bandwidth "
        f"({load_text}: four ranks and their links load both cores by "
        f"themselves); every emulated link is kernel work on the same "
        f"cores as the ranks, so absolute times, especially at 10 Gbit/s, "
        f"are bounded by CPU as much as by the emulated links.  Compare "
        f"implementations within a cell, not across runs.",
        "",
        *([os.environ["BENCH_TESTBED_NOTE"], ""]
          if os.environ.get("BENCH_TESTBED_NOTE") else []),
        "Columns: p50 / p90 / max of the per-iteration time (ms); wire = "
        "busbw at p50 / link rate (busbw = size × 2(n−1)/n / time); "
        "delivered = mean delivered fraction (dlcp with a loss bound may "
        "give up data; TCP delivers all); #wrong = wrong elements in the "
        "checked iterations; drops = packets the links dropped during the "
        "cell's runs (random loss / queue overflow).",
        ""]
    lines += targets(b)
    for profile in b.profiles:
        pr = PROFILES[profile]
        for size, _, _ in b.sizes:
            ideal = size * 2 * (HOSTS - 1) / HOSTS * 8 / pr["bps"] * 1e3
            lines += [f"## {pr['label']}, {size_label(size)}", "",
                      f"At the link rate an all-reduce takes {ideal:,.1f} ms "
                      f"(wire = 100 %).", "",
                      "| loss | implementation | n | p50 ms | p90 ms | max ms | "
                      "wire | delivered | #wrong | drops (loss/queue) |",
                      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for loss in b.losses:
                for impl in b.impls:
                    cell = b.cells.get((profile, loss, size, impl))
                    if cell is None:
                        lines.append(f"| {pct(loss)} | {b.name(impl)} | 0 | "
                                     f"not measured | | | | | | |")
                        continue
                    s = summary(cell)
                    name = b.name(impl)
                    drops = f"{cell['lost']}/{cell['queue']}"
                    if s is None:
                        lines.append(f"| {pct(loss)} | {name} | 0 | failed "
                                     f"| | | | | | {drops} |")
                        continue
                    busbw = size * 2 * (HOSTS - 1) / HOSTS / (s["p50"] / 1e3)
                    wire = busbw * 8 / pr["bps"]
                    note = " (a run failed)" if cell["failed"] else ""
                    lines.append(
                        f"| {pct(loss)} | {name}{note} | {s['n']} | "
                        f"{s['p50']:,.1f} | "
                        f"{s['p90']:,.1f} | {s['max']:,.1f} | "
                        f"{wire * 100:.0f} % | {s['delivered'] * 100:.2f} % | "
                        f"{cell['wrong']} | {drops} |")
            lines.append("")
    lines += slow_iterations(b)
    if b.interrupted:
        lines += ["## Runs cut short", "",
                  "The run was stopped during these (left out of the "
                  "table); cells marked *not measured* were never "
                  "reached:", ""] + [f"- {t}" for t in b.interrupted] + [""]
    if b.failures:
        lines += ["## Failures", ""] + [f"- {f}" for f in b.failures] + [""]
    lines += [f"![median and p90 against loss]({os.path.basename(png_path)})",
              "", "Raw per-iteration times, logs and per-run link counters: "
              "`build/bench-testbed/raw/` of the run (not committed).", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(lines))
    plot(b, png_path)


def plot(b, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(b.profiles), len(b.sizes), squeeze=False,
                             figsize=(5.5 * len(b.sizes),
                                      4 * len(b.profiles)))
    xs = list(range(len(b.losses)))
    for i, profile in enumerate(b.profiles):
        for j, (size, _, _) in enumerate(b.sizes):
            ax = axes[i][j]
            for k, impl in enumerate(b.impls):
                med, p90 = [], []
                for loss in b.losses:
                    c = b.cells.get((profile, loss, size, impl))
                    s = summary(c) if c else None
                    med.append(s["p50"] if s else float("nan"))
                    p90.append(s["p90"] if s else float("nan"))
                color = f"C{k}"
                ax.plot(xs, med, "-o", color=color,
                        label=f"{b.name(impl)} median")
                ax.plot(xs, p90, "--", marker="x", color=color,
                        label=f"{b.name(impl)} p90")
            wire_ms = size * 2 * (HOSTS - 1) / HOSTS * 8 / \
                PROFILES[profile]["bps"] * 1e3
            ax.axhline(wire_ms, color="gray", linestyle=":",
                       label="link rate (busbw = line)")
            ax.set_xticks(xs, [pct(x) for x in b.losses])
            ax.set_yscale("log")
            ax.set_xlabel("random loss")
            ax.set_ylabel("time per all-reduce (ms)")
            ax.set_title(f"{PROFILES[profile]['label']}, {size_label(size)}")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{HOSTS}-host all-reduce on dlcp-testbed "
                 f"({b.started:%Y-%m-%d})")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main():
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: bench-testbed.py BUILD_DIR (--help: what it runs "
                 "and its environment variables)")
    if not os.path.isdir(sys.argv[1]):
        sys.exit(f"bench-testbed: {sys.argv[1]}: no such build directory "
                 "(make build)")
    if os.geteuid() != 0:
        sys.exit("bench-testbed: must run as root (dlcp-testbed makes "
                 "network namespaces)")
    b = Bench(os.path.abspath(sys.argv[1]))
    if b.report_only:
        b.load_raw()
    else:
        b.run()
    if b.quick or os.environ.get("BENCH_TESTBED_OUT"):
        out = os.environ.get("BENCH_TESTBED_OUT", b.outdir)
        os.makedirs(out, exist_ok=True)
        md = os.path.join(out, "performance-testbed.md")
    else:
        md = os.path.join(HERE, "docs", "performance-testbed.md")
    write_report(b, md, md[:-3] + ".png")
    log(f"wrote {md} and {md[:-3]}.png")
    for f in b.failures:
        log(f"FAILED: {f}")
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
