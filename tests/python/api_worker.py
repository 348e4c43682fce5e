"""One rank of a test job of the dlcp Python API (launched by test_api.py
through dlcp-run, or with Slurm / Open MPI variables).  Each scenario
checks exact results and prints "OK" at the end; a failed check raises."""

import os
import sys
import time

import numpy as np

import dlcp

DTYPES = [np.float32, np.float16, np.int32, np.int64]
SIZES = [1, 1000, 300_001]  # one element, eager, through MLT (odd split)


def contribution(rank, n, dtype):
    """Rank r's input: (r + 1) * (i % 7 + 1), exact in every dtype."""
    return ((rank + 1) * (np.arange(n) % 7 + 1)).astype(dtype)


def expected(op, world, n, dtype):
    base = (np.arange(n) % 7 + 1).astype(np.int64)
    total = world * (world + 1) // 2 * base
    if op == "sum":
        return total.astype(dtype)
    if op == "avg":
        if np.issubdtype(dtype, np.integer):
            return (total // world).astype(dtype)  # positive: truncation
        return (total.astype(np.float64) / world).astype(dtype)
    if op == "min":
        return base.astype(dtype)
    return (world * base).astype(dtype)


def check(what, got, want):
    if np.issubdtype(want.dtype, np.floating):
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64),
                         rtol=2e-3 if want.dtype == np.float16 else 1e-6)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        bad = np.flatnonzero(got != want)[:5]
        raise AssertionError(f"{what}: got {got[bad]} want {want[bad]} at "
                             f"{bad}")


def collectives(comm):
    r, w = comm.rank, comm.size
    for dtype in DTYPES:
        for n in SIZES:
            for op in ("sum", "avg", "min", "max"):
                a = contribution(r, n, dtype)
                res = comm.allreduce(a, op=op, importance=True)
                check(f"allreduce {op} {dtype.__name__} {n}", a,
                      expected(op, w, n, dtype))
                assert res.delivered_fraction == 1.0 and res.missing == []
                # The library's time lies within the caller's, and a
                # collective whose peers' data had all come still took
                # some (it once reported 0: the pass's start time).
                assert res.algorithm and 0 < res.elapsed <= res.wall, \
                    (res.elapsed, res.wall)
            # out of place: the input stays as it was
            a = contribution(r, n, dtype)
            out = np.zeros_like(a)
            comm.allreduce(a, out=out, algo="ring", priority=7)
            check("allreduce out", out, expected("sum", w, n, dtype))
            check("allreduce input kept", a, contribution(r, n, dtype))
            # reduce-scatter: this rank's shard of the sum, in place
            a = contribution(r, n, dtype)
            comm.reduce_scatter(a, layer=3, nlayers=10)
            off, ln = comm.shard(n)
            check("reduce_scatter", a[off:off + ln],
                  expected("sum", w, n, dtype)[off:off + ln])
            # out of place: |out| holds the shard alone
            a = contribution(r, n, dtype)
            out = np.zeros(ln, dtype=dtype)
            comm.reduce_scatter(a, out=out)
            check("reduce_scatter out", out,
                  expected("sum", w, n, dtype)[off:off + ln])
            check("reduce_scatter input kept", a, contribution(r, n, dtype))
            try:
                comm.reduce_scatter(a, out=np.zeros(n + 1, dtype=dtype))
            except ValueError as e:
                assert f"expected {ln}" in str(e), e
            else:
                raise AssertionError("a reduce_scatter out of the wrong "
                                     "size was accepted")
            # allgather, out of place and in place
            mine = np.full(n, r + 1, dtype=dtype)
            out = np.zeros(n * w, dtype=dtype)
            comm.allgather(mine, out)
            check("allgather", out, np.repeat(np.arange(1, w + 1), n)
                  .astype(dtype))
            out = np.zeros(n * w, dtype=dtype)
            out[r * n:(r + 1) * n] = r + 1
            comm.allgather(out[r * n:(r + 1) * n], out)
            check("allgather in place", out, np.repeat(np.arange(1, w + 1), n)
                  .astype(dtype))
            # reduce to every root, in place and out of place (the input
            # then stays as it was)
            for root in range(w):
                a = contribution(r, n, dtype)
                algo = ("auto", "halving_doubling")[root % 2]
                res = comm.reduce(a, root=root, op="max", algo=algo)
                assert res.algorithm == ("ring", algo)[root % 2], \
                    res.algorithm
                if r == root:
                    check(f"reduce max root {root}", a,
                          contribution(w - 1, n, dtype))
                a = contribution(r, n, dtype)
                out = np.zeros_like(a)
                comm.reduce(a, root=root, out=out)
                check("reduce input kept", a, contribution(r, n, dtype))
                if r == root:
                    check(f"reduce root {root}", out,
                          expected("sum", w, n, dtype))
            # broadcast from every root
            for root in range(w):
                b = contribution(r, n, dtype)
                comm.broadcast(b, root=root)
                check(f"broadcast root {root}", b,
                      contribution(root, n, dtype))
    # buffer-protocol objects other than arrays: a bytearray of int32
    raw = bytearray(np.full(16, r + 1, np.int32).tobytes())
    comm.allreduce(memoryview(raw).cast("i"))
    check("memoryview", np.frombuffer(raw, np.int32),
          np.full(16, w * (w + 1) // 2, np.int32))
    comm.barrier()


def asynchronous(comm):
    r, w = comm.rank, comm.size
    arrays = [contribution(r, n, np.float32) for n in (10, 70_000, 500_000)]
    handles = [comm.allreduce(a, async_op=True) for a in arrays]
    bar = comm.barrier(async_op=True)
    deadline = time.monotonic() + 60
    while not all(h.test() for h in handles):
        assert time.monotonic() < deadline, "async allreduces never finished"
        time.sleep(0.001)
    for h, a in reversed(list(zip(handles, arrays))):
        res = h.wait()
        assert isinstance(res, dlcp.Result) and res.delivered_fraction == 1.0
        check("async allreduce", a, expected("sum", w, a.size, np.float32))
        assert h.wait() is res  # a finished handle answers again
    bar.wait(timeout=30)
    b = np.zeros(4, np.int64) if r else np.arange(4, dtype=np.int64)
    h = comm.broadcast(b, async_op=True)
    h.wait(timeout=30)
    check("async broadcast", b, np.arange(4, dtype=np.int64))


def wait_timeout(comm):
    """wait(timeout) on a collective that cannot finish yet raises
    TimeoutError and may be waited for again: rank 0's barrier waits for
    the others, which enter it only once rank 0 timed out (told by a file
    in $SYNC_DIR)."""
    flag = os.path.join(os.environ["SYNC_DIR"], "timed-out")
    if comm.rank == 0:
        h = comm.barrier(async_op=True)
        try:
            h.wait(timeout=0.05)
        except TimeoutError:
            pass
        else:
            raise AssertionError("a barrier finished without the others")
        assert not h.test()
        open(flag, "w").close()
        assert h.wait(timeout=60).delivered_fraction == 1.0
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(flag):
            assert time.monotonic() < deadline, "rank 0 never timed out"
            time.sleep(0.01)
        comm.barrier()


def errors(comm):
    """Invalid arguments are refused before anything is posted."""
    a = np.zeros(8, np.float32)
    for call, exc in [
            (lambda: comm.allreduce(a, algo="bogus"), ValueError),
            (lambda: comm.allreduce(a, loss_bound=1.0), ValueError),
            (lambda: comm.allreduce(a, op="prod"), ValueError),
            (lambda: comm.allreduce(a, priority=8), ValueError),
            (lambda: comm.allreduce(np.zeros(8, np.float64)), TypeError),
            (lambda: comm.allreduce(np.zeros((4, 4), np.float32)[:, 1]),
             ValueError),
            (lambda: comm.allreduce(a, out=np.zeros(9, np.float32)),
             ValueError),
            (lambda: comm.allgather(a, np.zeros(8, np.float32)), ValueError),
            (lambda: comm.broadcast(a, root=comm.size), ValueError)]:
        try:
            call()
        except exc:
            continue
        raise AssertionError(f"expected {exc.__name__}")
    # an algorithm that does not run the collective: the C library's error
    try:
        comm.allgather(a, np.zeros(8 * comm.size, np.float32),
                       algo="recursive_doubling")
    except dlcp.Error as e:
        assert e.code == -201 and "invalid argument" in str(e), e
    else:
        raise AssertionError("expected dlcp.Error")
    comm.barrier()


def peer_dies(comm):
    """The last rank leaves abruptly; every other rank's next collective
    fails with a dlcp.Error naming it."""
    victim = comm.size - 1
    a = np.ones(200_000, np.float32)
    try:
        # The victim leaves once its barrier completed, which may be before
        # another rank's did: the failure may surface in either call.
        comm.barrier()
        if comm.rank == victim:
            os._exit(0)  # no goodbye: the control connections just close
        comm.allreduce(a, algo="ring")
    except dlcp.Error as e:
        assert e.code < 0 and f"rank {victim}" in str(e), e
        print(f"ERROR {e}")
    else:
        raise AssertionError("allreduce with a dead peer succeeded")


def lossy(comm):
    """1 % of the datagrams dropped, loss bound 5 %: missing ranges are
    zero, identical on every rank, the rest exact."""
    r, w = comm.rank, comm.size
    n = 1 << 20
    a = np.full(n, r + 1, np.float32)
    res = comm.allreduce(a, algo="ring", loss_bound=0.05, importance=True)
    mask = np.ones(n, bool)
    for off, ln in res.missing:
        mask[off:off + ln] = False
    assert res.delivered_fraction >= 0.95, res
    assert abs(res.delivered_fraction - mask.mean()) < 1e-6, res
    assert np.all(a[~mask] == 0) and np.all(a[mask] == w * (w + 1) / 2)
    shared = np.zeros(w, np.int64)
    comm.allgather(np.array([mask.sum()], np.int64), shared)
    assert np.all(shared == mask.sum()), shared
    print(f"DELIVERED {res.delivered_fraction:.6f} ranges {len(res.missing)}")


def launcher(comm):
    print(f"LAUNCHER {comm.launcher} rank {comm.rank} size {comm.size} "
          f"RANK={os.environ['RANK']} WORLD_SIZE={os.environ['WORLD_SIZE']}")
    a = np.full(4, comm.rank + 1, np.int32)
    comm.allreduce(a)
    check("allreduce", a, np.full(4, comm.size * (comm.size + 1) // 2,
                                  np.int32))


def main():
    scenario = sys.argv[1]
    comm = dlcp.Communicator()
    globals()[scenario](comm)
    comm.close()
    print(f"OK {scenario} rank {comm.rank} of {comm.size}")


if __name__ == "__main__":
    main()
