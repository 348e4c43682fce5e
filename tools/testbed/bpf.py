"""The link filter (link.bpf.c): build, attach, configure, read back.

Each link direction gets its own copy of the program and of its maps
(tc loads the object once per attachment), so a direction's
configuration and counters are the maps of the program attached there;
they disappear with the namespace that holds the device.
"""

import json
import os
import struct
import subprocess

from . import system

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "link.bpf.c")
PROG_NAME = "dlcptb_link"
STATS_FIELDS = ("packets", "bytes", "lost", "lost_bytes", "marked")


def compile_object(out):
    """Compiles link.bpf.c into |out| with clang -target bpf."""
    arch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True,
                          text=True).stdout.strip()
    argv = ["clang", "-O2", "-g", "-Wall", "-target", "bpf", "-c", SOURCE,
            "-o", out]
    if arch:
        argv[1:1] = [f"-I/usr/include/{arch}"]  # asm/types.h (multiarch)
    system.run(argv)


def attach(t, obj):
    """Attaches |obj| to every direction's filter point; returns
    {direction key: {"prog": id, "maps": {name: id}}}."""
    by_ns = {}
    for d in t.directions:
        by_ns.setdefault(d.filter.ns, []).append(d)
    found = {}
    for ns, dirs in by_ns.items():
        script = []
        for d in dirs:
            script.append(f"tc filter add dev {d.filter.dev} {d.hook} bpf "
                          f"direct-action object-file {obj} section tc")
        for d in dirs:
            script.append(f"tc -j filter show dev {d.filter.dev} {d.hook}")
            script.append("echo")
        text = system.in_ns(ns, "\n".join(script))
        shows = [s for s in text.splitlines() if s.strip()]
        if len(shows) != len(dirs):
            raise system.CommandError(f"{ns}: unexpected tc filter output")
        for d, show in zip(dirs, shows):
            ids = [f["options"]["prog"]["id"] for f in json.loads(show)
                   if "options" in f and "prog" in f["options"]]
            if len(ids) != 1:
                raise system.CommandError(
                    f"{ns}/{d.filter.dev} {d.hook}: expected one BPF "
                    f"program, found {len(ids)}")
            found[d.key] = {"prog": ids[0]}
    progs = {p["id"]: p for p in bpftool(["prog", "show"])}
    maps = {m["id"]: m for m in bpftool(["map", "show"])}
    for key, ent in found.items():
        p = progs.get(ent["prog"])
        if p is None or p.get("name") != PROG_NAME:
            raise system.CommandError(f"{key}: program {ent['prog']} vanished")
        ent["maps"] = {maps[m]["name"]: m for m in p.get("map_ids", [])
                       if m in maps}
        for need in ("dlcptb_cfg", "dlcptb_stats", "dlcptb_queue"):
            if need not in ent["maps"]:
                raise system.CommandError(f"{key}: map {need} missing")
    return found


def bpftool(args):
    return json.loads(system.run(["bpftool", "-j"] + args) or "[]")


def _hex(b):
    return " ".join(f"{x:02x}" for x in b)


def configure(attached, settings):
    """Writes each direction's configuration: |settings| maps a direction
    key to (loss probability, ECN phantom rate in bytes/s or 0, K bytes)."""
    lines = []
    for key, (loss, ecn_rate, ecn_k) in settings.items():
        thresh = min(round(loss * 2 ** 32), 2 ** 32)
        value = struct.pack("<QQQ", thresh, ecn_rate, ecn_k)
        lines.append(f"map update id {attached[key]['maps']['dlcptb_cfg']} "
                     f"key hex 00 00 00 00 value hex {_hex(value)}")
    if lines:
        system.run(["bpftool", "batch", "file", "-"],
                   stdin="\n".join(lines) + "\n")


def read_stats(attached):
    """{direction key: {field: count}} summed over CPUs."""
    out = {}
    for key, ent in attached.items():
        res = bpftool(["map", "lookup", "id", str(ent["maps"]["dlcptb_stats"]),
                       "key", "hex", "00", "00", "00", "00"])
        total = dict.fromkeys(STATS_FIELDS, 0)
        for cpu in res.get("values", []):
            raw = bytes(int(x, 16) for x in cpu["value"])
            for f, v in zip(STATS_FIELDS, struct.unpack("<5Q", raw)):
                total[f] += v
        out[key] = total
    return out


def alive(prog_ids):
    """The subset of |prog_ids| the kernel still holds."""
    live = {p["id"] for p in bpftool(["prog", "show"])}
    return [i for i in prog_ids if i in live]
