#!/usr/bin/env python3
"""Data-parallel training of a small CNN (or a wide MLP) on Fashion-MNIST,
with Gloo or dlcp.

Launch one process per rank with any launcher that sets torchrun's
variables (Slurm and Open MPI through dlcp.export_launcher_env):

    python3 -m torch.distributed.run --standalone --nproc_per_node 4 \
        --redirects 1 --tee 1 train_fashion_mnist.py --backend gloo
    build/bin/dlcp-run -n 4 python3 train_fashion_mnist.py --backend dlcp-hook
    build/bin/dlcp-run -n 4 python3 train_fashion_mnist.py --backend dlcp-hook --loss-bound 0.01
    build/bin/dlcp-run -n 4 python3 train_fashion_mnist.py --backend dlcp

Backends: gloo (DDP's stock all-reduce over Gloo), dlcp-hook (DDP over
Gloo, gradients through dlcp's communication hook, --loss-bound p), dlcp
(init_process_group("dlcp"): everything over dlcp, no Gloo).  The data are
Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, or
--data DIR); nothing is downloaded.  Each epoch prints its training time
and the test accuracy; --csv appends one row per epoch.

    train_fashion_mnist.py --plot results.csv accuracy.png

draws test accuracy against training time for every run of the CSV.
"""

import argparse
import csv
import gzip
import os
import sys
import time

DATA_DIR = "/usr/share/datasets/fashion-mnist"
CSV_FIELDS = ["run", "backend", "loss_bound", "world", "epoch",
              "epoch_seconds", "train_seconds", "test_accuracy",
              "delivered_fraction", "fault_drop", "model"]


def read_idx(path):
    """An IDX file (the MNIST format, gzipped) as a numpy array."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    import torch
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir,
                                   f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir,
                                   f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.copy()).float().div_(255.0).unsqueeze(1)
    x = (x - 0.2860) / 0.3530  # the training set's mean and deviation
    return x, torch.from_numpy(labels.astype("int64"))


def make_model(kind):
    """cnn: a small CNN, 0.2 M parameters, compute-bound on a CPU.  mlp: a
    wide MLP, 5.8 M parameters (23 MB of gradients a step for little
    compute), communication-bound: the case a transport can speed up."""
    import torch.nn as nn
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(28 * 28, 2048), nn.ReLU(),
            nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10))


def evaluate(model, x, y, rank, world, dist):
    """Test accuracy (%) over the whole test set, each rank a shard."""
    import torch
    model.eval()
    lo, hi = rank * len(x) // world, (rank + 1) * len(x) // world
    with torch.no_grad():
        pred = model(x[lo:hi]).argmax(1)
    correct = torch.tensor([int((pred == y[lo:hi]).sum())], dtype=torch.int64)
    dist.all_reduce(correct)
    model.train()
    return 100.0 * correct.item() / len(x)


def train(args):
    import torch
    import torch.distributed as dist
    import dlcp
    import dlcp.torch

    dlcp.export_launcher_env()  # Slurm / Open MPI -> torchrun's variables
    torch.set_num_threads(args.threads)
    dist.init_process_group("dlcp" if args.backend == "dlcp" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = make_model(args.model)
    net = torch.nn.parallel.DistributedDataParallel(model)
    state = None
    if args.backend == "dlcp-hook":
        state = dlcp.torch.register_ddp_hook(net, loss_bound=args.loss_bound,
                                             algo=args.algo)
    elif args.loss_bound or args.algo != "auto":
        sys.exit("--loss-bound and --algo apply to --backend dlcp-hook only")
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    x_train, y_train = load(args.data, "train")
    x_test, y_test = load(args.data, "test")
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    # Each epoch a permutation from the seed, the same on every rank; rank
    # r takes every world-th batch of it.
    per_rank = len(x_train) // (world * args.batch)
    label = args.label or (args.backend + (f" p={args.loss_bound:g}"
                                           if state else ""))
    rows, train_seconds = [], 0.0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train),
                              generator=torch.Generator().manual_seed(
                                  args.seed + epoch))
        dist.barrier()
        start = time.perf_counter()
        for step in range(per_rank):
            lo = (step * world + rank) * args.batch
            idx = perm[lo:lo + args.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x_train[idx]),
                                                     y_train[idx])
            loss.backward()
            opt.step()
        dist.barrier()
        seconds = time.perf_counter() - start
        train_seconds += seconds
        acc = evaluate(model, x_test, y_test, rank, world, dist)
        delivered = ""
        if state is not None and state.total_elements:
            delivered = f"{1 - state.missing_elements / state.total_elements:.6f}"
        if rank == 0:
            print(f"[{label}] epoch {epoch}: {seconds:.2f} s, test accuracy "
                  f"{acc:.2f} %, loss {loss.item():.4f}"
                  + (f", delivered {delivered}" if delivered else ""),
                  flush=True)
        rows.append({"run": label, "backend": args.backend,
                     "loss_bound": args.loss_bound, "world": world,
                     "epoch": epoch, "epoch_seconds": f"{seconds:.3f}",
                     "train_seconds": f"{train_seconds:.3f}",
                     "test_accuracy": f"{acc:.2f}",
                     "delivered_fraction": delivered,
                     "fault_drop": os.environ.get("DLCP_FAULT_DROP", "0"),
                     "model": args.model})
    if rank == 0 and args.csv:
        new = not os.path.exists(args.csv)
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            if new:
                w.writeheader()
            w.writerows(rows)
    if state is not None:
        state.close()
    # The last operation must carry no tensor: torch 1.13's Gloo group can
    # deadlock at teardown while its worker thread frees the last
    # operation's tensor (it waits for the GIL the joining thread holds).
    dist.barrier()
    del net
    dist.destroy_process_group()


def plot(csv_path, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {}
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            runs.setdefault(row["run"], []).append(row)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, rows in runs.items():
        ax.plot([0] + [float(r["train_seconds"]) for r in rows],
                [10.0] + [float(r["test_accuracy"]) for r in rows],
                marker="o", label=name)
    first = next(iter(runs.values()))[0]
    world = first["world"]
    # CSVs written before the model column are of the CNN.
    model = {"mlp": "wide MLP"}.get(first.get("model") or "cnn", "small CNN")
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"Fashion-MNIST, {model}, {world} ranks")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    print(f"wrote {png_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["gloo", "dlcp-hook", "dlcp"],
                    default="gloo")
    ap.add_argument("--loss-bound", type=float, default=0.0,
                    help="dlcp-hook: fraction p of each bucket that may be "
                         "lost (default 0: exact)")
    ap.add_argument("--algo", default="auto",
                    help="dlcp-hook: the all-reduce algorithm (auto, ring, "
                         "halving_doubling, ps, ...)")
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn",
                    help="cnn (default, compute-bound) or mlp (wide, "
                         "communication-bound)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per rank (default 1)")
    ap.add_argument("--limit", type=int, default=0,
                    help="use only the first N training images")
    ap.add_argument("--data", default=DATA_DIR)
    ap.add_argument("--csv", help="append one row per epoch to this file")
    ap.add_argument("--label", help="the run's name in the CSV and plot")
    ap.add_argument("--plot", nargs=2, metavar=("CSV", "PNG"),
                    help="plot accuracy against time, then exit")
    args = ap.parse_args()
    if args.plot:
        plot(*args.plot)
    else:
        if not 0.0 <= args.loss_bound < 1.0:
            ap.error("--loss-bound: expected a fraction in [0, 1)")
        train(args)


if __name__ == "__main__":
    main()
