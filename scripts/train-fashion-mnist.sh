#!/bin/sh
# make train-fashion-mnist: the PyTorch example (examples/train_fashion_mnist.py)
# on RANKS ranks (default 4) for EPOCHS epochs (default 3) over the first
# LIMIT training images (default 0: all 60 000), launched by dlcp-run on
# this host, once per configuration, in this order:
#   gloo                 DDP's stock all-reduce over Gloo
#   dlcp-hook p=0        the dlcp DDP hook, exact
#   dlcp-hook p=0.01     the hook with loss bound 1 %, under 1 % datagram
#                        loss injected in dlcp's send path (DLCP_FAULT_DROP)
#   dlcp                 init_process_group("dlcp"), no Gloo
# Rows go to BUILD/fashion-mnist/results.csv, the plot of test accuracy
# against training time to BUILD/fashion-mnist/accuracy.png.
set -eu
build=${1:-build}
ranks=${RANKS:-4}
epochs=${EPOCHS:-3}
limit=${LIMIT:-0}
src=$(cd "$(dirname "$0")/.." && pwd)
out=$build/fashion-mnist
mkdir -p "$out"
csv=$out/results.csv
rm -f "$csv"
# run TITLE FAULT_DROP ARGS...: one training job.
run() {
  echo "== $1 =="
  drop=$2
  shift 2
  env PYTHONUNBUFFERED=1 DLCP_FAULT_DROP="$drop" "$build/bin/dlcp-run" \
    -n "$ranks" "$build/venv/bin/python" \
    "$src/examples/train_fashion_mnist.py" --epochs "$epochs" --limit "$limit" \
    --csv "$csv" "$@"
}
run "gloo" 0 --backend gloo
run "dlcp hook, p = 0" 0 --backend dlcp-hook
run "dlcp hook, p = 0.01, 1 % injected loss" 1% --backend dlcp-hook \
  --loss-bound 0.01 --label "dlcp-hook p=0.01, 1% loss"
run "dlcp backend" 0 --backend dlcp
"$build/venv/bin/python" "$src/examples/train_fashion_mnist.py" \
  --plot "$csv" "$out/accuracy.png"
echo "results: $csv"
