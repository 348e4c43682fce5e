#!/usr/bin/python3
"""A rank whose network is cut in the middle of a run of all-reduces, on a
4-host testbed: its host's link drops everything in both directions
(`dlcp-testbed set --link-loss hN=100%`) while the process keeps running.
Every other rank must fail within the operation timeout + 1 s of the cut
naming the cut rank, and the job must end (no rank waits on the leaving
barrier or the rendezvous for longer).  Four runs, the cut moving from
host 1 to host 3 to host 0 (which also serves the rendezvous) to host 2,
ring and halving-doubling on 256 KiB, then 4-byte all-reduces, whose
iterations are as short as the barrier between them, so that the cut
often comes during a barrier: the cut rank then waits on a note, with
no transfer of its own to time out (a rank cut there once never failed).

usage: testbed_cut_test.py DLCP_BENCH"""

import os
import re
import subprocess
import sys
import threading
import time

import testbed_support as ts

TIMEOUT_MS = 2000
SLACK_S = 1.0


def run_and_cut(tb_id, dlcp_bench, cut, algo, size):
    """Starts an endless all-reduce loop on every host, cuts host |cut|'s
    link once every rank has run a few operations, and returns (cut time,
    {rank: (time, line)} of each rank's failure line, end time)."""
    env = dict(os.environ, DLCP_TIMEOUT_MS=str(TIMEOUT_MS))
    # The ranks ignore SIGTERM (inherited across exec), so that the first
    # rank to fail does not stop the others before they fail themselves.
    cmd = ["sh", "-c", 'trap "" TERM; exec "$@"', "sh", dlcp_bench,
           "-b", size, "-e", size, "-a", algo, "-n", "100000",
           "-w", "0", "-c", "0"]
    p = subprocess.Popen([ts.TESTBED, "run", "--id", tb_id, "--stats",
                          "none", "--grace-ms", "30000", "--"] + cmd,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
    lines = []

    def reader():
        for line in p.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(3)  # rendezvous and a few hundred all-reduces
    t_cut = time.monotonic()
    ts.testbed("set", tb_id, "--link-loss", f"h{cut}=100%")
    try:
        p.wait(timeout=TIMEOUT_MS / 1000 + 20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        t.join()
        # Which rank is still running: each rank's last lines (the flight
        # dumps of the others would fill a plain tail).
        last = []
        for r in range(4):
            mine = [f"{at - t_cut:+.2f} s {l}" for at, l in lines
                    if l.startswith(f"[rank {r}]")]
            last.append(f"rank {r}, {len(mine)} lines, the last:")
            last.extend("  " + l for l in mine[-4:])
        ts.fail(f"the job did not end within {TIMEOUT_MS / 1000 + 20:.0f} s "
                f"of cutting host {cut}:\n" + "\n".join(last))
    t_end = time.monotonic()
    t.join()
    ts.testbed("set", tb_id, "--link-loss", f"h{cut}=0")
    failures = {}
    for at, line in lines:
        m = re.match(r"\[rank (\d+)\].*dlcp-bench: (?:allreduce|barrier) "
                     r"failed: (.*)", line)
        if m and int(m.group(1)) not in failures:
            failures[int(m.group(1))] = (at, m.group(2))
    return t_cut, failures, t_end, lines


def main():
    ts.require_root()
    dlcp_bench = sys.argv[1]
    with ts.testbed_up("-n", "4", "--rate", "1gbit") as tb_id:
        for cut, algo, size in ((1, "ring", "256K"),
                                (3, "halving_doubling", "256K"),
                                (0, "ring", "256K"), (2, "auto", "4")):
            t_cut, failures, t_end, lines = run_and_cut(tb_id, dlcp_bench,
                                                        cut, algo, size)
            survivors = [r for r in range(4) if r != cut]
            detail = "\n".join(l for _, l in lines[-40:])
            for r in survivors:
                if r not in failures:
                    ts.fail(f"cut host {cut} ({algo}): rank {r} never "
                            f"reported a failure:\n{detail}")
                at, msg = failures[r]
                ts.check(f"rank {cut} (" in msg,
                         f"cut host {cut} ({algo}): rank {r} names rank "
                         f"{cut}: {msg}")
                ts.check(at - t_cut <= TIMEOUT_MS / 1000 + SLACK_S,
                         f"cut host {cut} ({algo}): rank {r} failed "
                         f"{at - t_cut:.2f} s after the cut (timeout "
                         f"{TIMEOUT_MS / 1000:.1f} s + {SLACK_S:.0f} s)")
            ts.check(t_end - t_cut <= TIMEOUT_MS / 1000 + 5,
                     f"cut host {cut} ({algo}): the job ended "
                     f"{t_end - t_cut:.2f} s after the cut")


if __name__ == "__main__":
    main()
