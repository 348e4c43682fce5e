"""Shared helpers: multi-rank jobs launched by dlcp-run on loopback."""

import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("DLCP_BUILD_DIR",
                       os.path.join(HERE, "..", "..", "build"))
DLCP_RUN = os.path.join(BUILD, "bin", "dlcp-run")
DLCP_SWITCH = os.path.join(BUILD, "bin", "dlcp-switch")


def run_job(n, worker, *args, env=None, timeout=180):
    """Runs |worker| (a file of this directory) on |n| ranks under
    dlcp-run; returns the CompletedProcess (output as text)."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    full_env.update(env or {})
    cmd = [DLCP_RUN, "-n", str(n), sys.executable,
           os.path.join(HERE, worker), *map(str, args)]
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def has_ipv6_loopback():
    """Whether this host can bind ::1 (IPv6 tests skip otherwise)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def rank_lines(proc, rank, marker):
    """The lines of |rank| that contain |marker|."""
    prefix = f"[rank {rank}] "
    return [line[len(prefix):] for line in proc.stdout.splitlines()
            if line.startswith(prefix) and marker in line]


def assert_ok(proc, n):
    """Every rank printed its OK line and the job succeeded."""
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, detail
    for r in range(n):
        assert rank_lines(proc, r, "OK"), f"rank {r} said no OK\n{detail}"


@pytest.fixture(scope="session", autouse=True)
def _has_launcher():
    if not os.access(DLCP_RUN, os.X_OK):
        pytest.fail(f"{DLCP_RUN} not built (set DLCP_BUILD_DIR)")
