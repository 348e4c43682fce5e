"""PyTorch integration of dlcp (docs/pytorch.md).

    import dlcp.torch
    dlcp.torch.register_ddp_hook(ddp_model, loss_bound=0.0)   # a DDP hook
    torch.distributed.init_process_group("dlcp")              # or a backend

Importing this module registers the "dlcp" backend of torch.distributed.
"""

from . import backend
from .hook import DlcpHookState, dlcp_hook, register_ddp_hook

backend.register()

__all__ = ["DlcpHookState", "dlcp_hook", "register_ddp_hook", "backend"]
