"""The "dlcp" backend of torch.distributed (the C++ ProcessGroupDlcp of
csrc/process_group_dlcp.cpp), registered when dlcp.torch is imported:

    import dlcp.torch
    torch.distributed.init_process_group("dlcp")

all_reduce(_coalesced) (SUM, AVG, MIN, MAX), reduce, reduce_scatter(_tensor),
broadcast, all_gather(_into_tensor), send/recv, gather, scatter,
all_to_all(_single) and barrier run on dlcp, with no Gloo group beside it,
on CPU tensors: reductions of float32, float16, bfloat16, int32 and int64,
moves of any dtype (docs/pytorch.md, "The torch.distributed backend").
"""

import torch.distributed as dist

from . import _rendezvous

try:
    from . import _backend
except ImportError as e:  # built without torch's headers
    _backend = None
    _IMPORT_ERROR = str(e)


def available():
    """True when the C++ backend was built with the package."""
    return _backend is not None


def _create(store, rank, size, timeout):
    if _backend is None:
        raise RuntimeError("dlcp: the torch.distributed backend was not built "
                           f"({_IMPORT_ERROR}); reinstall the package with "
                           "torch and libtorch-dev present")
    comm = _rendezvous.join(store, rank, size, "backend")
    return _backend.ProcessGroupDlcp(comm.detach(), rank, size)


def register():
    if "DLCP" not in dist.Backend._plugins:
        dist.Backend.register_backend("dlcp", _create)
