"""Which rank this process is, from the launcher that started it.

torchrun and dlcp-run set torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT).  Slurm (srun) and Open MPI (mpirun) number
their tasks in variables of their own and know nothing of a rendezvous
address.  The C library reads all three itself (src/rt/env.c, by the
same rules); this module translates the other two into torchrun's
variables for torch.distributed's env:// initialisation and for the
local rank, which the library does not read.
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


def _master(env, launcher, how, default_addr=None):
    """MASTER_ADDR (else |default_addr|) and MASTER_PORT (else 29500);
    |how| shows how |launcher| passes MASTER_ADDR."""
    addr = env.get("MASTER_ADDR") or default_addr
    if not addr:
        raise LauncherError(
            f"{launcher} gives no rendezvous address: set MASTER_ADDR to "
            f"rank 0's host (e.g. {how})")
    port = DEFAULT_MASTER_PORT
    if env.get("MASTER_PORT") is not None:
        port = _int_var(env, "MASTER_PORT", 1, 65535)
    return addr, port


def _srun_pmi(env):
    """srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE to its own numbers."""
    return (env.get("PMI_RANK") is not None
            and env.get("PMI_RANK") == env.get("SLURM_PROCID")
            and env.get("PMI_SIZE") == env.get("SLURM_NTASKS"))


def detect(env=None):
    """Returns (launcher, variables): the torchrun-style variables this
    process should have, or (None, {}) when nothing is set (a world of one).

    torchrun's own variables win when RANK is set; then Open MPI's
    OMPI_COMM_WORLD_RANK/_SIZE; then MPICH's (Hydra's, Intel MPI's)
    PMI_RANK/PMI_SIZE, unless they are srun's own numbers (srun
    --mpi=pmi2); both with MASTER_ADDR, required. Then Slurm's
    SLURM_PROCID/SLURM_NTASKS (+ MASTER_ADDR, else
    SLURM_LAUNCH_NODE_IPADDR). An MPI launcher's variables come before
    Slurm's because under mpiexec inside an allocation every rank
    inherits the batch step's SLURM_PROCID. The C library (rt/env.c)
    follows the same rules."""
    env = os.environ if env is None else env
    if "RANK" in env or "WORLD_SIZE" in env:
        return "torchrun", {}
    if "OMPI_COMM_WORLD_RANK" in env:
        size = _int_var(env, "OMPI_COMM_WORLD_SIZE", 1)
        rank = _int_var(env, "OMPI_COMM_WORLD_RANK", 0, size - 1)
        local = env.get("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))
        local_size = env.get("OMPI_COMM_WORLD_LOCAL_SIZE", str(size))
        addr, port = _master(env, "Open MPI", "mpirun -x MASTER_ADDR=host0")
        launcher = "openmpi"
    elif ("PMI_RANK" in env or "PMI_SIZE" in env) and not _srun_pmi(env):
        size = _int_var(env, "PMI_SIZE", 1)
        rank = _int_var(env, "PMI_RANK", 0, size - 1)
        local = env.get("MPI_LOCALRANKID", str(rank))
        local_size = env.get("MPI_LOCALNRANKS", str(size))
        addr, port = _master(env, "MPICH", "mpiexec -genv MASTER_ADDR host0")
        launcher = "mpich"
    elif "SLURM_PROCID" in env:
        size = _int_var(env, "SLURM_NTASKS", 1)
        rank = _int_var(env, "SLURM_PROCID", 0, size - 1)
        local = env.get("SLURM_LOCALID", str(rank))
        local_size = env.get("SLURM_NTASKS_PER_NODE", str(size)).split("(")[0]
        addr, port = _master(env, "Slurm",
                             "srun --export=ALL,MASTER_ADDR=host0",
                             env.get("SLURM_LAUNCH_NODE_IPADDR"))
        launcher = "slurm"
    else:
        return None, {}
    return launcher, {"RANK": str(rank), "WORLD_SIZE": str(size),
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
