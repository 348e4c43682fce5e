"""Where a testbed's record lives and how leftovers are found.

A testbed with id ID has namespaces named dlcptb-ID-<name> and a record
/run/dlcp-testbed/ID/state.json (plus the compiled filter).  A testbed made
by `run` belongs to that process (owner = pid and its start time): once the
owner is gone it is stale and any later dlcp-testbed command removes it.
One made by `up` has no owner and lives until `down ID`.
"""

import json
import os
import re
import secrets
import shutil
import time

from . import system

STATE_DIR = "/run/dlcp-testbed"
NS_PREFIX = "dlcptb-"
ID_RE = re.compile(r"^[0-9a-f]{6}$")


def new_id():
    while True:
        i = secrets.token_hex(3)
        if not os.path.exists(os.path.join(STATE_DIR, i)) and not any(
                ns.startswith(prefix(i)) for ns in system.list_namespaces()):
            return i


def prefix(tb_id):
    return f"{NS_PREFIX}{tb_id}-"


def dir_of(tb_id):
    return os.path.join(STATE_DIR, tb_id)


def _start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_token():
    return {"pid": os.getpid(), "start": _start_time(os.getpid())}


def owner_alive(owner):
    return owner is not None and _start_time(owner["pid"]) == owner["start"]


def save(rec):
    d = dir_of(rec["id"])
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(tmp, os.path.join(d, "state.json"))


def load(tb_id):
    if not ID_RE.match(tb_id):
        raise ValueError(f"'{tb_id}' is not a testbed id (6 hex digits; "
                         f"see dlcp-testbed list)")
    try:
        with open(os.path.join(dir_of(tb_id), "state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ValueError(f"no testbed '{tb_id}' (see dlcp-testbed list)")


def known_ids():
    """Ids with a record or with a namespace of ours."""
    ids = set()
    if os.path.isdir(STATE_DIR):
        ids |= {i for i in os.listdir(STATE_DIR) if ID_RE.match(i)}
    for ns in system.list_namespaces():
        m = re.match(rf"^{NS_PREFIX}([0-9a-f]{{6}})-", ns)
        if m:
            ids.add(m.group(1))
    return sorted(ids)


def record_or_none(tb_id):
    try:
        return load(tb_id)
    except (ValueError, json.JSONDecodeError):
        return None


def is_stale(tb_id):
    """True for a testbed whose `run` process is gone, or one with
    namespaces but no record (a crash while it was being made)."""
    rec = record_or_none(tb_id)
    if rec is None:
        return True
    return rec.get("owner") is not None and not owner_alive(rec["owner"])


def remove(tb_id):
    """Deletes every namespace of testbed |tb_id| and its record; returns
    the namespaces that could not be deleted."""
    mine = [ns for ns in system.list_namespaces()
            if ns.startswith(prefix(tb_id))]
    # Processes left in them (ranks of a run that was killed) would keep
    # the namespaces, their devices and filters alive after 'ip netns del'.
    system.kill_processes(mine)
    failed = system.destroy(mine)
    for _ in range(50):  # 'ip netns del' may race a process still exiting
        if not failed:
            break
        time.sleep(0.1)
        failed = system.destroy([ns for ns in system.list_namespaces()
                                 if ns.startswith(prefix(tb_id))])
    if not failed:
        system.remove_etc(prefix(tb_id))
        shutil.rmtree(dir_of(tb_id), ignore_errors=True)
    return failed
