#!/usr/bin/python3
"""dlcp-testbed always cleans up after itself and only after itself:
  1. two testbeds at once get different ids and namespaces;
  2. Ctrl-C (SIGINT) during 'run' stops the ranks and removes the testbed;
  3. a 'run' killed outright (SIGKILL) leaves a stale testbed that
     'down --stale' removes, ranks included, while a live 'up' testbed
     survives it;
  4. a rank that fails is named and its status returned.
Each removal must leave no namespace, record, BPF program or map, or veth."""

import os
import signal
import subprocess
import sys
import time

import testbed_support as ts


def start_run(*cmd):
    """Starts 'dlcp-testbed run -n 2 -- CMD' and waits until its testbed is
    complete; returns (process, id, record)."""
    p = subprocess.Popen([ts.TESTBED, "run", "-n", "2", "--stats", "none",
                          "--"] + list(cmd), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ids = os.listdir(ts.STATE_DIR) if os.path.isdir(ts.STATE_DIR) else []
        for tb_id in ids:
            try:
                rec = ts.record(tb_id)
            except (OSError, ValueError):
                continue
            owner = rec.get("owner") or {}
            if owner.get("pid") == p.pid and "attached" in rec:
                return p, tb_id, rec
        time.sleep(0.05)
    p.kill()
    ts.fail("run did not make its testbed within 60 s")


def main():
    ts.require_root()
    veths = ts.root_veths()

    a = ts.testbed("up", "-n", "2").stdout.strip()
    b = ts.testbed("up", "-n", "2").stdout.strip()
    ts.check(a != b, f"two testbeds have different ids ({a}, {b})")
    ns_a = [n for n in os.listdir("/run/netns") if n.startswith(f"dlcptb-{a}-")]
    ts.check(len(ns_a) == 3, f"testbed {a} has 2 hosts and 1 switch")
    rec_b = ts.record(b)
    ts.testbed("down", b)
    ts.check_gone(b, *ts.bpf_ids(rec_b), veths)

    p, tb, rec = start_run("sleep", "60")
    time.sleep(0.5)  # the ranks are starting or started
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=30)
    ts.check(rc == 130, f"run stopped by SIGINT exits 130 (got {rc})")
    ts.check_gone(tb, *ts.bpf_ids(rec), veths)

    p, tb, rec = start_run("sleep", "60")
    time.sleep(0.5)
    p.kill()
    p.wait()
    listed = ts.testbed("list").stdout
    # Any dlcp-testbed up/run sweeps stale testbeds, so another user's
    # command may have removed it already.
    ts.check(f"{tb}  " not in listed or "(gone: stale)" in listed,
             f"a killed run's testbed {tb} is listed as stale")
    ts.testbed("down", "--stale")
    ts.check_gone(tb, *ts.bpf_ids(rec), veths)
    ts.check(os.path.isdir(os.path.join(ts.STATE_DIR, a)),
             f"down --stale left the 'up' testbed {a} alone")
    rec_a = ts.record(a)
    ts.testbed("down", a)
    ts.check_gone(a, *ts.bpf_ids(rec_a), veths)

    r = ts.testbed("run", "-n", "3", "--stats", "none", "--", "sh", "-c",
                   'echo hello; [ "$RANK" != 1 ] || { sleep 1; exit 7; }',
                   check=False)
    ts.check(r.returncode == 7, f"a failing rank's status is returned "
             f"(got {r.returncode})")
    ts.check("failed: rank 1 exited with status 7" in r.stderr,
             "the failing rank is named")
    ts.check("[rank 2] hello" in r.stdout, "output is prefixed by rank")


if __name__ == "__main__":
    sys.exit(main())
