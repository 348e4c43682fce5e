#!/usr/bin/python3
"""mlt-thresholds: per-queue selective-drop (ECN/RED) thresholds for MLT's
switches from a model profile, by the MLT seed's Appendix B queueing model.

Model (seed section 4.4): the model's M layers map onto the N data queues
in order (front layers to the most urgent queue, as
workload.ps.layer_priorities does); queue i receives packets at a rate
proportional to the bytes of its layers, lambda_i = load * mu * bytes_i /
bytes, and is served at mu_i = mu * prod_{k<i} (1 - rho_k) (strict
priority), rho_i = lambda_i / mu_i.  Each queue is split into a queue of
small (unimportant, a fraction theta of the packets) and one of large
gradients.  Small gradients are dropped above S_i packets, everything above
L_i; the split queues are M/M/1/K with K = theta * S_i and K = L_i -
theta * S_i, whose loss rate is the textbook blocking probability
    r(rho, K) = (1 - rho) rho^K / (1 - rho^(K+1))   (K / (K+1) at rho = 1).
(The seed's printed formulas for r_i^S and r_i^L are garbled in the
translation; they cite the same M/M/1/m result.)  The objective is
    sum_i  w_i * (c_small * r_i^S + c_large * r_i^L)
with the seed's f_i^S, f_i^L (extra convergence rounds per 1 % loss in
layer i) taken linear: w_i is queue i's share of the model's bytes, and
c_small, c_large say how much a lost small or large gradient costs
(defaults 1 and 10: the seed measures them per model; give yours).  The
thresholds must fit the buffer: sum_i L_i <= B packets.  Per queue, the
best S for every L is found by scanning, then a knapsack over the queues
spends the buffer.

Output: the thresholds in packets, and the scenario line that uses them,
  switch.ecn_threshold: [<queue 0>, S_1, ..., S_N]
(queue 0 is MLT's control channel; it keeps --control-threshold).  The
simulator's ports have one buffer, so L_i are reported, not enforced.

Usage: scripts/mlt-thresholds.py PROFILE [--queues 7] [--buffer 512KB]
         [--mtu 1500] [--load 0.9] [--theta 0.5] [--small-cost 1]
         [--large-cost 10] [--control-threshold 65pkts]
       scripts/mlt-thresholds.py --self-test
PROFILE is a model name (workloads/profiles/NAME.csv) or a profile CSV.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def blocking(rho, k):
    """Loss rate of an M/M/1/K queue holding at most k packets."""
    if k <= 0:
        return 1.0
    if abs(rho - 1.0) < 1e-12:
        return 1.0 / (k + 1)
    return (1 - rho) * rho ** k / (1 - rho ** (k + 1))


def layer_bytes(profile):
    path = profile if (os.sep in profile or profile.endswith(".csv")) else \
        os.path.join(HERE, "..", "workloads", "profiles", profile + ".csv")
    sizes = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("tensor,"):
                continue
            sizes.append(int(line.split(",")[3]))
    if not sizes:
        sys.exit("%s: no tensors" % path)
    return sizes


def queue_shares(sizes, n):
    """Bytes share of each queue, tensors mapped t * n / T (front first)."""
    share = [0.0] * n
    for t, b in enumerate(sizes):
        share[t * n // len(sizes)] += b
    total = float(sum(sizes))
    return [s / total for s in share]


def loads(shares, load):
    """rho_i of each strict-priority queue; None once a queue saturates."""
    rhos, idle = [], 1.0
    for s in shares:
        if idle <= 0:
            rhos.append(None)
            continue
        rho = load * s / idle
        rhos.append(min(rho, 1.0))
        idle *= max(0.0, 1 - rho)
    return rhos


def queue_costs(rho, w, theta, cs, cl, buf):
    """best[L] = (cost, S) for L = 0..buf packets of queue length."""
    best = [(w * (cs + cl), 0)]
    for length in range(1, buf + 1):
        choice = None
        for s in range(0, length + 1):
            ks = int(theta * s)
            kl = length - ks
            c = w * (cs * blocking(rho, ks) + cl * blocking(rho, kl))
            if choice is None or c < choice[0]:
                choice = (c, s)
        best.append(choice)
    return best


def solve(shares, rhos, theta, cs, cl, buf):
    """Minimum total cost with sum L_i <= buf: (cost, [(S_i, L_i)])."""
    tables = [queue_costs(r if r is not None else 1.0, w, theta, cs, cl, buf)
              for r, w in zip(rhos, shares)]
    # dp[b] = (cost, choices) using exactly the queues so far and <= b.
    dp = [(0.0, [])] * (buf + 1)
    for tab in tables:
        nxt = []
        for b in range(buf + 1):
            best = None
            for length in range(b + 1):
                c = dp[b - length][0] + tab[length][0]
                if best is None or c < best[0]:
                    best = (c, dp[b - length][1] +
                            [(tab[length][1], length)])
            nxt.append(best)
        dp = nxt
    return dp[buf]


def self_test():
    assert abs(blocking(0.5, 1) - 1.0 / 3) < 1e-12
    assert abs(blocking(1.0, 3) - 0.25) < 1e-12
    assert blocking(0.3, 0) == 1.0
    # The knapsack equals brute force on a small instance.
    shares, theta, cs, cl, buf = [0.5, 0.3, 0.2], 0.5, 1.0, 10.0, 6
    rhos = loads(shares, 0.9)
    cost, _ = solve(shares, rhos, theta, cs, cl, buf)
    tabs = [queue_costs(r, w, theta, cs, cl, buf)
            for r, w in zip(rhos, shares)]
    brute = min(tabs[0][a][0] + tabs[1][b][0] + tabs[2][c][0]
                for a in range(buf + 1) for b in range(buf + 1)
                for c in range(buf + 1) if a + b + c <= buf)
    assert abs(cost - brute) < 1e-12, (cost, brute)
    # Strict priority: each lower queue sees less service.
    assert loads([0.5, 0.5], 0.8) == [0.4, 0.4 / 0.6]
    print("self-test: ok")


def size_arg(text, mtu):
    units = {"KB": 1e3, "MB": 1e6, "KiB": 1024.0, "MiB": 1048576.0, "B": 1}
    for u, m in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(u):
            return float(text[:-len(u)]) * m
    if text.endswith("pkts"):
        return float(text[:-4]) * mtu
    return float(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", nargs="?")
    ap.add_argument("--queues", type=int, default=7)
    ap.add_argument("--buffer", default="512KB")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--theta", type=float, default=0.5)
    ap.add_argument("--small-cost", type=float, default=1.0)
    ap.add_argument("--large-cost", type=float, default=10.0)
    ap.add_argument("--control-threshold", default="65pkts")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.profile:
        ap.error("a profile is required")
    if not (1 <= a.queues <= 7 and 0 < a.load and 0 <= a.theta <= 1):
        ap.error("expected 1 <= --queues <= 7, --load > 0, 0 <= --theta <= 1")
    buf = int(size_arg(a.buffer, a.mtu) // a.mtu)
    shares = queue_shares(layer_bytes(a.profile), a.queues)
    rhos = loads(shares, a.load)
    cost, choice = solve(shares, rhos, a.theta, a.small_cost, a.large_cost,
                         buf)
    print("# %s: %d data queues, buffer %d packets, load %.2f, theta %.2f, "
          "costs %g/%g; objective %.6g" % (a.profile, a.queues, buf, a.load,
                                           a.theta, a.small_cost,
                                           a.large_cost, cost))
    print("# queue  bytes-share  rho     S_i(pkts)  L_i(pkts)")
    for i, ((s, length), w, r) in enumerate(zip(choice, shares, rhos), 1):
        print("# %5d  %11.4f  %s  %9d  %9d" % (
            i, w, "%.4f" % r if r is not None else "sat.  ", s, length))
    ths = [a.control_threshold] + ["%dpkts" % max(s, 1) for s, _ in choice]
    ths += ths[-1:] * (8 - len(ths))
    print("switch.ecn_threshold=[%s]" % ", ".join(ths))


if __name__ == "__main__":
    main()
