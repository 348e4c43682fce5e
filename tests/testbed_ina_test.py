#!/usr/bin/python3
"""In-network aggregation on the testbed: `dlcp-testbed up --agg-switch`
runs dlcp-switch on rack 0's switch and hands every rank DLCP_SWITCH; a
checked INA and RA-INA all-reduce across 4 hosts with 1 % random loss at
the switch ports is exact.  With --agg-chain on 2 racks, a daemon on each
rack's switch, rack 0's passing partial sums to rack 1's (CINA), and a
checked INA all-reduce with 1 % loss is exact too.  With --agg-trees 2 on
2 racks and 2 spines, a daemon on each rack's switch and each spine, the
racks' the leaves of a tree per spine: a checked INA all-reduce with 1 %
loss is exact, with and without PANAMA's window, and each spine summed
groups of both racks; the same again on an IPv6 testbed (--ipv6), every
daemon and job speaking IPv6.  The daemons go with the testbed: nothing of any is
left afterwards.  A daemon that cannot start is named, and --agg-chain
without two racks, --agg-trees with more trees than spines, are refused.
Last, without a testbed, in a network namespace of its own: a switch whose
path back to the ranks carries 1,500 bytes while theirs to it carries
loopback's 64 KiB (a host whose MTU exceeds the switch's) gets runs of
results longer than its MTU allows as GSO segments; it sends them
datagram by datagram, as IP fragments, says so once, and the all-reduce
is exact (the daemon used to exit on the refusal).

usage: testbed_ina_test.py DLCP_BENCH DLCP_SWITCH"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile

import testbed_support as ts


def bench(tb_id, dlcp_bench, algo, out, env=None):
    ts.testbed("run", "--id", tb_id, "--stats", "none", "--",
               dlcp_bench, "-a", algo, "-b", "1M", "-e", "1M", "-n", "4",
               "-w", "1", "-c", "1", "-J", out,
               env=dict(os.environ, **env) if env else None)
    with open(out) as f:
        return json.loads(f.readline())


def daemons(tb_id, racks=1, spines=0):
    """The pids of the dlcp-switch processes in testbed |tb_id|'s rack
    (and spine) namespaces (not another testbed's on the same machine)."""
    pids = []
    for ns in ([f"r{r}" for r in range(racks)] +
               [f"s{s}" for s in range(spines)]):
        ps = subprocess.run(["ip", "netns", "pids", f"dlcptb-{tb_id}-{ns}"],
                            capture_output=True, text=True)
        for pid in ps.stdout.split():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "dlcp-switch":
                        pids.append(pid)
            except OSError:
                pass
    return pids


def alive(pids):
    """Those of |pids| still running (an exited daemon that its parent,
    init here, has not reaped yet is a zombie, not running)."""
    running = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            running.append(p)
    return running


def check_trees(dlcp_bench, dlcp_switch, ipv6=False):
    """The trees as the module says; with |ipv6| on an IPv6 testbed, where
    the daemons and the jobs speak IPv6."""
    leaves = ("[fd00::fe]:9555,[fd00::1:fe]:9555" if ipv6 else
              "10.0.0.254:9555,10.0.1.254:9555")
    with ts.testbed_up("-n", "4", "--racks", "2", "--spines", "2",
                       "--loss", "1%", "--rate", "1gbit", "--agg-switch",
                       dlcp_switch, "--agg-trees", "2",
                       *(["--ipv6"] if ipv6 else [])) as tb_id:
        rec = ts.record(tb_id)
        ts.check(rec.get("agg_switch") == leaves and
                 rec.get("agg_trees") == 2,
                 f"the record names the leaves and the trees "
                 f"({rec.get('agg_switch')}, {rec.get('agg_trees')})")
        pids = daemons(tb_id, racks=2, spines=2)
        ts.check(len(pids) == 4, "a daemon on each rack's switch and spine")
        with tempfile.TemporaryDirectory() as d:
            for cc in ("none", "panama"):
                r = bench(tb_id, dlcp_bench, "ina",
                          os.path.join(d, f"trees-{cc}.json"),
                          {"DLCP_INA_CC": cc, "DLCP_INA_MIN_BYTES": "0"})
                ts.check(r["wrong"] == 0, f"trees, {cc}: every element exact")
                ts.check(r["delivered_min"] == 1.0,
                         f"trees, {cc}: everything delivered")
        spines = daemons(tb_id, spines=2)[-2:]
        for pid in spines:
            os.kill(int(pid), signal.SIGINT)
        for s in range(2):
            log = os.path.join(ts.STATE_DIR, tb_id, f"agg-switch-s{s}.log")
            text = ""
            for _ in range(100):
                with open(log) as f:
                    text = f.read()
                if "exit:" in text:
                    break
                subprocess.run(["sleep", "0.1"])
            m = re.search(r"exit: packets \d+ contrib (\d+) .* claims (\d+) ",
                          text)
            ts.check(not ipv6 or "listening on [::]:9555" in text,
                     f"spine {s}'s daemon listened on IPv6: {text[:200]}")
            ts.check(m is not None and int(m.group(2)) > 0 and
                     int(m.group(1)) >= 2 * int(m.group(2)),
                     f"spine {s} summed both racks' partial sums: "
                     f"{m.group(0) if m else text.strip()[-300:]}")
    ts.check(alive(pids) == [], "the daemons are gone with the testbed")


# The namespace of check_mtu_asymmetry: the ranks' address, 127.0.0.1,
# reached through a route of MTU 1,500, the switch at 127.0.0.2 through
# loopback's own.
MTU_SCRIPT = """
set -e
ip link set lo up
ip route replace local 127.0.0.1 dev lo table local src 127.0.0.1 \\
  mtu lock 1500
"$1" --bind 127.0.0.2 --port 7777 --mem 8m 2>"$3/switch.log" &
sw=$!
sleep 0.5
DLCP_SWITCH=127.0.0.2:7777 DLCP_TIMEOUT_MS=10000 "$(dirname "$2")/dlcp-run" \\
  -n 2 "$2" -a ina -b 4M -e 4M -n 4 -w 1 -c 1 -J "$3/ina.json" || rc=$?
kill -INT $sw
wait $sw || true
exit ${rc:-0}
"""


def check_mtu_asymmetry(dlcp_bench, dlcp_switch):
    with tempfile.TemporaryDirectory() as d:
        run = subprocess.run(["unshare", "-n", "sh", "-c", MTU_SCRIPT, "sh",
                              dlcp_switch, dlcp_bench, d],
                             capture_output=True, text=True, timeout=120)
        with open(os.path.join(d, "switch.log")) as f:
            log = f.read()
        ts.check(run.returncode == 0,
                 "asymmetric MTU: the all-reduce ran" +
                 (f" (rc {run.returncode}): {run.stderr.strip()[-300:]}\n"
                  f"{log[-300:]}" if run.returncode else ""))
        with open(os.path.join(d, "ina.json")) as f:
            r = json.loads(f.readline())
        ts.check(r["algo"] == "ina" and r["wrong"] == 0,
                 "asymmetric MTU: every element exact")
        ts.check("longer than the path's MTU allows" in log,
                 f"asymmetric MTU: the switch said so: {log[:300]}")
        ts.check("exit: packets" in log,
                 "asymmetric MTU: the switch ran to the end and stopped "
                 "with its counters")


def main():
    ts.require_root()
    dlcp_bench, dlcp_switch = sys.argv[1], sys.argv[2]
    check_mtu_asymmetry(dlcp_bench, dlcp_switch)
    with ts.testbed_up("-n", "4", "--loss", "1%", "--rate", "1gbit",
                       "--agg-switch", dlcp_switch) as tb_id:
        rec = ts.record(tb_id)
        ts.check(rec.get("agg_switch") == "10.0.0.254:9555",
                 f"the record names the switch ({rec.get('agg_switch')})")
        listed = ts.testbed("list").stdout
        ts.check("aggregation switch 10.0.0.254:9555" in listed,
                 "list shows the aggregation switch")
        with tempfile.TemporaryDirectory() as d:
            for algo in ("ina", "ra_ina"):
                r = bench(tb_id, dlcp_bench, algo,
                          os.path.join(d, algo + ".json"))
                ts.check(r["algo"] == algo, f"{algo}: ran as {r['algo']}")
                ts.check(r["wrong"] == 0, f"{algo}: every element exact")
                ts.check(r["delivered_min"] == 1.0,
                         f"{algo}: everything delivered")
        pids = daemons(tb_id)
        ts.check(len(pids) > 0, "the daemon runs while the testbed is up")
    ts.check(alive(pids) == [], "the daemon is gone with the testbed")
    chain = "10.0.0.254:9555,10.0.1.254:9555"
    with ts.testbed_up("-n", "4", "--racks", "2", "--loss", "1%", "--rate",
                       "1gbit", "--agg-switch", dlcp_switch,
                       "--agg-chain") as tb_id:
        rec = ts.record(tb_id)
        ts.check(rec.get("agg_switch") == chain,
                 f"the record names the chain ({rec.get('agg_switch')})")
        pids = daemons(tb_id, racks=2)
        ts.check(len(pids) == 2, "a daemon on each rack's switch")
        with tempfile.TemporaryDirectory() as d:
            r = bench(tb_id, dlcp_bench, "ina", os.path.join(d, "cina.json"))
            ts.check(r["wrong"] == 0, "CINA: every element exact")
            ts.check(r["delivered_min"] == 1.0, "CINA: everything delivered")
    ts.check(alive(pids) == [], "the daemons are gone with the testbed")
    check_trees(dlcp_bench, dlcp_switch)
    check_trees(dlcp_bench, dlcp_switch, ipv6=True)
    alone = ts.testbed("up", "-n", "2", "--agg-switch", dlcp_switch,
                       "--agg-chain", check=False)
    ts.check(alone.returncode == 2 and "--agg-chain" in alone.stderr,
             f"a chain of one rack is refused (rc {alone.returncode})")
    many = ts.testbed("up", "-n", "4", "--racks", "2", "--spines", "2",
                      "--agg-switch", dlcp_switch, "--agg-trees", "3",
                      check=False)
    ts.check(many.returncode == 2 and "--agg-trees 3" in many.stderr,
             f"more trees than spines are refused (rc {many.returncode})")
    bad = ts.testbed("up", "-n", "2", "--agg-switch", "/nonexistent",
                     check=False)
    ts.check(bad.returncode == 2 and "--agg-switch /nonexistent" in bad.stderr,
             f"a missing daemon is named (rc {bad.returncode}: "
             f"{bad.stderr.strip()})")


if __name__ == "__main__":
    main()
