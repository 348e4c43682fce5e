#!/usr/bin/env python3
"""Plots dlcp-sim's CPU cost per packet-hop against the number of hosts,
one line per topology family, from the CSV scripts/bench-sim-scaling.sh
writes, with the 1.5x band of issue 16's target above each family's
16-host cost.

Usage: scripts/plot-sim-scaling.py SCALING.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"fat_tree": "fat tree (k = 4 ... 16)",
          "leaf_spine": "leaf-spine (16 hosts/ToR, 16 spines)"}


def main():
    src, png = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(src)))
    fig, ax = plt.subplots(figsize=(8, 5))
    for fam in ("fat_tree", "leaf_spine"):
        pts = sorted((int(r["hosts"]), float(r["ns_per_hop"]),
                      float(r["cpu_s_min"]) / float(r["cpu_s"]),
                      float(r["cpu_s_max"]) / float(r["cpu_s"]))
                     for r in rows if r["family"] == fam)
        if not pts:
            continue
        hosts = [p[0] for p in pts]
        ns = [p[1] for p in pts]
        err = [[p[1] * (1 - p[2]) for p in pts],
               [p[1] * (p[3] - 1) for p in pts]]
        line = ax.errorbar(hosts, ns, yerr=err, marker="o", capsize=3,
                           label=LABELS[fam])
        ax.axhline(1.5 * ns[0], color=line[0].get_color(), linestyle=":",
                   linewidth=1,
                   label="1.5 x its 16-host cost (target bound)")
    ax.set_xscale("log", base=2)
    ax.set_xticks([16, 32, 64, 128, 256, 512, 1024])
    ax.set_xticklabels(["16", "32", "64", "128", "256", "512", "1024"])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("hosts")
    ax.set_ylabel("CPU ns per packet-hop (median; bars: min-max)")
    ax.set_title("dlcp-sim: DCTCP, web-search traffic at 30 % load per host")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
