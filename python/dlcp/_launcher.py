"""Which rank this process is, from the launcher that started it.

torchrun and dlcp-run set torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT).  Open MPI (mpirun), MPICH (mpiexec) and Slurm
(srun) number their tasks in variables of their own and know nothing of
a rendezvous address.  The C library reads them all itself
(src/rt/env.c, by the same rules); this module translates the others
into torchrun's variables for torch.distributed's env:// initialisation
and for the local rank, which the library does not read.
"""

import contextlib
import os
import threading

DEFAULT_MASTER_PORT = 29500  # torch.distributed's default


class LauncherError(ValueError):
    """A launcher variable is missing or malformed (the message names it)."""


def _int_var(env, name, lo, hi=None):
    raw = env.get(name)
    if raw is None:
        raise LauncherError(f"{name} is not set")
    try:
        value = int(raw, 10)
    except ValueError:
        value = None
    if value is None or value < lo or (hi is not None and value > hi):
        upper = "" if hi is None else f"..{hi}"
        raise LauncherError(
            f"{name}={raw!r}: expected an integer in {lo}{upper}")
    return value


class _Launcher:
    """A launcher, by the variables that number its processes."""

    def __init__(self, name, title, rank, size, local_rank, local_size,
                 how, addr=None):
        self.name, self.title = name, title  # as returned; in messages
        self.rank, self.size = rank, size
        self.local_rank, self.local_size = local_rank, local_size
        self.how = how    # how this launcher passes MASTER_ADDR
        self.addr = addr  # rank 0's host when MASTER_ADDR is unset


# In order of precedence, after torchrun's: an MPI launcher's before
# srun's, because under mpiexec inside an allocation every rank inherits
# the batch step's SLURM_PROCID.
_LAUNCHERS = (
    _Launcher("openmpi", "Open MPI", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_SIZE", "mpirun -x MASTER_ADDR=host0"),
    _Launcher("mpich", "MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
              "MPI_LOCALNRANKS", "mpiexec -genv MASTER_ADDR host0"),
    _Launcher("slurm", "Slurm", "SLURM_PROCID", "SLURM_NTASKS",
              "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
              "srun --export=ALL,MASTER_ADDR=host0",
              "SLURM_LAUNCH_NODE_IPADDR"),
)


def _srun_pmi(env):
    """srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE to its own numbers: such
    a task is srun's, and takes srun's address default."""
    def same(a, b):
        return env.get(a) is not None and env.get(a) == env.get(b)
    return (same("PMI_RANK", "SLURM_PROCID")
            and same("PMI_SIZE", "SLURM_NTASKS"))


def _master(env, launcher):
    """MASTER_ADDR (else the launcher's default) and MASTER_PORT (else
    29500)."""
    addr = env.get("MASTER_ADDR") or (
        env.get(launcher.addr) if launcher.addr else None)
    if not addr:
        raise LauncherError(
            f"{launcher.title} gives no rendezvous address: set MASTER_ADDR "
            f"to rank 0's host (e.g. {launcher.how})")
    port = DEFAULT_MASTER_PORT
    if env.get("MASTER_PORT") is not None:
        port = _int_var(env, "MASTER_PORT", 1, 65535)
    return addr, port


def detect(env=None):
    """Returns (launcher, variables): the torchrun-style variables this
    process should have, or (None, {}) when nothing is set (a world of one).

    torchrun's own variables win when RANK or WORLD_SIZE is set; then Open
    MPI's OMPI_COMM_WORLD_RANK/_SIZE; then MPICH's (Hydra's, Intel MPI's)
    PMI_RANK/PMI_SIZE, unless they are srun's own numbers (srun
    --mpi=pmi2); both with MASTER_ADDR, required. Then Slurm's
    SLURM_PROCID/SLURM_NTASKS (+ MASTER_ADDR, else
    SLURM_LAUNCH_NODE_IPADDR). The C library (rt/env.c) follows the same
    rules."""
    env = os.environ if env is None else env
    if "RANK" in env or "WORLD_SIZE" in env:
        return "torchrun", {}
    for launcher in _LAUNCHERS:
        if launcher.name == "mpich" and _srun_pmi(env):
            continue
        if launcher.rank in env or launcher.size in env:
            break
    else:
        return None, {}
    size = _int_var(env, launcher.size, 1)
    rank = _int_var(env, launcher.rank, 0, size - 1)
    local = env.get(launcher.local_rank, str(rank))
    # Slurm writes "2(x3)" for three nodes of two tasks.
    local_size = env.get(launcher.local_size, str(size)).split("(")[0]
    addr, port = _master(env, launcher)
    return launcher.name, {"RANK": str(rank), "WORLD_SIZE": str(size),
                           "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": local_size,
                           "MASTER_ADDR": addr, "MASTER_PORT": str(port)}


def export(env=None):
    """Sets torchrun's variables in os.environ from the detected launcher
    and returns the launcher's name ("torchrun", "openmpi", "mpich",
    "slurm" or None).  Variables already set are left alone."""
    launcher, variables = detect(env)
    for name, value in variables.items():
        os.environ.setdefault(name, value)
    return launcher


_env_lock = threading.Lock()


@contextlib.contextmanager
def overridden(values):
    """Sets the variables of |values| that are not None in os.environ (so
    the C library's getenv sees them) for the duration of the block, then
    restores the previous environment."""
    values = {k: str(v) for k, v in values.items() if v is not None}
    with _env_lock:
        saved = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
