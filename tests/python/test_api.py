"""The dlcp Python API on 1 to 4 ranks (api_worker.py does the checking)."""

import os
import random
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

import dlcp
from dlcp import _launcher
from conftest import (BUILD, HERE, assert_ok, has_ipv6_loopback,
                      rank_lines, run_job)


def test_world_of_one_in_process(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with dlcp.Communicator() as comm:
        assert (comm.rank, comm.size) == (0, 1)
        a = np.arange(10, dtype=np.float32)
        ptr = a.ctypes.data
        res = comm.allreduce(a, op="max")
        assert a.ctypes.data == ptr and np.array_equal(a, np.arange(10))
        assert res.delivered_fraction == 1.0 and res.missing == []
        out = np.zeros(10, np.int64)
        comm.allgather(np.arange(10, dtype=np.int64), out)
        assert np.array_equal(out, np.arange(10))
        comm.barrier()
        assert comm.stats()["datagrams_sent"] == 0
    with pytest.raises(ValueError, match="closed"):
        comm.barrier()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_collective_and_dtype(world):
    assert_ok(run_job(world, "api_worker.py", "collectives"), world)


@pytest.mark.parametrize("world", [2, 4])
def test_async_handles(world):
    assert_ok(run_job(world, "api_worker.py", "asynchronous"), world)


def test_wait_with_timeout(tmp_path):
    assert_ok(run_job(3, "api_worker.py", "wait_timeout",
                      env={"SYNC_DIR": str(tmp_path)}), 3)


def test_algorithm_names_are_the_library_s():
    """dlcp.ALGOS (names the API takes) maps each name to the library's
    enum value of that name, and names every algorithm the library has."""
    from dlcp._lib import lib
    for name, value in dlcp.ALGOS.items():
        assert lib.dlcp_algo_str(value).decode() == name
    assert lib.dlcp_algo_str(len(dlcp.ALGOS)).decode() == "?"


def test_invalid_arguments_raise():
    assert_ok(run_job(2, "api_worker.py", "errors"), 2)


@pytest.mark.parametrize("world", [2, 3])
def test_dead_peer_is_named(world):
    proc = run_job(world, "api_worker.py", "peer_dies",
                   env={"DLCP_TIMEOUT_MS": "5000"})
    detail = proc.stdout + proc.stderr
    assert proc.returncode == 0, detail
    for r in range(world - 1):
        errs = rank_lines(proc, r, "ERROR")
        assert errs and f"rank {world - 1}" in errs[0], detail
        assert rank_lines(proc, r, "OK"), detail


def test_loss_bound_under_injected_loss():
    proc = run_job(3, "api_worker.py", "lossy",
                   env={"DLCP_FAULT_DROP": "1%", "DLCP_FAULT_SEED": "11"})
    assert_ok(proc, 3)


def test_job_with_a_secret():
    # Over UDP (no shared memory), every datagram and control message
    # tagged; the collectives' results are checked by the worker.
    assert_ok(run_job(2, "api_worker.py", "collectives",
                      env={"DLCP_JOB_SECRET": "python test secret, 32 bytes",
                           "DLCP_SHM": "0"}), 2)
    with pytest.raises(dlcp.Error, match="job_secret"):
        dlcp.Communicator(rank=0, world_size=2, master_addr="127.0.0.1",
                          master_port=1, job_secret="short")


def test_bad_communicator_configuration_raises_dlcp_error():
    with pytest.raises(dlcp.Error) as e:
        dlcp.Communicator(rank=0, world_size=2, master_addr="127.0.0.1",
                          master_port=1, paths=0, rdzv_timeout_ms=200)
    assert e.value.code < 0 and e.value.strerror
    with pytest.raises(TypeError, match="bogus"):
        dlcp.Communicator(rank=0, world_size=1, bogus=1)


# --- launchers -------------------------------------------------------------

def test_launcher_variables_are_translated():
    slurm = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
             "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.5"}
    assert _launcher.detect(slurm) == ("slurm", {
        "RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29500"})
    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
            "MASTER_ADDR": "h0", "MASTER_PORT": "4000"}
    launcher, env = _launcher.detect(ompi)
    assert launcher == "openmpi" and env["RANK"] == "1"
    assert env["MASTER_ADDR"] == "h0" and env["MASTER_PORT"] == "4000"
    mpich = {"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0",
             "MPI_LOCALNRANKS": "1", "MASTER_ADDR": "h0"}
    assert _launcher.detect(mpich) == ("mpich", {
        "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "h0", "MASTER_PORT": "29500"})
    # mpiexec inside an allocation: every rank inherits the batch step's
    # SLURM_PROCID, and PMI_RANK numbers it.
    launcher, env = _launcher.detect(dict(mpich, SLURM_PROCID="0",
                                          SLURM_NTASKS="1"))
    assert launcher == "mpich" and env["RANK"] == "2"
    # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE to its own numbers.
    assert _launcher.detect(dict(slurm, PMI_RANK="2", PMI_SIZE="4"))[0] == \
        "slurm"
    with pytest.raises(dlcp.LauncherError, match="mpiexec -genv MASTER_ADDR"):
        _launcher.detect({"PMI_RANK": "0", "PMI_SIZE": "2"})
    with pytest.raises(dlcp.LauncherError, match="PMI_RANK is not set"):
        _launcher.detect({"PMI_SIZE": "2", "MASTER_ADDR": "h0"})
    # Only both of srun's numbers make PMI's srun's (as rt/env.c).
    with pytest.raises(dlcp.LauncherError, match="PMI_SIZE is not set"):
        _launcher.detect({"PMI_RANK": "1", "SLURM_PROCID": "1",
                          "MASTER_ADDR": "h0"})
    assert _launcher.detect({"RANK": "0", "SLURM_PROCID": "3"}) == \
        ("torchrun", {})
    assert _launcher.detect({}) == (None, {})
    with pytest.raises(dlcp.LauncherError, match="MASTER_ADDR"):
        _launcher.detect({"OMPI_COMM_WORLD_RANK": "0",
                          "OMPI_COMM_WORLD_SIZE": "2"})
    with pytest.raises(dlcp.LauncherError,
                       match=r"SLURM_PROCID='4': expected an integer in 0..3"):
        _launcher.detect(dict(slurm, SLURM_PROCID="4"))
    with pytest.raises(dlcp.LauncherError, match="MASTER_PORT='x'"):
        _launcher.detect(dict(ompi, MASTER_PORT="x"))


def _free_port():
    """A port outside the ephemeral range, as dlcp-run picks (another
    socket's connect() cannot take it before rank 0 listens)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, _ = (int(x) for x in f.read().split())
    for port in random.sample(range(10000, max(lo, 10064)), 64):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


DLCP_BENCH = os.path.join(BUILD, "bin", "dlcp-bench")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "LOCAL_RANK", "LOCAL_WORLD_SIZE")
BENCH_ARGS = ["-b", "4K", "-e", "64K", "-n", "3", "-w", "1", "-c", "1"]


def _without_torchrun(**extra):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env.update(extra)
    return env


def _assert_bench_ran(out, world):
    """dlcp-bench's rank 0 saw |world| ranks and every checked size came
    out exact."""
    assert f"# dlcp-bench: {world} ranks" in out, out
    rows = [line.split() for line in out.splitlines()
            if line.strip() and line.split()[0].isdigit()]
    assert len(rows) == 5, out  # 4 KiB .. 64 KiB
    for row in rows:
        assert row[8] == "0" and row[9] == "100.00", out  # #wrong, delivered


def _launcher_env(launcher, rank, world):
    """The variables |launcher| would give process |rank| of |world| on
    this host (MASTER_PORT aside)."""
    if launcher == "slurm":
        return dict(SLURM_PROCID=str(rank), SLURM_NTASKS=str(world),
                    SLURM_LAUNCH_NODE_IPADDR="127.0.0.1")
    if launcher == "openmpi":
        return dict(OMPI_COMM_WORLD_RANK=str(rank),
                    OMPI_COMM_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1")
    assert launcher == "mpich"
    return dict(PMI_RANK=str(rank), PMI_SIZE=str(world),
                MASTER_ADDR="127.0.0.1")


@pytest.mark.parametrize("launcher", ["slurm", "openmpi", "mpich"])
def test_c_programs_start_from_slurm_and_mpi_variables(launcher):
    """The C library reads srun's, mpirun's and mpiexec's variables itself
    (rt/env.c), so a C program needs no Python in between."""
    world, port = 3, _free_port()
    procs = []
    for r in range(world):
        env = _without_torchrun(MASTER_PORT=str(port),
                                **_launcher_env(launcher, r, world))
        procs.append(subprocess.Popen(
            [DLCP_BENCH, *BENCH_ARGS], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    _assert_bench_ran(outs[0], world)


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
@pytest.mark.parametrize("shm", ["0", "1"])
def test_c_program_over_ipv6(shm):
    """A job whose MASTER_ADDR is IPv6 runs its control and data paths over
    IPv6 (UDP with IPV6_TCLASS; shared memory on loopback when allowed)."""
    world, port = 3, _free_port()
    procs = [subprocess.Popen(
        [DLCP_BENCH, *BENCH_ARGS],
        env=_without_torchrun(RANK=str(r), WORLD_SIZE=str(world),
                              MASTER_ADDR="::1", MASTER_PORT=str(port),
                              DLCP_SHM=shm),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(world)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    _assert_bench_ran(outs[0], world)
    shm_peers = 2 if shm == "1" else 0
    assert f"{shm_peers} peers through shared memory" in outs[0], outs[0]


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
def test_python_collectives_over_ipv6():
    """Every collective of the Python API, checked by the worker, between
    3 ranks whose MASTER_ADDR is IPv6, over UDP."""
    world, port = 3, _free_port()
    procs = [subprocess.Popen(
        [sys.executable, os.path.join(HERE, "api_worker.py"), "collectives"],
        env=_without_torchrun(RANK=str(r), WORLD_SIZE=str(world),
                              MASTER_ADDR="::1", MASTER_PORT=str(port),
                              DLCP_SHM="0", PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(world)]
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        assert f"OK collectives rank {r} of {world}" in out, out


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
def test_ranks_of_two_ip_versions_fail_the_join():
    """A rank whose own address (DLCP_ADDR) is IPv6 in an IPv4 job cannot
    reach the others' sockets: the join fails, naming the addresses,
    instead of sending into the void (a rank still waiting when rank 0
    exits reports the rendezvous closed)."""
    world, port = 2, _free_port()
    procs = [subprocess.Popen(
        [DLCP_BENCH, *BENCH_ARGS],
        env=_without_torchrun(RANK=str(r), WORLD_SIZE=str(world),
                              MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                              DLCP_RDZV_TIMEOUT_MS="20000",
                              **({"DLCP_ADDR": "::1"} if r == 1 else {})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(world)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode != 0, out
    named = [out for out in outs if "same IP version" in out]
    assert named, outs
    assert "rank 1 published the address ::1" in named[0] or \
        "rank 0 published the address 127.0.0.1" in named[0], named


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="no mpirun (Debian's openmpi-bin)")
def test_c_program_under_mpirun():
    """A real mpirun: it numbers the processes, MASTER_ADDR comes with -x
    and MASTER_PORT defaults to 29500 unless given."""
    port = _free_port()
    env = _without_torchrun(OMPI_ALLOW_RUN_AS_ROOT="1",
                            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(
        ["mpirun", "-np", "3", "--oversubscribe", "--bind-to", "none",
         "-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={port}",
         DLCP_BENCH, *BENCH_ARGS],
        env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_bench_ran(proc.stdout, 3)


@pytest.mark.skipif(shutil.which("mpiexec.hydra") is None,
                    reason="no mpiexec.hydra (Debian's mpich)")
def test_c_program_under_mpich_mpiexec():
    """A real MPICH mpiexec (Hydra): PMI_RANK and PMI_SIZE number the
    processes, MASTER_ADDR comes with -genv."""
    port = _free_port()
    proc = subprocess.run(
        ["mpiexec.hydra", "-n", "3", "-genv", "MASTER_ADDR", "127.0.0.1",
         "-genv", "MASTER_PORT", str(port), DLCP_BENCH, *BENCH_ARGS],
        env=_without_torchrun(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_bench_ran(proc.stdout, 3)


@pytest.mark.parametrize("launcher", ["slurm", "openmpi", "mpich"])
def test_jobs_start_from_slurm_and_mpi_variables(launcher):
    world, port = 3, _free_port()
    procs = []
    for r in range(world):
        env = _without_torchrun(PYTHONUNBUFFERED="1", MASTER_PORT=str(port),
                                **_launcher_env(launcher, r, world))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "api_worker.py"), "launcher"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        assert f"LAUNCHER {launcher} rank {r} size {world} RANK={r} " \
               f"WORLD_SIZE={world}" in out, out


def _header_fields(struct):
    """The member names of |struct| in include/dlcp/dlcp.h, in order."""
    import re
    with open(os.path.join(HERE, "..", "..", "include", "dlcp",
                           "dlcp.h")) as f:
        text = f.read()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct),
                     text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        # "uint64_t a, b", "const char *x", "char error[224]": each
        # declarator's last identifier, outside any brackets
        for part in re.sub(r"\[.*?\]", "", decl).split(","):
            idents = re.findall(r"[A-Za-z_]\w*", part)
            if idents:
                names.append(idents[-1])
    return names


@pytest.mark.parametrize("cls,struct", [
    ("Range", "dlcp_range"), ("CommConfig", "dlcp_comm_config"),
    ("CommStats", "dlcp_comm_stats"), ("CollOpts", "dlcp_coll_opts"),
    ("CollInfo", "dlcp_coll_info")])
def test_ctypes_structs_follow_the_header(cls, struct):
    from dlcp import _lib
    py = [name for name, _ in getattr(_lib, cls)._fields_]
    assert py == _header_fields(struct)
