#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets in tests/fuzz/corpus/.

Each target gets a few valid messages (built here independently of the C
encoders, from the layouts in src/wire/wire.h and src/rt/rendezvous.h) and
some edge cases that a decoder must reject; the scenario parser gets the
checked-in scenarios/ plus broken variants, the environment loader typical
launcher environments.  The output is deterministic: run it again and the
files come out byte for byte the same.

Usage: tests/fuzz/make_corpus.py [CORPUS_DIR]
"""
import os
import shutil
import struct
import sys

MAGIC = 0xD1C9
VERSION = 4
DATA, ACK, START, PROBE, BITMAP, STOP, FINISH, NOTE, EAGER = range(1, 10)
CDATA, CACK, OFFER = 10, 11, 12


def preamble(mtype, job, xfer, length):
    return struct.pack("<HBBIII", MAGIC, VERSION, mtype, job, xfer, length)


def data(job=1, xfer=1, flags=0, path=0, layer=0, tensor=0, seq=0,
         offset=0, tx_ts=0, payload=b"\x00"):
    body = struct.pack("<BBHIIQQ", flags, path, layer, tensor, seq, offset,
                       tx_ts)
    return preamble(DATA, job, xfer, 44 + len(payload)) + body + payload


def ack(job=1, xfer=1, echo_ts=0, rx_pkts=0, seq=0, covered=0, ce=0,
        grant=0, hold=0):
    return preamble(ACK, job, xfer, 48) + struct.pack(
        "<QIIHHIII", echo_ts, rx_pkts, seq, covered, ce, grant, hold, 0)


def start(job, entries, xfer=0, reserved=0):
    body = struct.pack("<HH", len(entries), reserved)
    for tensor, txid, size, ppm, seg in entries:
        body += struct.pack("<IIQIIQ", tensor, txid, size, ppm, seg, 0)
    return preamble(START, job, xfer, 16 + len(body)) + body


def probe(job=1, xfer=1, rnd=1, sent=0):
    return preamble(PROBE, job, xfer, 24) + struct.pack("<II", rnd, sent)


def stop(job=1, xfer=1, status=0, have=0, nbytes=0):
    return preamble(STOP, job, xfer, 32) + struct.pack("<iIQ", status, have,
                                                       nbytes)


def finish(job=1, xfer=1, status=0, sent=0):
    return preamble(FINISH, job, xfer, 24) + struct.pack("<iI", status, sent)


def note(job=1, op=7, value=0x123456789, xfer=0, reserved=0):
    return preamble(NOTE, job, xfer, 32) + struct.pack("<IIQ", op, reserved,
                                                        value)


def offer(job=1, tensor=3, size=100000, xfer=0, reserved=0):
    return preamble(OFFER, job, xfer, 32) + struct.pack("<IIQ", tensor,
                                                         reserved, size)


def eager(job=1, tensor=3, layer=0, flags=0, reserved=0, xfer=0,
          payload=b"\x01\x02\x03\x04"):
    body = struct.pack("<IHBB", tensor, layer, flags, reserved) + payload
    return preamble(EAGER, job, xfer, 16 + len(body)) + body


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def bitmap(nsegs, first, end, have, ranges, job=1, xfer=1, rnd=1,
           raw=None, nranges=None):
    """|ranges| is a list of (start, count); |raw| overrides the bytes."""
    body = bytearray()
    prev = first
    for s, c in ranges:
        body += varint(s - prev) + varint(c)
        prev = s + c
    if raw is not None:
        body = bytearray(raw)
    if nranges is None:
        nranges = len(ranges)
    hdr = struct.pack("<IIIIII", rnd, nsegs, first, end, have, nranges)
    return preamble(BITMAP, job, xfer, 40 + len(body)) + hdr + bytes(body)


RDZV_MAGIC, RDZV_VERSION = 0xD15A, 4
HELLO, SET, GET, WAIT, GATHER = 1, 2, 3, 4, 5


def rdzv_request(op, key=b"", value=b"", version=RDZV_VERSION, reserved=0):
    return struct.pack("<HBBHHI", RDZV_MAGIC, version, op, len(key),
                       reserved, len(value)) + key + value


def rdzv_hello(rank, world=4, job=7, incarnation=None):
    if incarnation is None:
        incarnation = 0x1000 + rank
    return rdzv_request(HELLO, value=struct.pack("<IIIQ", rank, world, job,
                                                 incarnation))


class Rdzv:
    """fuzz_rdzv's program, built step by step (ops in fuzz_rdzv.c)."""

    def __init__(self):
        self.out = bytearray()

    def connect(self, k):
        self.out += bytes([k])
        return self

    def write(self, k, blob):
        while True:
            piece, blob = blob[:255], blob[255:]
            self.out += bytes([1 << 2 | k, len(piece)]) + piece
            if not blob:
                return self

    def read(self, k):
        self.out += bytes([2 << 2 | k])
        return self

    def end(self, k):
        self.out += bytes([3 << 2 | k])
        return self

    def reset(self, k):
        self.out += bytes([4 << 2 | k])
        return self

    def advance(self, units50ms):
        self.out += bytes([5 << 2, units50ms])
        return self

    def bytes(self):
        return bytes(self.out)


def scenario_corpus():
    here = os.path.dirname(os.path.abspath(__file__))
    sdir = os.path.join(here, "..", "..", "scenarios")
    c = {}
    for name in sorted(os.listdir(sdir)):
        if name.endswith(".yaml"):
            with open(os.path.join(sdir, name), "rb") as f:
                c[name[:-5]] = f.read()
    base = c.get("incast", b"seed: 1\n")
    c["with_sets"] = base + b"\0seed=2\0topology.kind=dumbbell"
    # Several jobs, the CPU model's fields and INA's exponents.
    c["collective-cpu-jobs"] = (
        b"name: collective-cpu-jobs\n"
        b"topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4, spines: 2}\n"
        b"aggregation: {switch: tor1, memory: 64KiB}\n"
        b"workload:\n"
        b"  collective:\n"
        b"    - {algo: ra_ina, bytes: 1MB, ranks: 4, exponents: given}\n"
        b"    - {algo: ring, bytes: 400KB, ranks: 3, reduce_time: 2us,\n"
        b"       reduce_rate: 100Gbps,\n"
        b"       straggler: [{rank: 1, delay: 20us}, "
        b"{rank: 2, delay: 5us, receives: all}]}\n"
        b"    - {algo: ps, bytes: 400KB, ranks: 1, straggler: {rank: 0, delay: 1us}}\n"
    )
    # ECN on a port's total: accepted with strict priority, refused with
    # pFabric's ports.
    c["port_threshold"] = (c.get("mlt-lossy-fabric", b"seed: 1\n") +
                           b"\0switch.ecn_port_threshold=65pkts")
    c["port_threshold_pfabric"] = (base + b"\0switch.scheduling=pfabric"
                                   b"\0switch.ecn_port_threshold=64KB")
    c["ps_placement"] = (b"workload:\n  ps: {workers: 3, servers: 2, "
                         b"profile: googlenet, placement: balanced}\n")
    c["bad_unit"] = b"topology:\n  host_rate: 100Gbpx\n"
    c["bad_yaml"] = b"topology: [\n"
    c["anchors"] = b"a: &x {b: 1}\nc: *x\n"
    c["empty"] = b""
    return c


def alternating(nsegs, first=0):
    return [(s, 1) for s in range(first, nsegs, 2)]


def corpora():
    c = {}
    c["data"] = {
        "min": data(),
        "seg1456": data(job=7, xfer=9, flags=0x1B, path=3, layer=12,
                        tensor=44, seq=1000, offset=2912, tx_ts=123456789,
                        payload=bytes(range(256)) * 5 + bytes(176)),
        "offset_max": data(flags=0x1F, offset=(1 << 64) - 2,
                           payload=b"\xff"),
        "max_payload": data(payload=bytes(65463)),
        "bad_flags": data(flags=0x20),
        "empty_payload": preamble(DATA, 1, 1, 44) + bytes(28),
        "offset_wraps": data(offset=(1 << 64) - 1, payload=b"ab"),
    }
    c["ack"] = {
        "min": ack(),
        "max": ack(job=0xFFFFFFFF, xfer=0xFFFFFFFF, echo_ts=(1 << 64) - 1,
                   rx_pkts=0xFFFFFFFF),
        "seq": ack(seq=7),
        "xfer0": ack(xfer=0),
    }
    c["start"] = {
        "one": start(1, [(1, 1, 4096, 0, 1456)]),
        "three": start(77, [(1, 11, 4096, 0, 1456),
                            (2, 12, 1, 999999, 64),
                            (3, 0xFFFFFFFF, 1 << 30, 10000, 65463)]),
        "size0": start(2, [(5, 6, 0, 0, 64)]),
        "max_segs": start(3, [(1, 2, 0xFFFFFFFF * 64, 0, 64)]),
        "too_many_segs": start(3, [(1, 2, 0xFFFFFFFF * 64 + 1, 0, 64)]),
        "ppm_1e6": start(1, [(1, 1, 10, 1000000, 1456)]),
        "seg_small": start(1, [(1, 1, 10, 0, 63)]),
        "xfer_nonzero": start(1, [(1, 1, 10, 0, 1456)], xfer=5),
        "count_mismatch": start(1, [(1, 1, 10, 0, 1456)])[:16] +
        struct.pack("<HH", 2, 0) + start(1, [(1, 1, 10, 0, 1456)])[20:],
    }
    c["probe"] = {
        "min": probe(),
        "max": probe(job=0xFFFFFFFF, xfer=0xFFFFFFFF, rnd=0xFFFFFFFF,
                     sent=0xFFFFFFFF),
        "xfer0": probe(xfer=0),
    }
    c["stop"] = {
        "ok": stop(have=10, nbytes=14560),
        "timeout": stop(status=-216, have=3, nbytes=(1 << 64) - 1),
        "int_min": stop(status=-(1 << 31)),
        "positive": stop(status=1),
    }
    c["finish"] = {
        "ok": finish(sent=99),
        "nomem": finish(status=-501, sent=0xFFFFFFFF),
        "positive": finish(status=0x7FFFFFFF),
    }
    c["bitmap"] = {
        "empty": bitmap(1000, 0, 1000, 1000, []),
        "nsegs0": bitmap(0, 0, 0, 0, []),
        "all_missing": bitmap(1000, 0, 1000, 0, [(0, 1000)]),
        "alternating": bitmap(300, 0, 300, 150, alternating(300)),
        "alternating_from1": bitmap(301, 1, 301, 150, alternating(301, 1)),
        "mixed": bitmap(300, 0, 300, 196, [(0, 3), (10, 1), (200, 100)]),
        "cut": bitmap(300, 0, 200, 196, [(0, 3), (10, 1)]),
        "huge_run": bitmap(0xFFFFFFFF, 0, 0xFFFFFFFF, 0, [(0, 0xFFFFFFFF)]),
        "big_gap": bitmap(1 << 20, 5, 1 << 20, 0, [(100000, 20000),
                                                   ((1 << 20) - 1, 1)]),
        "nonminimal": bitmap(100, 0, 100, 0, [], raw=b"\x80\x00\x05",
                             nranges=1),
        "varint6": bitmap(100, 0, 100, 0, [],
                          raw=b"\x00\x81\x80\x80\x80\x80\x00", nranges=1),
        "adjacent": bitmap(100, 0, 100, 0, [], raw=b"\x00\x05\x00\x05",
                           nranges=2),
        "past_end": bitmap(100, 0, 100, 0, [(95, 6)]),
        "trailing": bitmap(100, 0, 100, 0, [], raw=b"\x00\x05\x00",
                           nranges=1),
        "cut_touching": bitmap(100, 0, 50, 0, [(40, 10)]),
    }
    c["note"] = {
        "valid": note(),
        "zero": note(job=0, op=0, value=0),
        "max": note(job=0xFFFFFFFF, op=0xFFFFFFFF, value=(1 << 64) - 1),
        "xfer_set": note(xfer=1),
        "reserved_set": note(reserved=1),
    }
    c["offer"] = {
        "valid": offer(),
        "zero": offer(job=0, tensor=0, size=0),
        "max": offer(job=0xFFFFFFFF, tensor=0xFFFFFFFF, size=(1 << 64) - 1),
        "xfer_set": offer(xfer=1),
        "reserved_set": offer(reserved=1),
        "note_type": note(),
    }
    c["peek"] = {
        "data": c["data"]["min"],
        "ack": c["ack"]["min"],
        "start": c["start"]["one"],
        "probe": c["probe"]["min"],
        "bitmap": c["bitmap"]["mixed"],
        "stop": c["stop"]["ok"],
        "finish": c["finish"]["ok"],
        "note": c["note"]["valid"],
        "offer": c["offer"]["valid"],
        "eager": eager(),
        "eager_empty": eager(payload=b""),
        "eager_bad_flags": eager(flags=0x08),
        "cack_early": preamble(CACK, 1, 250000, 40) + struct.pack(
            "<IIIIQ", 5, 1, 2, 3, 123456789),
        "cack_seq_alone": preamble(CACK, 1, 0, 40) + struct.pack(
            "<IIIIQ", 5, 0, 0, 3, 0),
        "stream_two": c["probe"]["min"] + c["ack"]["min"],
        "prefix_only": preamble(BITMAP, 1, 1, 1 << 20),
        "short": preamble(PROBE, 1, 1, 24)[:15],
        "bad_magic": struct.pack("<HBBIII", 0xC9D1, VERSION, PROBE, 1, 1, 24),
        "bad_version": struct.pack("<HBBIII", MAGIC, VERSION - 1, PROBE, 1, 1,
                                   24),
        "bad_type": struct.pack("<HBBIII", MAGIC, VERSION, 10, 1, 1, 24),
        "too_long": preamble(BITMAP, 1, 1, (1 << 20) + 1),
    }
    c["eager"] = {
        "valid": eager(),
        "empty": eager(payload=b""),
        "prio7": eager(flags=7, layer=0xFFFF, tensor=0xFFFFFFFF),
        "bad_flags": eager(flags=0x08),
        "xfer_set": eager(xfer=1),
        "reserved_set": eager(reserved=1),
    }
    wait = struct.pack("<I", 60000)
    c["rdzv"] = {
        "exchange": Rdzv().connect(0).connect(1)
        .write(0, rdzv_hello(0)).write(1, rdzv_hello(1))
        .write(0, rdzv_request(SET, b"addr/0", b"127.0.0.1 1 1 2"))
        .write(1, rdzv_request(WAIT, b"addr/0", struct.pack("<I", 1000)))
        .write(0, rdzv_request(GET, b"addr/0")).read(0).read(1)
        .end(0).end(1).bytes(),
        "wait_then_set": Rdzv().connect(0).connect(1)
        .write(0, rdzv_hello(2)).write(0, rdzv_request(WAIT, b"k", wait))
        .write(1, rdzv_hello(1)).write(1, rdzv_request(SET, b"k", b"v"))
        .read(0).read(1).bytes(),
        "gather_out_of_order": Rdzv().connect(0).connect(1)
        .write(0, rdzv_hello(0)).write(1, rdzv_hello(1))
        .write(0, rdzv_request(GATHER, b"addr", struct.pack("<III", 60000,
                                                               0, 4)))
        .write(1, rdzv_request(SET, b"addr/3", b"h3 1 1 2"))
        .write(1, rdzv_request(SET, b"addr/0", b"h0 1 1 2"))
        .write(1, rdzv_request(SET, b"addr/2", b""))
        .write(1, rdzv_request(SET, b"addr/1", b"h1 1 1 2"))
        .read(0).read(1).bytes(),
        "gather_expires": Rdzv().connect(0).write(0, rdzv_hello(0))
        .write(0, rdzv_request(SET, b"b/0", b""))
        .write(0, rdzv_request(GATHER, b"b", struct.pack("<III", 100, 0, 2)))
        .advance(3).read(0).bytes(),
        "gather_split": Rdzv().connect(0).write(0, rdzv_hello(0))
        .write(0, rdzv_request(SET, b"v/0", bytes(40000)))
        .write(0, rdzv_request(SET, b"v/1", bytes(40000)))
        .write(0, rdzv_request(GATHER, b"v", struct.pack("<III", 0, 0, 2)))
        .read(0).bytes(),
        "gather_bad": Rdzv().connect(0).write(0, rdzv_hello(0))
        .write(0, rdzv_request(GATHER, b"v", struct.pack("<III", 0, 3, 2)))
        .read(0).bytes(),
        "wait_expires": Rdzv().connect(0).write(0, rdzv_hello(0))
        .write(0, rdzv_request(WAIT, b"k", struct.pack("<I", 100)))
        .advance(3).read(0).bytes(),
        "parked_pipeline": Rdzv().connect(0).write(0, rdzv_hello(0))
        .write(0, rdzv_request(WAIT, b"never", wait) +
               rdzv_request(GET, b"x" * 200) * 4).end(0).bytes(),
        "garbage": Rdzv().connect(0).write(0, b"GET / HTTP/1.0\r\n\r\n")
        .read(0).bytes(),
        "oversized": Rdzv().connect(0).write(0, struct.pack(
            "<HBBHHI", RDZV_MAGIC, RDZV_VERSION, SET, 257, 0, 1 << 30))
        .read(0).bytes(),
        "wrong_job": Rdzv().connect(0).write(0, rdzv_hello(1, job=8))
        .read(0).bytes(),
        "wrong_world": Rdzv().connect(0).write(0, rdzv_hello(1, world=5))
        .read(0).bytes(),
        "dup_rank": Rdzv().connect(0).connect(1).write(0, rdzv_hello(1))
        .write(1, rdzv_hello(1, incarnation=99)).read(1).bytes(),
        "reconnect": Rdzv().connect(0).write(0, rdzv_hello(1))
        .write(0, rdzv_request(WAIT, b"k", wait)).connect(1)
        .write(1, rdzv_hello(1)).write(1, rdzv_request(SET, b"k", b"v"))
        .read(1).read(0).bytes(),
        "old_version": Rdzv().connect(0).write(0, rdzv_request(
            HELLO, value=struct.pack("<II", 1, 4), version=1)).read(0)
        .bytes(),
        "split_header": Rdzv().connect(0).write(0, rdzv_hello(0)[:5])
        .write(0, rdzv_hello(0)[5:]).read(0).bytes(),
        "silent_then_late": Rdzv().connect(0).advance(30).connect(1)
        .write(1, rdzv_hello(0)).read(1).bytes(),
        "flood": Rdzv().connect(0).connect(1).connect(2).connect(3)
        .reset(0).connect(0).bytes(),
        "unread_big": Rdzv().connect(0).write(0, rdzv_hello(3))
        .write(0, rdzv_request(SET, b"big", bytes(4000)))
        .write(0, rdzv_request(GET, b"big") * 8).advance(30).bytes(),
    }
    c["scenario"] = scenario_corpus()
    # fuzz_agg_peers: a table-size byte, then operations (0 x: intern IPv6
    # sender x, pinned with bit 2; 1: an IPv4 sender's 4 + 2 bytes; 2 x:
    # resolve sender x's cookie; 3: an arbitrary 8-byte cookie).
    c["agg_peers"] = {
        "fill_and_evict": bytes([3]) +
        b"".join(bytes([0, x]) for x in range(12)) +
        b"".join(bytes([2, x]) for x in range(12)),
        "pinned": bytes([7, 4, 200, 4, 201]) +
        b"".join(bytes([0, x]) for x in range(40)) + bytes([2, 200, 2, 201]),
        "ipv4_and_raw": bytes([1, 1, 10, 0, 0, 1, 0x1f, 0x90, 0, 5, 3]) +
        (1 << 63 | 5).to_bytes(8, "little") + bytes([3]) +
        (0x0a0000011f90).to_bytes(8, "little"),
    }
    c["env"] = {
        "launcher": b"MASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\nRANK=1\n"
                    b"WORLD_SIZE=4\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=4\n",
        "faults": b"RANK=0\nWORLD_SIZE=2\nMASTER_ADDR=localhost\n"
                  b"MASTER_PORT=1\nDLCP_FAULT_DROP=1%\nDLCP_FAULT_DUP=0.01\n"
                  b"DLCP_FAULT_REORDER=0.5\nDLCP_FAULT_DELAY=0.1\n"
                  b"DLCP_FAULT_DELAY_US=100\nDLCP_FAULT_SEED=42\n"
                  b"DLCP_FAULT_PAUSE=1:10:20,0:5:5\n"
                  b"DLCP_FAULT_STRAGGLE=1:3\n",
        "tuning": b"DLCP_PATHS=8\nDLCP_SEGMENT=auto\nDLCP_TIMEOUT_MS=5000\n"
                  b"DLCP_EAGER_BYTES=0\nDLCP_SPIN_US=0\nDLCP_SHM=0\n"
                  b"DLCP_WINDOW_BYTES=0\nDLCP_RTT_LOW_US=10\n"
                  b"DLCP_RTT_HIGH_US=100\nDLCP_QUEUE_PKTS=0\n"
                  b"DLCP_RATE_GBPS=10\n"
                  b"DLCP_JOB=12345\n",
        "topo": b"WORLD_SIZE=8\nRANK=3\nMASTER_ADDR=h\nMASTER_PORT=2\n"
                b"DLCP_TOPO=rack:4\n",
        "labels": b"WORLD_SIZE=8\nRANK=3\nMASTER_ADDR=h\nMASTER_PORT=2\n"
                  b"DLCP_TOPO=rack0/pod1\n",
        "mpiexec": b"PMI_RANK=1\nPMI_SIZE=3\nMPI_LOCALRANKID=1\n"
                   b"MASTER_ADDR=10.0.0.1\n",
        "mpirun": b"OMPI_COMM_WORLD_RANK=2\nOMPI_COMM_WORLD_SIZE=4\n"
                  b"MASTER_ADDR=10.0.0.1\n",
        "srun": b"SLURM_PROCID=1\nSLURM_NTASKS=2\n"
                b"SLURM_LAUNCH_NODE_IPADDR=10.0.0.9\nMASTER_PORT=4000\n",
        "unknown": b"DLCP_PATH=4\n",
        "bad_range": b"DLCP_PATHS=0\n",
    }
    return c


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    for target, files in sorted(corpora().items()):
        d = os.path.join(root, target)
        # Start from an empty directory so renamed seeds do not linger.
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for name, blob in sorted(files.items()):
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
    return 0


if __name__ == "__main__":
    sys.exit(main())
