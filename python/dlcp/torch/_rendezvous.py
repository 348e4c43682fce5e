"""Joining a dlcp job beside torch.distributed.

torch.distributed's store already listens on MASTER_PORT, so dlcp's
rendezvous needs an endpoint of its own: the group's rank 0 picks a free
port on its address towards torch's store host (or MASTER_ADDR) and
publishes "addr:port" in the group's c10d store; every rank then joins
through it.  The environment's DLCP_* options still apply.
"""

import os
import socket

import dlcp


def _local_addr(master):
    """This host's address on the route to |master| (loopback stays
    loopback)."""
    try:
        infos = socket.getaddrinfo(master, None, socket.AF_INET,
                                   socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((infos[0][4][0], 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _free_port(addr):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _master_host(store):
    """The host torch's rendezvous went through: that of the TCPStore under
    |store|'s prefixes (init_method "tcp://HOST:PORT" or "env://"), else
    MASTER_ADDR, else loopback (a file or hash store: one host)."""
    while store is not None:
        host = getattr(store, "host", None)
        if host:
            return host
        store = getattr(store, "underlying_store", None)
    return os.environ.get("MASTER_ADDR", "127.0.0.1")


def join(store, rank, size, key):
    """Returns a dlcp.Communicator of |size| ranks, this process being
    |rank|, agreed through the c10d |store| under |key|."""
    key = f"dlcp/{key}"
    if rank == 0:
        addr = _local_addr(_master_host(store))
        store.set(key, f"{addr}:{_free_port(addr)}")
    addr, port = store.get(key).decode().rsplit(":", 1)
    return dlcp.Communicator(rank=rank, world_size=size, master_addr=addr,
                             master_port=int(port))
