"""One rank of a PyTorch test job (launched by test_torch.py through
dlcp-run).  Prints "OK" at the end; a failed check raises."""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import dlcp
import dlcp.torch

STEPS = 20


def tiny_model():
    torch.manual_seed(0)
    # 1.3 MB of parameters: more than DDP's first bucket (1 MiB)
    return torch.nn.Sequential(torch.nn.Linear(16, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 600), torch.nn.ReLU(),
                               torch.nn.Linear(600, 4))


def ddp(mode, out_path):
    """20 SGD steps of a tiny model on rank-dependent data; rank 0 saves
    the parameters.  mode: gloo (stock), hook (Gloo + the dlcp hook at
    p = 0), backend (init_process_group("dlcp")), hook_ina (the hook with
    algo="ina": every bucket summed by the dlcp-switch at DLCP_SWITCH)."""
    dist.init_process_group("dlcp" if mode == "backend" else "gloo")
    model = tiny_model()
    net = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.25)
    state = (dlcp.torch.register_ddp_hook(net) if mode == "hook" else
             dlcp.torch.register_ddp_hook(net, algo="ina")
             if mode == "hook_ina" else None)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + dist.get_rank())
    for _ in range(STEPS):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    if state is not None:
        assert state.steps == STEPS, state.steps
        assert state.delivered_fractions == [1.0] * STEPS
        assert state.missing_elements == 0
        nparams = sum(p.numel() for p in model.parameters())
        assert state.total_elements == STEPS * nparams
        assert len(state.last_results) > 1  # several buckets per step
        want = "ina" if mode == "hook_ina" else None
        assert want is None or all(r.algorithm == want
                                   for r in state.last_results), \
            [r.algorithm for r in state.last_results]
        state.close()
    if dist.get_rank() == 0:
        torch.save([p.detach() for p in model.parameters()], out_path)
    dist.barrier()
    dist.destroy_process_group()


def hook_lossy():
    """The hook at p = 0.05 under 1 % injected loss: every step counted,
    at least 95 % of each delivered, and training goes on."""
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512),
                                torch.nn.Linear(512, 8))
    net = torch.nn.parallel.DistributedDataParallel(model)
    state = dlcp.torch.register_ddp_hook(net, loss_bound=0.05, algo="ring")
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(5):
        opt.zero_grad()
        net(torch.randn(4, 512)).sum().backward()
        opt.step()
    assert state.steps == 5 and len(state.delivered_fractions) == 5
    assert all(0.95 <= f <= 1.0 for f in state.delivered_fractions), \
        state.delivered_fractions
    assert all(torch.isfinite(p).all() for p in model.parameters())
    print(f"DELIVERED {state.delivered_fractions}")
    state.close()
    dist.destroy_process_group()


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32,
          torch.int64]


def backend_ops():
    """Every operation of the "dlcp" backend, every dtype."""
    dist.init_process_group("dlcp")
    r, w = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "dlcp"
    total = w * (w + 1) // 2
    for dtype in DTYPES:
        for n in (3, 100_000):
            t = torch.full((n,), r + 1, dtype=dtype)
            ptr = t.data_ptr()
            dist.all_reduce(t)
            assert t.data_ptr() == ptr and (t == total).all(), (dtype, t)
            t = torch.full((n,), r + 1, dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            assert (t == w).all()
            t = torch.full((n,), r + 1, dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
            assert (t == 1).all()
            b = torch.full((n,), r, dtype=dtype)
            dist.broadcast(b, src=w - 1)
            assert (b == w - 1).all()
            outs = [torch.zeros(n, dtype=dtype) for _ in range(w)]
            dist.all_gather(outs, torch.full((n,), r, dtype=dtype))
            assert all((o == i).all() for i, o in enumerate(outs))
            flat = torch.zeros(n * w, dtype=dtype)
            dist.all_gather_into_tensor(flat,
                                        torch.full((n,), r, dtype=dtype))
            assert all((flat[i * n:(i + 1) * n] == i).all() for i in range(w))
    for dtype in DTYPES:
        for n in (3, 100_000):
            reduce_scatter_gather_p2p(r, w, n, dtype)
    moved_not_reduced(r, w)
    # asynchronous work
    ts = [torch.full((50_000,), float(r + 1)) for _ in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for wk in reversed(works):
        wk.wait()
    assert all((t == total).all() for t in ts)
    parts = [torch.full((k + 1, 3), float(r + k)) for k in range(3)]
    dist.all_reduce_coalesced(parts)
    assert all((p == total + w * (k - 1)).all() for k, p in enumerate(parts))
    fut = dist.all_reduce(torch.ones(8), async_op=True).get_future()
    assert (fut.wait()[0] == w).all()
    dist.barrier()
    # a subgroup of the first and last ranks: a dlcp job of its own (the
    # launcher's LOCAL_* variables describe the whole job's)
    sub = dist.new_group([0, w - 1])
    t = torch.full((10,), float(r))
    if r in (0, w - 1):
        dist.all_reduce(t, group=sub)
        assert (t == w - 1).all(), t
        assert dist.get_world_size(sub) == 2
    dist.barrier()
    # an unsupported op is refused with the backend named
    try:
        dist.all_reduce(torch.ones(2), op=dist.ReduceOp.PRODUCT)
    except RuntimeError as e:
        assert "dlcp" in str(e), e
    else:
        raise AssertionError("PRODUCT accepted")
    dist.destroy_process_group()


def reduce_scatter_gather_p2p(r, w, n, dtype):
    """reduce, reduce-scatter, gather, scatter, all-to-all and send/recv
    of |n| elements of |dtype| on rank |r| of |w|, against values each rank
    can compute: rank i's element k is (i + 1) * (k % 7 + 1)."""
    k = torch.arange(n * w) % 7 + 1

    def of(i, m=n):
        return ((i + 1) * k[:m]).to(dtype)
    total = w * (w + 1) // 2
    root = w - 1
    t = of(r)
    dist.reduce(t, dst=root)
    assert (t == (of(0) * total if r == root else of(r))).all(), (dtype, t)
    t = of(r)
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    assert (t == (of(w - 1) if r == 0 else of(r))).all()
    # rank r keeps elements [r * n, (r + 1) * n) of the summed inputs
    full = of(r, n * w)
    out = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter_tensor(out, full)
    assert (out == (total * k[r * n:(r + 1) * n]).to(dtype)).all(), dtype
    assert (full == of(r, n * w)).all()  # the input is left as it was
    out = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter(out, [of(r) * (j + 1) for j in range(w)])
    assert (out == of(0) * total * (r + 1)).all()
    gathered = [torch.zeros(n, dtype=dtype) for _ in range(w)]
    dist.gather(of(r), gathered if r == root else None, dst=root)
    if r == root:
        assert all((g == of(i)).all() for i, g in enumerate(gathered))
    got = torch.zeros(n, dtype=dtype)
    dist.scatter(got, [of(i) for i in range(w)] if r == 0 else None, src=0)
    assert (got == of(r)).all()
    # all-to-all: rank r's part j is (r + 1) * (j + 1) in every element
    src = torch.cat([torch.full((n,), (r + 1) * (j + 1), dtype=dtype)
                     for j in range(w)])
    dst = torch.zeros(n * w, dtype=dtype)
    dist.all_to_all_single(dst, src)
    assert all((dst[i * n:(i + 1) * n] == (i + 1) * (r + 1)).all()
               for i in range(w))
    # uneven parts: rank r sends i + 1 rows of 2 to rank i
    rows = [i + 1 for i in range(w)]
    src = torch.full((sum(rows), 2), r, dtype=dtype)
    dst = torch.full((w * (r + 1), 2), -1, dtype=dtype)
    dist.all_to_all_single(dst, src, output_split_sizes=[r + 1] * w,
                           input_split_sizes=rows)
    assert all((dst[i * (r + 1):(i + 1) * (r + 1)] == i).all()
               for i in range(w))
    # all-to-all of lists, part j of rank r of j + 1 elements
    outs = [torch.zeros(r + 1, dtype=dtype) for _ in range(w)]
    dist.all_to_all(outs, [torch.full((j + 1,), r * w + j, dtype=dtype)
                           for j in range(w)])
    assert all((o == i * w + r).all() for i, o in enumerate(outs))
    # a ring of sends and receives, two tags in flight at once
    nxt, prv = (r + 1) % w, (r - 1) % w
    sends = [dist.isend(of(r) * (tag + 1), nxt, tag=tag) for tag in (0, 7)]
    late, early = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
    dist.recv(late, prv, tag=7)
    dist.recv(early, prv, tag=0)
    for s in sends:
        s.wait()
    assert (early == of(prv)).all() and (late == of(prv) * 8).all()


def moved_not_reduced(r, w):
    """Data that is moved, not reduced, may be of any dtype and size:
    torch's object collectives (uint8 of any length), float64, bool, int8
    and int16 through broadcast, all-gather and send/recv."""
    objs = [{"config": [1, 2.5, "x" * r]}] if r == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"config": [1, 2.5, ""]}], objs
    everyone = [None] * w
    dist.all_gather_object(everyone, ("rank", r, "y" * r))
    assert everyone == [("rank", i, "y" * i) for i in range(w)], everyone
    for dtype in (torch.float64, torch.bool, torch.int8, torch.int16,
                  torch.uint8):
        for n in (1, 5, 8, 1001):  # sizes of 1 to 8 bytes a word apart
            def mine(i):
                return (torch.arange(n) * (i + 3) % 7 > 2 if dtype ==
                        torch.bool else (torch.arange(n) * (i + 3) % 100)
                        .to(dtype))
            b = mine(r) if r == w - 1 else torch.zeros(n, dtype=dtype)
            dist.broadcast(b, src=w - 1)
            assert torch.equal(b, mine(w - 1)), (dtype, n, b)
            flat = torch.zeros(n * w, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine(r))
            assert torch.equal(flat, torch.cat([mine(i) for i in range(w)]))
            got = torch.zeros(n, dtype=dtype)
            reqs = [dist.isend(mine(r), (r + 1) % w),
                    dist.irecv(got, (r - 1) % w)]
            for q in reqs:
                q.wait()
            assert torch.equal(got, mine((r - 1) % w)), (dtype, n)
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.float64))
    except RuntimeError as e:
        assert "dtype Double is not one dlcp reduces" in str(e), e
    else:
        raise AssertionError("a float64 all-reduce was accepted")


def p2p_errors():
    """Point-to-point misuse is refused with the backend named, a wait
    with a timeout raises when it passes, and a receive that no rank
    answers fails when the group is destroyed instead of hanging it."""
    dist.init_process_group("dlcp")
    r, w = dist.get_rank(), dist.get_world_size()
    for bad in (lambda: dist.send(torch.ones(2), r),
                lambda: dist.send(torch.ones(2), (r + 1) % w, tag=1 << 30),
                lambda: dist.all_to_all_single(torch.ones(w + 1),
                                               torch.ones(w + 1))):
        try:
            bad()
        except (RuntimeError, ValueError) as e:
            assert "dlcp" in str(e), e
        else:
            raise AssertionError("accepted")
    # a send above the eager size against a receive at or below it: both
    # fail with the mismatch after the send's first OFFER (1/64 of the
    # stall timeout), not when the timeout runs out
    began = time.monotonic()
    try:
        if r == 0:
            dist.send(torch.ones(100000), 1, tag=5)
        elif r == 1:
            dist.recv(torch.ones(10), 0, tag=5)
    except RuntimeError as e:
        assert "disagree on tensor size" in str(e), e
    else:
        if r < 2:
            raise AssertionError("sizes that disagree went through")
    assert time.monotonic() - began < 5, time.monotonic() - began
    orphan = dist.irecv(torch.ones(4), (r + 1) % w, tag=3)
    try:
        orphan.wait(datetime.timedelta(milliseconds=200))
    except RuntimeError as e:
        assert "did not finish within 200 ms" in str(e), e
    else:
        raise AssertionError("a receive nobody answered finished")
    assert not orphan.is_completed()
    dist.barrier()
    dist.destroy_process_group()
    try:
        orphan.wait()
    except RuntimeError as e:
        assert "recv" in str(e) and "dlcp" in str(e), e
    else:
        raise AssertionError("an unanswered receive completed")


def peer_dies():
    """A collective whose peer is gone raises from the call, naming the
    peer, as a Work's wait() does (it used to return as if it had run)."""
    dist.init_process_group("dlcp")
    if dist.get_rank() == 1:
        print("OK peer_dies", flush=True)
        os._exit(0)
    t = torch.ones(1 << 18)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "rank 1" in str(e) and "allreduce" in str(e), e
    else:
        raise AssertionError("an all-reduce without its peer returned")
    work = dist.broadcast(t, src=0, async_op=True)
    try:
        work.wait()
    except RuntimeError as e:
        assert "rank 1" in str(e), e
    else:
        raise AssertionError("a broadcast without its peer returned")
    assert work.is_completed() and not work.is_success()
    # an operation finished by a copy-out step fails the same way
    try:
        dist.all_gather([torch.zeros(4), torch.zeros(4)], torch.ones(4))
    except RuntimeError as e:
        assert "rank 1" in str(e), e
    else:
        raise AssertionError("an all-gather without its peer returned")


def tcp_init_method():
    """init_process_group with a tcp:// URL and without MASTER_ADDR and
    MASTER_PORT in the environment."""
    url = "tcp://%s:%s" % (os.environ.pop("MASTER_ADDR"),
                           os.environ.pop("MASTER_PORT"))
    r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("dlcp", init_method=url, rank=r, world_size=w)
    t = torch.full((1000,), float(r + 1))
    dist.all_reduce(t)
    assert (t == w * (w + 1) / 2).all(), t
    dist.destroy_process_group()


def api_tensors():
    """The dlcp API itself on CPU torch tensors: zero-copy, every dtype."""
    comm = dlcp.Communicator()
    r, w = comm.rank, comm.size
    for dtype in DTYPES:
        t = torch.full((1000,), r + 1, dtype=dtype)
        ptr = t.data_ptr()
        res = comm.allreduce(t)
        assert t.data_ptr() == ptr and (t == w * (w + 1) // 2).all(), dtype
        assert res.delivered_fraction == 1.0
    try:
        comm.allreduce(torch.ones(4, 4)[:, 0])
    except ValueError as e:
        assert "contiguous" in str(e)
    else:
        raise AssertionError("a strided tensor was accepted")
    comm.close()


def main():
    scenario = sys.argv[1]
    globals()[scenario](*sys.argv[2:])
    print(f"OK {scenario}")


if __name__ == "__main__":
    main()
