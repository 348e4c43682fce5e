"""ctypes declarations of libdlcp's public API (include/dlcp/dlcp.h).

Only the public header is bound.  The structures mirror the C ones field
by field; a change of the header must be mirrored here (the tests exercise
every structure).  ctypes releases the GIL around every foreign call, so a
thread blocked in dlcp_wait does not stop the interpreter.
"""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load():
    """Loads libdlcp.so: $DLCP_LIBRARY if set (a development override),
    else the copy installed inside this package."""
    path = os.environ.get("DLCP_LIBRARY") or os.path.join(_HERE, "libdlcp.so")
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"dlcp: cannot load the C library {path!r} ({e}); install the "
            "package from the repository (make python) or set DLCP_LIBRARY "
            "to build/lib/libdlcp.so") from None


lib = _load()

c_u8, c_u16, c_u32, c_u64 = (ctypes.c_uint8, ctypes.c_uint16,
                             ctypes.c_uint32, ctypes.c_uint64)
c_int, c_double, c_size, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_double,
                                               ctypes.c_size_t,
                                               ctypes.c_char_p,
                                               ctypes.c_void_p)

# enum dlcp_dtype, dlcp_redop, dlcp_algo (dlcp_types.h)
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "int64": 4}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}
REDOPS = {"sum": 0, "avg": 1, "min": 2, "max": 3}
# ina and ra_ina sum all-reduces in the aggregation switch at DLCP_SWITCH
# (docs/ina.md).
ALGOS = {"auto": 0, "ring": 1, "ring_bypass": 2, "ps": 3,
         "halving_doubling": 4, "rat": 5, "direct": 6,
         "recursive_doubling": 7, "ina": 8, "ra_ina": 9}
ERR_CANCELED = -214
ERR_PENDING = -221


class Range(ctypes.Structure):
    _fields_ = [("offset", c_u64), ("len", c_u64)]


class CommConfig(ctypes.Structure):
    _fields_ = [
        ("version", c_u32),  # DLCP_COMM_CONFIG_VERSION, set by the default
        ("rank", c_u32), ("world_size", c_u32),
        ("master_addr", c_char_p), ("master_port", c_u16),
        ("local_addr", c_char_p),
        ("job", c_u32), ("paths", c_u32), ("segment_bytes", c_u32),
        ("line_rate_gbps", c_double), ("window_bytes", c_u64),
        ("eager_bytes", c_u32), ("spin_us", c_u32), ("shm", c_u32),
        ("timeout_ms", c_u32), ("rdzv_timeout_ms", c_u32),
        ("topo", c_char_p),
        ("fault_drop", c_double), ("fault_dup", c_double),
        ("fault_reorder", c_double), ("fault_delay", c_double),
        ("fault_delay_us", c_u32), ("fault_seed", c_u64),
        ("fault_straggle_ms", c_u32), ("control_datagrams", c_u32),
        ("job_secret", c_char_p),
    ]


class CommStats(ctypes.Structure):
    """dlcp_comm_stats, field for field (tests/python checks the order
    against include/dlcp/dlcp.h)."""
    _fields_ = [(name, c_u64) for name in (
        "datagrams_sent", "datagrams_received", "dropped_malformed",
        "dropped_foreign", "dropped_stale", "dropped_invalid",
        "fault_dropped", "fault_duplicated", "fault_delayed",
        "retransmissions", "shm_peers", "machine_ranks", "shm_sent",
        "shm_full", "doorbells")] + [("min_rate_gbps", c_double)] + [
        (name, c_u64) for name in (
            "max_srtt_ns", "ce_received", "cuts_ecn", "cuts_delay",
            "control_retx", "control_retx_needless", "paths_left_out",
            "paths_rerouted",
            "auth_forged", "auth_replayed", "data_reordered",
            "bitmaps_early", "bitmaps_unprompted", "window_timeouts",
            "acks_quiet", "acks_received", "ack_hold_ns", "max_ack_hold_ns",
            "ina_groups", "ina_ring_groups", "ina_resent", "ina_busy",
            "ina_waiting", "ina_dup_results", "datagrams_coalesced",
            "ina_datagrams_received", "ina_datagrams_coalesced",
            "datagrams_unsent", "control_redials", "datagrams_rx_dropped",
            "ina_datagrams_rx_dropped", "data_overtaken_in_host")]


class CollOpts(ctypes.Structure):
    _fields_ = [("algo", c_int), ("loss_bound", c_double),
                ("layer", c_u32), ("nlayers", c_u32),
                ("chunk_bytes", c_u64), ("bypass_alpha", c_double),
                ("f32_importance", c_int)]


class CollInfo(ctypes.Structure):
    _fields_ = [("status", c_int), ("error", ctypes.c_char * 224),
                ("algo", c_int), ("algo_name", c_char_p),
                ("delivered_fraction", c_double),
                ("missing", ctypes.POINTER(Range)), ("nmissing", c_size),
                ("bypasses", c_u32), ("elapsed_ns", c_u64)]


def _declare(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


P = ctypes.POINTER
_declare("dlcp_strerror", c_char_p, c_int)
_declare("dlcp_algo_str", c_char_p, c_int)
_declare("dlcp_comm_config_default", None, P(CommConfig))
_declare("dlcp_comm_create", c_int, P(c_void_p), P(CommConfig), c_char_p,
         c_size)
_declare("dlcp_comm_create_from_env", c_int, P(c_void_p), c_char_p, c_size)
_declare("dlcp_comm_destroy", None, c_void_p)
_declare("dlcp_comm_rank", c_u32, c_void_p)
_declare("dlcp_comm_size", c_u32, c_void_p)
_declare("dlcp_comm_get_stats", None, c_void_p, P(CommStats))
_declare("dlcp_coll_opts_default", None, P(CollOpts))
for _name in ("dlcp_allreduce", "dlcp_reduce_scatter"):
    _declare(_name, c_int, c_void_p, c_void_p, c_void_p, c_u64, c_int, c_int,
             P(CollOpts), P(c_void_p))
_declare("dlcp_allgather", c_int, c_void_p, c_void_p, c_void_p, c_u64, c_int,
         P(CollOpts), P(c_void_p))
_declare("dlcp_reduce", c_int, c_void_p, c_void_p, c_void_p, c_u64, c_int,
         c_int, c_u32, P(CollOpts), P(c_void_p))
_declare("dlcp_broadcast", c_int, c_void_p, c_void_p, c_u64, c_int, c_u32,
         P(CollOpts), P(c_void_p))
_declare("dlcp_barrier", c_int, c_void_p, P(c_void_p))
_declare("dlcp_wait", c_int, c_void_p, c_int, P(CollInfo))
_declare("dlcp_test", c_int, c_void_p, P(c_int), P(CollInfo))
_declare("dlcp_request_free", None, c_void_p)


def strerror(code):
    return lib.dlcp_strerror(code).decode()
