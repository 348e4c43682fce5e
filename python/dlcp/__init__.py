"""dlcp: gradient synchronisation over MLT, from Python.

    import dlcp
    comm = dlcp.Communicator()          # torchrun / dlcp-run / Slurm / Open MPI
    comm.allreduce(array)               # numpy arrays, CPU torch tensors, in place
    h = comm.allreduce(t, loss_bound=0.01, async_op=True)
    result = h.wait()                   # delivered_fraction, missing, elapsed

dlcp.torch adds the DDP communication hook and the "dlcp" backend of
torch.distributed (docs/pytorch.md).
"""

from ._comm import Communicator, Error, Handle, Result
from ._launcher import LauncherError
from ._launcher import export as export_launcher_env
from ._lib import ALGOS, DTYPES, REDOPS, strerror

__all__ = ["Communicator", "Error", "Handle", "Result", "LauncherError",
           "export_launcher_env",
           "ALGOS", "DTYPES", "REDOPS", "strerror"]
