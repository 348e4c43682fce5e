"""Shared by the tests/testbed_*_test.py integration tests: run
dlcp-testbed, skip when not root, and check that a testbed left nothing
behind (namespaces, its record, its BPF programs and maps, veths)."""

import contextlib
import json
import os
import subprocess
import sys
import time

SKIP = 77  # ctest SKIP_RETURN_CODE
HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.join(os.path.dirname(HERE), "tools", "dlcp-testbed")
STATE_DIR = "/run/dlcp-testbed"


def require_root():
    if os.geteuid() != 0:
        print("SKIP: dlcp-testbed needs root (network namespaces, tc, BPF)")
        sys.exit(SKIP)


def testbed(*args, check=True, env=None):
    """Runs dlcp-testbed ARGS; returns the CompletedProcess (text)."""
    p = subprocess.run([TESTBED] + list(args), capture_output=True,
                       text=True, env=env)
    if check and p.returncode != 0:
        fail(f"dlcp-testbed {' '.join(args)}: exit {p.returncode}\n"
             f"{p.stdout}\n{p.stderr}")
    return p


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print(f"ok: {msg}")


def record(tb_id):
    with open(os.path.join(STATE_DIR, tb_id, "state.json")) as f:
        return json.load(f)


def bpf_ids(rec):
    """Every BPF program and map id the testbed's filters hold."""
    progs = [a["prog"] for a in rec["attached"].values()]
    maps = [m for a in rec["attached"].values() for m in a["maps"].values()]
    return progs, maps


def root_veths():
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"],
                         capture_output=True, text=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


def bpf_alive(kind, ids):
    live = json.loads(subprocess.run(["bpftool", "-j", kind, "show"],
                                     capture_output=True, text=True).stdout
                      or "[]")
    have = {x["id"] for x in live}
    return [i for i in ids if i in have]


def namespaces(tb_id):
    """The network namespaces of testbed |tb_id|."""
    prefix = f"dlcptb-{tb_id}-"
    return sorted(ns for ns in os.listdir("/run/netns")
                  if ns.startswith(prefix))


def check_gone(tb_id, progs, maps, veths_before):
    """Asserts testbed |tb_id| left nothing: its namespaces, record, the
    BPF programs and maps it attached (freed asynchronously: waits up to
    5 s) and no new veth in the root namespace."""
    prefix = f"dlcptb-{tb_id}-"
    left = namespaces(tb_id) if os.path.isdir("/run/netns") else []
    check(left == [], f"no namespace {prefix}* left ({left})")
    etc = [d for d in os.listdir("/etc/netns")
           if d.startswith(prefix)] if os.path.isdir("/etc/netns") else []
    check(etc == [], f"no /etc/netns/{prefix}* left ({etc})")
    check(not os.path.exists(os.path.join(STATE_DIR, tb_id)),
          f"no record {STATE_DIR}/{tb_id} left")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (bpf_alive("prog", progs) or
                                           bpf_alive("map", maps)):
        time.sleep(0.1)
    check(bpf_alive("prog", progs) == [],
          f"none of the {len(progs)} BPF programs left")
    check(bpf_alive("map", maps) == [],
          f"none of the {len(maps)} BPF maps left")
    check(root_veths() == veths_before, "no veth left in the root namespace")


@contextlib.contextmanager
def testbed_up(*args):
    """`with testbed_up(ARGS) as tb_id:` brings a testbed up with ARGS,
    always takes it down after, and then checks it left nothing."""
    veths = root_veths()
    tb_id = testbed("up", *args).stdout.strip()
    progs, maps = bpf_ids(record(tb_id))
    try:
        yield tb_id
    finally:
        testbed("down", tb_id)
    check_gone(tb_id, progs, maps, veths)
