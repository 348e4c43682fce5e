#!/usr/bin/env python3
"""Plots dlcp-sim's CPU cost per packet-hop against the number of hosts,
one line per topology family, from the CSV scripts/bench-sim-scaling.sh
writes, with the 1.5x band of issue 16's target above each family's
16-host cost.  With ns-3's CSV of the same leaf-spines (the script's
scaling-ns3.csv), a second panel sets each simulator's cost against its
own at 16 hosts.

Usage: scripts/plot-sim-scaling.py SCALING.csv OUT.png [SCALING-NS3.csv]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"fat_tree": "fat tree (k = 4 ... 16)",
          "leaf_spine": "leaf-spine (16 hosts/ToR, 16 spines)"}
TICKS = [16, 32, 64, 128, 256, 512, 1024]


def family(rows, fam):
    """(hosts, ns per hop, min / median, max / median), by hosts."""
    return sorted((int(r["hosts"]), float(r["ns_per_hop"]),
                   float(r["cpu_s_min"]) / float(r["cpu_s"]),
                   float(r["cpu_s_max"]) / float(r["cpu_s"]))
                  for r in rows if r["family"] == fam)


def finish(ax, ylabel, title):
    """Hosts on a log axis, the cost from 0, labels and legend."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(TICKS)
    ax.set_xticklabels([str(t) for t in TICKS])
    ax.set_xlabel("hosts")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


def main():
    src, png = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(src)))
    ns3 = list(csv.DictReader(open(sys.argv[3]))) if len(sys.argv) > 3 else []
    fig, axes = plt.subplots(1, 2 if ns3 else 1,
                             figsize=(14 if ns3 else 8, 5), squeeze=False)
    ax = axes[0][0]
    for fam in ("fat_tree", "leaf_spine"):
        pts = family(rows, fam)
        if not pts:
            continue
        ns = [p[1] for p in pts]
        err = [[p[1] * (1 - p[2]) for p in pts],
               [p[1] * (p[3] - 1) for p in pts]]
        line = ax.errorbar([p[0] for p in pts], ns, yerr=err, marker="o",
                           capsize=3, label=LABELS[fam])
        ax.axhline(1.5 * ns[0], color=line[0].get_color(), linestyle=":",
                   linewidth=1,
                   label="1.5 x its 16-host cost (target bound)")
    finish(ax, "CPU ns per packet-hop (median; bars: min-max)",
           "dlcp-sim: DCTCP, web-search traffic at 30 % load per host")
    if ns3:
        ax = axes[0][1]
        for fam in ("fat_tree", "leaf_spine"):
            pts = family(rows, fam)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] / pts[0][1] for p in pts],
                        marker="o", label="dlcp-sim, " + LABELS[fam])
        pts = sorted((int(r["hosts"]), float(r["ns_per_hop"])) for r in ns3)
        ax.plot([p[0] for p in pts], [p[1] / pts[0][1] for p in pts],
                marker="s", color="black",
                label="ns-3, the same leaf-spines and flows (one run each)")
        ax.axhline(1.5, color="gray", linestyle=":", linewidth=1,
                   label="1.5x (issue 16's bound)")
        finish(ax, "CPU per packet-hop / its own at 16 hosts",
               "Growth of the cost per packet-hop: dlcp-sim and ns-3")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
