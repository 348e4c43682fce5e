"""PyTorch integration: the DDP hook and the "dlcp" backend against Gloo
(torch_worker.py runs the jobs)."""

import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import dlcp.torch  # noqa: E402
from dlcp.torch.hook import _layers  # noqa: E402
from conftest import (DLCP_SWITCH, HERE, assert_ok,  # noqa: E402
                      has_ipv6_loopback, run_job)


def _ddp_params(mode, tmp_path, env=None):
    out = tmp_path / f"{mode}.pt"
    assert_ok(run_job(2, "torch_worker.py", "ddp", mode, out, env=env), 2)
    return torch.load(out)


def test_hook_and_backend_train_like_gloo(tmp_path):
    """2 ranks, 20 steps of a tiny model: the dlcp hook at p = 0 and the
    dlcp backend end with Gloo's parameters (within float tolerance: the
    sums are added in another order)."""
    gloo = _ddp_params("gloo", tmp_path)
    for mode in ("hook", "backend"):
        got = _ddp_params(mode, tmp_path)
        assert len(got) == len(gloo)
        for a, b in zip(got, gloo):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), \
                (mode, (a - b).abs().max())


def test_hook_through_the_aggregation_switch(tmp_path):
    """The same 20 steps with the hook's buckets summed by a dlcp-switch
    on loopback (algo="ina"): Gloo's parameters within float tolerance
    (the switch adds int32s scaled per group, docs/ina.md's bound), and
    the switch summed every bucket of both ranks."""
    sw = subprocess.Popen([DLCP_SWITCH, "--bind", "127.0.0.1", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        line = sw.stdout.readline()
        assert "listening on 127.0.0.1:" in line, line
        addr = line.split("listening on ")[1].split()[0]
        gloo = _ddp_params("gloo", tmp_path)
        got = _ddp_params("hook_ina", tmp_path, {"DLCP_SWITCH": addr})
    finally:
        sw.terminate()
        _, err = sw.communicate(timeout=10)
    assert len(got) == len(gloo)
    for a, b in zip(got, gloo):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()
    stats = err.rsplit("exit: packets", 1)[1].split()
    contrib = int(stats[stats.index("contrib") + 1])
    claims = int(stats[stats.index("claims") + 1])
    assert claims > 0 and contrib == 2 * claims, err[-400:]


def test_backend_every_operation_and_dtype():
    for world in (2, 3):
        assert_ok(run_job(world, "torch_worker.py", "backend_ops"), world)


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
def test_backend_over_ipv6():
    """The backend's operations with MASTER_ADDR ::1: torch's store and
    dlcp's rendezvous, control and UDP data paths all over IPv6."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    base = {k: v for k, v in os.environ.items()
            if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                         "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    procs = [subprocess.Popen(
        [sys.executable, os.path.join(HERE, "torch_worker.py"),
         "backend_ops"],
        env=dict(base, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                 LOCAL_WORLD_SIZE="2", MASTER_ADDR="::1",
                 MASTER_PORT=str(port), DLCP_SHM="0", PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(2)]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0 and "OK backend_ops" in out, out


def test_backend_point_to_point_errors():
    assert_ok(run_job(2, "torch_worker.py", "p2p_errors"), 2)


def test_backend_raises_when_a_peer_dies():
    assert_ok(run_job(2, "torch_worker.py", "peer_dies",
                      env={"DLCP_TIMEOUT_MS": "5000"}), 2)


def test_api_on_torch_tensors_zero_copy():
    assert_ok(run_job(2, "torch_worker.py", "api_tensors"), 2)


def test_hook_loss_bound_under_injected_loss():
    assert_ok(run_job(2, "torch_worker.py", "hook_lossy",
                      env={"DLCP_FAULT_DROP": "1%"}), 2)


def test_layer_priority_is_front_first():
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(),
                                torch.nn.Linear(4, 4),
                                torch.nn.Sequential(torch.nn.Linear(4, 2)))
    layers = _layers(model)
    params = list(model.parameters())
    assert [layers[id(p)] for p in params] == \
        [(0, 3), (0, 3), (1, 3), (1, 3), (2, 3), (2, 3)]


def test_rendezvous_goes_to_the_store_s_host(monkeypatch):
    """dlcp's rank 0 publishes its address towards the host torch's
    store runs on, found under the group's prefixes, so that a job started
    with init_method="tcp://HOST:PORT" and no MASTER_ADDR works across
    hosts; without a TCP store, MASTER_ADDR, then loopback."""
    from dlcp.torch import _rendezvous
    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.2", port, 1, True)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.3")
    nested = dist.PrefixStore("a", dist.PrefixStore("b", store))
    assert _rendezvous._master_host(nested) == "127.0.0.2"
    assert _rendezvous._master_host(dist.HashStore()) == "127.0.0.3"
    monkeypatch.delenv("MASTER_ADDR")
    assert _rendezvous._master_host(dist.HashStore()) == "127.0.0.1"


def test_backend_with_a_tcp_init_method():
    assert_ok(run_job(2, "torch_worker.py", "tcp_init_method"), 2)


def test_backend_is_registered():
    assert dlcp.torch.backend.available()
    assert "DLCP" in torch.distributed.Backend._plugins
