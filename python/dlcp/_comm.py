"""The communicator, its asynchronous handles and their results."""

import ctypes
import threading
import time
import weakref

from . import _launcher
from ._buffer import view
from ._lib import (ALGOS, DTYPES, ERR_CANCELED, ERR_PENDING, ITEMSIZE,
                   REDOPS, CollInfo, CollOpts, CommConfig, CommStats, lib,
                   strerror)


class Error(RuntimeError):
    """A dlcp call failed.  |code| is the C library's negative DLCP_ERR_*
    code, |strerror| its generic meaning, and the message the library's
    own text (a failed collective names the rank and address that
    failed)."""

    def __init__(self, code, message=""):
        self.code = code
        self.strerror = strerror(code)
        super().__init__(f"{message or self.strerror} (dlcp error {code}: "
                         f"{self.strerror})")


def _check(code, what):
    if code < 0:
        raise Error(code, f"{what}: {strerror(code)}")
    return code


class Result:
    """What a finished collective reports.

    delivered_fraction: share of the result's elements that arrived (1.0
    unless a loss bound let some go missing); missing: list of (start,
    length) element ranges that are zero in the result, identical on
    every rank; algorithm: the algorithm that ran; bypasses: slots the
    straggler-bypass ring sent past a late rank; elapsed: the library's
    time from start to completion in seconds; wall: seconds from the
    Python call to the moment its wait returned."""

    __slots__ = ("delivered_fraction", "missing", "algorithm", "bypasses",
                 "elapsed", "wall")

    def __init__(self, info, wall):
        self.delivered_fraction = info.delivered_fraction
        self.missing = [(info.missing[i].offset, info.missing[i].len)
                        for i in range(info.nmissing)]
        self.algorithm = (info.algo_name or b"").decode()
        self.bypasses = info.bypasses
        self.elapsed = info.elapsed_ns * 1e-9
        self.wall = wall

    def __repr__(self):
        return (f"Result(algorithm={self.algorithm!r}, delivered_fraction="
                f"{self.delivered_fraction:.6f}, missing={self.missing!r}, "
                f"elapsed={self.elapsed:.6f})")


class Handle:
    """A collective running in the background.  Its buffers belong to the
    library until wait() returns or test() returns True."""

    def __init__(self, req, keep, what, started):
        self._req = ctypes.c_void_p(req)
        self._keep = keep  # the buffers and communicator, alive until done
        self._what = what
        self._start = started  # time.perf_counter() before the C call
        self._result = None
        self._error = None
        self._lock = threading.Lock()

    def _finish(self, status, info):
        wall = time.perf_counter() - self._start
        if status < 0:
            msg = info.error.decode(errors="replace") or strerror(status)
            self._error = Error(status, f"{self._what}: {msg}")
        else:
            self._result = Result(info, wall)
        lib.dlcp_request_free(self._req)
        self._req = None
        self._keep = None

    def _outcome(self):
        if self._error is not None:
            raise self._error
        return self._result

    def wait(self, timeout=None):
        """Waits for the collective (at most |timeout| seconds; None:
        until it finishes or fails) and returns its Result.  Raises
        dlcp.Error if it failed, TimeoutError if it is still running after
        |timeout| (it may be waited for again)."""
        with self._lock:
            if self._req is None:
                return self._outcome()
            ms = -1 if timeout is None else max(0, int(timeout * 1000))
            info = CollInfo()
            status = lib.dlcp_wait(self._req, ms, ctypes.byref(info))
            if status == ERR_PENDING:
                raise TimeoutError(f"{self._what}: still running after "
                                   f"{timeout} s")
            self._finish(status, info)
            return self._outcome()

    def test(self):
        """True when the collective finished (then wait() returns at once)."""
        with self._lock:
            if self._req is None:
                return True
            done = ctypes.c_int(0)
            info = CollInfo()
            status = lib.dlcp_test(self._req, ctypes.byref(done),
                                   ctypes.byref(info))
            if done.value:
                self._finish(status, info)
            return bool(done.value)

    def is_completed(self):
        return self.test()

    def cancel(self):
        """Cancels a running collective on this rank (the others then fail
        it too); wait() raises dlcp.Error afterwards."""
        with self._lock:
            if self._req is not None:
                lib.dlcp_request_free(self._req)
                self._req = None
                self._keep = None
                self._error = Error(ERR_CANCELED, f"{self._what}: canceled")

    def __del__(self):
        # A handle dropped unfinished cancels its collective on this rank
        # (the library frees nothing it still uses).
        if getattr(self, "_req", None) is not None:
            lib.dlcp_request_free(self._req)


def _opts(algo, loss_bound, layer, nlayers, chunk_bytes, priority=None,
          importance=False):
    """dlcp_coll_opts; |priority| (0 most urgent .. 7), when given, stands
    for layer = priority of nlayers = 8 (the library's layer * 8 /
    nlayers)."""
    if priority is not None:
        if not 0 <= priority < 8:
            raise ValueError(f"priority={priority!r}: expected 0..7")
        layer, nlayers = priority, 8
    o = CollOpts()
    lib.dlcp_coll_opts_default(ctypes.byref(o))
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r}: expected one of {', '.join(ALGOS)}")
    if not 0.0 <= loss_bound < 1.0:
        raise ValueError(f"loss_bound={loss_bound!r}: expected a fraction "
                         "in [0, 1)")
    o.algo = ALGOS[algo]
    o.loss_bound = float(loss_bound)
    o.layer = int(layer)
    o.nlayers = int(nlayers)
    o.chunk_bytes = int(chunk_bytes)
    o.f32_importance = 1 if importance else 0
    return o


def _redop(op):
    if op not in REDOPS:
        raise ValueError(f"op={op!r}: expected one of {', '.join(REDOPS)}")
    return REDOPS[op]


class Communicator:
    """The ranks of one job.

    Communicator() joins the job described by the environment: torchrun's
    variables (torchrun, dlcp-run, dlcp-testbed), else Open MPI's
    OMPI_COMM_WORLD_RANK/_SIZE, MPICH's PMI_RANK/PMI_SIZE or Slurm's
    SLURM_PROCID/SLURM_NTASKS with MASTER_ADDR (Slurm: else
    SLURM_LAUNCH_NODE_IPADDR) and MASTER_PORT (default 29500); DLCP_*
    options apply as documented in
    docs/runtime.md.  rank, world_size, master_addr and master_port, when
    given, override the environment's values (e.g. a port of dlcp's own
    beside torch.distributed's store on MASTER_PORT).

    Communicator(rank=, world_size=, ..., **options) with options
    (dlcp_comm_config's fields: paths, timeout_ms, shm, fault_drop, ...)
    takes an explicit configuration instead and ignores the environment.

    It blocks until every rank joined.  Close it with close() (or a with
    block): that waits, bounded by the timeout, for the other ranks."""

    def __init__(self, rank=None, world_size=None, master_addr=None,
                 master_port=None, **options):
        self._ptr = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        if not options:
            self.launcher = _launcher.export()
            overrides = {"RANK": rank, "WORLD_SIZE": world_size,
                         "MASTER_ADDR": master_addr,
                         "MASTER_PORT": master_port}
            with _launcher.overridden(overrides):
                code = lib.dlcp_comm_create_from_env(
                    ctypes.byref(self._ptr), err, len(err))
        else:
            self.launcher = None
            cfg = self._config(rank, world_size, master_addr, master_port,
                               options)
            code = lib.dlcp_comm_create(ctypes.byref(self._ptr),
                                        ctypes.byref(cfg), err, len(err))
        if code < 0:
            raise Error(code, err.value.decode(errors="replace"))
        self.rank = lib.dlcp_comm_rank(self._ptr)
        self.size = lib.dlcp_comm_size(self._ptr)
        self._pending = weakref.WeakSet()

    @staticmethod
    def _config(rank, world_size, master_addr, master_port, options):
        if rank is None or world_size is None:
            raise ValueError("an explicit configuration needs rank and "
                             "world_size")
        cfg = CommConfig()
        lib.dlcp_comm_config_default(ctypes.byref(cfg))
        cfg.rank, cfg.world_size = rank, world_size
        cfg.master_addr = (master_addr or "127.0.0.1").encode()
        cfg.master_port = master_port or _launcher.DEFAULT_MASTER_PORT
        names = {f for f, _ in CommConfig._fields_}
        for key, value in options.items():
            if key not in names or key in ("version", "rank", "world_size"):
                raise TypeError(f"unknown communicator option {key!r}")
            setattr(cfg, key, value.encode() if isinstance(value, str)
                    else value)
        return cfg

    def _handle(self):
        if not self._ptr:
            raise ValueError("communicator is closed")
        return self._ptr

    def detach(self):
        """Hands the C communicator (a dlcp_comm* as an int) to a new owner,
        which must dlcp_comm_destroy it; this object is closed after."""
        ptr = self._handle().value
        self._ptr = ctypes.c_void_p()
        return ptr

    def close(self):
        """Leaves the job (idempotent).  Operations still running fail."""
        if self._ptr:
            for h in list(self._pending):
                h.cancel()
            lib.dlcp_comm_destroy(self._ptr)
            self._ptr = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def stats(self):
        """The datagram path's counters (dlcp_comm_stats) as a dict."""
        st = CommStats()
        lib.dlcp_comm_get_stats(self._handle(), ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in CommStats._fields_}

    def _run(self, what, start, keep, async_op):
        req = ctypes.c_void_p()
        started = time.perf_counter()
        code = start(ctypes.byref(req))
        _check(code, f"rank {self.rank}: {what}")
        h = Handle(req.value, (keep, self), what, started)
        self._pending.add(h)
        return h if async_op else h.wait()

    def allreduce(self, tensor, out=None, op="sum", algo="auto",
                  loss_bound=0.0, layer=0, nlayers=0, priority=None,
                  importance=False, chunk_bytes=0, async_op=False):
        """Reduces |tensor| over all ranks into |out| (default: in place).
        op: sum, avg, min, max.  algo: a name of dlcp.ALGOS.  loss_bound p
        in [0, 1): up to that fraction of the result may be missing (zero,
        reported in the Result).  layer/nlayers: MLT's switch priority,
        layer * 8 / nlayers (0 most urgent), or priority 0..7 directly.
        importance (float32 only): packets whose mean |x| exceeds the
        median of a 5 % sample are marked important, the others may be
        dropped first.  chunk_bytes: pipelining granularity (0: by size).
        Returns a Result, or a Handle with async_op=True."""
        src = view(tensor, "tensor", out is None)
        dst = src if out is None else view(out, "out", True)
        self._same(src, dst, src.count)
        o = _opts(algo, loss_bound, layer, nlayers, chunk_bytes, priority,
                  importance)
        return self._run(
            "allreduce",
            lambda r: lib.dlcp_allreduce(self._handle(), src.ptr, dst.ptr,
                                         src.count, DTYPES[src.dtype],
                                         _redop(op), ctypes.byref(o), r),
            (src, dst, o), async_op)

    def reduce_scatter(self, tensor, out=None, op="sum", algo="auto",
                       loss_bound=0.0, layer=0, nlayers=0, priority=None,
                       async_op=False):
        """Reduces |tensor| over all ranks and keeps this rank's shard of
        the result (shard(len(tensor)): offset, length) in |out|, which
        holds the shard's length in elements; with no |out|, in place at
        the shard's offset of |tensor|, whose other elements are then
        overwritten with partial sums."""
        src = view(tensor, "tensor", out is None)
        dst = src if out is None else view(out, "out", True)
        if out is not None:
            self._same(src, dst, self.shard(src.count)[1])
        o = _opts(algo, loss_bound, layer, nlayers, 0, priority)
        return self._run(
            "reduce_scatter",
            lambda r: lib.dlcp_reduce_scatter(self._handle(), src.ptr,
                                              dst.ptr, src.count,
                                              DTYPES[src.dtype], _redop(op),
                                              ctypes.byref(o), r),
            (src, dst, o), async_op)

    def shard(self, count, rank=None):
        """(offset, length) of |rank|'s shard of |count| elements, as
        reduce_scatter and allgather split them: the first count % size
        ranks get one element more."""
        rank = self.rank if rank is None else rank
        base, rem = divmod(count, self.size)
        return rank * base + min(rank, rem), base + (1 if rank < rem else 0)

    def allgather(self, tensor, out, algo="auto", async_op=False):
        """Gathers every rank's |tensor| into |out| (size * len(tensor)
        elements, rank r's at r * len(tensor)), as
        torch.distributed.all_gather_into_tensor.  |tensor| may be the
        rank's own slice of |out| (in place)."""
        src = view(tensor, "tensor", False)
        dst = view(out, "out", True)
        self._same(src, dst, src.count * self.size)
        o = _opts(algo, 0.0, 0, 0, 0)
        off, _ = self.shard(dst.count)
        in_place = src.ptr == dst.ptr + off * ITEMSIZE[dst.dtype]
        return self._run(
            "allgather",
            lambda r: lib.dlcp_allgather(self._handle(),
                                         dst.ptr if in_place else src.ptr,
                                         dst.ptr, dst.count,
                                         DTYPES[dst.dtype],
                                         ctypes.byref(o), r),
            (src, dst, o), async_op)

    def reduce(self, tensor, root=0, out=None, op="sum", algo="auto",
               loss_bound=0.0, layer=0, nlayers=0, priority=None,
               async_op=False):
        """Reduces |tensor| over all ranks into |root|'s |out| (default: in
        place): algo "auto" or "ring", a chain of the ranks, each sending
        the vector once, or "halving_doubling", a binomial tree in log2 n
        steps; the other ranks' |out| ends with a partial reduction."""
        src = view(tensor, "tensor", out is None)
        dst = src if out is None else view(out, "out", True)
        self._same(src, dst, src.count)
        self._check_root(root)
        o = _opts(algo, loss_bound, layer, nlayers, 0, priority)
        return self._run(
            "reduce",
            lambda r: lib.dlcp_reduce(self._handle(), src.ptr, dst.ptr,
                                      src.count, DTYPES[src.dtype],
                                      _redop(op), root, ctypes.byref(o), r),
            (src, dst, o), async_op)

    def broadcast(self, tensor, root=0, algo="auto", async_op=False):
        """Copies |root|'s |tensor| into every rank's."""
        buf = view(tensor, "tensor", True)
        self._check_root(root)
        o = _opts(algo, 0.0, 0, 0, 0)
        return self._run(
            "broadcast",
            lambda r: lib.dlcp_broadcast(self._handle(), buf.ptr, buf.count,
                                         DTYPES[buf.dtype], root,
                                         ctypes.byref(o), r),
            (buf, o), async_op)

    def barrier(self, async_op=False):
        """Returns when every rank entered the barrier."""
        return self._run(
            "barrier", lambda r: lib.dlcp_barrier(self._handle(), r), (),
            async_op)

    def _check_root(self, root):
        if not 0 <= root < self.size:
            raise ValueError(f"root={root}: expected a rank in "
                             f"0..{self.size - 1}")

    @staticmethod
    def _same(src, dst, expected):
        """|dst| is of |src|'s dtype and holds |expected| elements."""
        if src.dtype != dst.dtype:
            raise TypeError(f"tensor is {src.dtype} but out is {dst.dtype}")
        if dst.count != expected:
            raise ValueError(f"out has {dst.count} elements, expected "
                             f"{expected}")
