#!/usr/bin/env python3
"""Plots a soak run: each rank's resident set, heap in use and open
descriptors after every epoch (from DIR/soak.rank*.csv, written by
tools/dlcp-soak.c), so flat lines can be seen to be flat.

Usage: scripts/soak_plot.py DIR OUT.png
"""
import csv
import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    d, png = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(d, "soak.rank*.csv")))
    if not files:
        print("soak_plot: no CSV in", d, file=sys.stderr)
        return 1
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for f in files:
        rank = f.rsplit(".rank", 1)[1].split(".")[0]
        rows = list(csv.DictReader(open(f)))
        t = [float(r["t_s"]) / 60 for r in rows]
        axes[0].plot(t, [int(r["rss_kib"]) / 1024 for r in rows],
                     marker=".", label="rank " + rank)
        axes[1].plot(t, [int(r["heap_kib"]) / 1024 for r in rows],
                     marker=".")
        axes[2].plot(t, [int(r["fds"]) for r in rows], marker=".")
    axes[0].set_ylabel("resident set (MiB)")
    axes[1].set_ylabel("heap in use (MiB)")
    axes[2].set_ylabel("open descriptors")
    axes[2].set_xlabel("minutes (one point per epoch, after its "
                       "communicator is destroyed)")
    for a in axes:
        a.set_ylim(bottom=0)
        a.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("dlcp soak: randomized all-reduces under fault injection")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
