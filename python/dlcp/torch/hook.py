"""The DDP communication hook: DDP's gradient buckets all-reduced by dlcp.

    model = torch.nn.parallel.DistributedDataParallel(model)
    state = dlcp.torch.register_ddp_hook(model, loss_bound=0.01)

DDP keeps its process group (Gloo) for what it does besides gradients
(the initial broadcast of parameters and buffers); the gradients go
through dlcp.  Each bucket:
  - is divided by the world size and summed, as DDP's stock allreduce
    hook averages;
  - carries MLT's layer priority: the front-most layer of the bucket's
    parameters, i, of the model's L layers with parameters gives priority
    i * 8 / L (the MLT seed's i*P/L: front layers are needed first by the
    next forward pass, so they go first);
  - carries MLT's importance (float32 buckets, importance=True): a packet
    whose mean |g| exceeds the median |g| of a 5 % sample of the data it
    belongs to is marked important, the others are dropped first by a
    congested switch;
  - with loss_bound p > 0, may come back with up to that fraction of its
    elements missing; they are zero in the result (so their average lacks
    those contributions) and counted on the state.
The hook returns a torch.futures.Future at once; a completion thread of
the state waits for dlcp (without the GIL) and completes it.
"""

import queue
import threading

import torch
import torch.distributed as dist

import dlcp

from . import _rendezvous

_hooks_registered = 0  # names each hook's rendezvous key, same on every rank


class DlcpHookState:
    """The hook's communicator, options and counters.

    delivered_fractions: per finished step (a backward pass), the share of
    the gradient elements that arrived (1.0 at loss_bound 0); steps: their
    number; missing_elements / total_elements: over all steps;
    last_results: the dlcp.Result of each bucket of the last step."""

    def __init__(self, comm, loss_bound, algo, importance, layer_of):
        self.comm = comm
        self.loss_bound = loss_bound
        self.algo = algo
        self.importance = importance
        self.layer_of = layer_of  # parameter id -> (layer index, layers)
        self.steps = 0
        self.delivered_fractions = []
        self.total_elements = 0
        self.missing_elements = 0
        self.last_results = []
        self._step_total = 0
        self._step_missing = 0
        self._step_results = []
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._complete, daemon=True,
                                        name=f"dlcp-hook-{comm.rank}")
        self._thread.start()

    def bucket_layer(self, bucket):
        """(layer, nlayers) of |bucket|: its front-most parameter's layer."""
        layers = [self.layer_of[id(p)] for p in bucket.parameters()
                  if id(p) in self.layer_of]
        return min(layers) if layers else (0, 0)

    def _complete(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            handle, fut, tensor, last = item
            try:
                result = handle.wait()
            except Exception as e:  # dlcp.Error: the failed rank named
                fut.set_exception(e)
                continue
            self._count(tensor.numel(), result, last)
            fut.set_result(tensor)

    def _count(self, elements, result, last):
        missing = sum(length for _, length in result.missing)
        self._step_total += elements
        self._step_missing += missing
        self._step_results.append(result)
        if last:
            total, miss = self._step_total, self._step_missing
            self.delivered_fractions.append(
                1.0 - miss / total if total else 1.0)
            self.total_elements += total
            self.missing_elements += miss
            self.last_results = self._step_results
            self.steps += 1
            self._step_total = self._step_missing = 0
            self._step_results = []

    def close(self):
        """Stops the completion thread and leaves the dlcp job."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.comm.close()


def dlcp_hook(state, bucket):
    """The communication hook (register_comm_hook's signature)."""
    tensor = bucket.buffer()
    tensor.div_(state.comm.size)
    layer, nlayers = state.bucket_layer(bucket)
    handle = state.comm.allreduce(tensor, op="sum", algo=state.algo,
                                  loss_bound=state.loss_bound, layer=layer,
                                  nlayers=nlayers,
                                  importance=(state.importance and
                                              tensor.dtype == torch.float32),
                                  async_op=True)
    fut = torch.futures.Future()
    state._queue.put((handle, fut, tensor, bucket.is_last()))
    return fut


def _layers(model):
    """Parameter id -> (index of its module among the modules owning
    parameters, in definition order, front first; their number)."""
    owners = [m for m in model.modules()
              if any(True for _ in m.parameters(recurse=False))]
    return {id(p): (i, len(owners)) for i, m in enumerate(owners)
            for p in m.parameters(recurse=False)}


def register_ddp_hook(ddp_model, loss_bound=0.0, algo="auto",
                      importance=True, communicator=None,
                      process_group=None):
    """Makes |ddp_model| (a DistributedDataParallel) all-reduce its
    gradients through dlcp and returns the hook's DlcpHookState.

    loss_bound: the fraction p in [0, 1) of each bucket that may be lost
    (0: exact, the same averages as DDP's stock hook up to the order of
    floating-point additions).  algo: a dlcp algorithm name ("auto",
    "ring", ..., "ina" through DLCP_SWITCH).  importance: mark float32
    packets by gradient magnitude (the seed's 5 % sample median).
    communicator: a dlcp.Communicator to use; by default one
    is joined over the ranks of |process_group| (default: DDP's), its
    rendezvous endpoint agreed through torch.distributed's store."""
    global _hooks_registered
    if not 0.0 <= loss_bound < 1.0:
        raise ValueError(f"loss_bound={loss_bound!r}: expected a fraction "
                         "in [0, 1)")
    if communicator is None:
        group = process_group or ddp_model.process_group
        store = dist.distributed_c10d._get_default_store()
        communicator = _rendezvous.join(
            store, dist.get_rank(group), dist.get_world_size(group),
            f"hook{_hooks_registered}")
        _hooks_registered += 1
    if not isinstance(communicator, dlcp.Communicator):
        raise TypeError("communicator must be a dlcp.Communicator")
    state = DlcpHookState(communicator, loss_bound, algo, importance,
                          _layers(ddp_model.module))
    ddp_model.register_comm_hook(state, dlcp_hook)
    return state
