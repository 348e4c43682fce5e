#!/usr/bin/env python3
"""Writes the seed corpora of the INA libFuzzer targets (fuzz_agg,
fuzz_agg_switch, fuzz_ina_host) in tests/fuzz/corpus/.

The messages are built here from the layout in src/wire/agg_wire.h,
independently of the C encoder; the output is deterministic.

Usage: tests/fuzz/make_agg_corpus.py [CORPUS_DIR]
"""
import os
import shutil
import struct
import sys

MAGIC = 0xD1CA
CONTRIB, RESULT, ACK, NACK, CLAIM, GRANT = 1, 2, 3, 4, 5, 6


def hdr(mtype, job=7, token=0x1122334455667788, group=0, low=0, rank=0,
        world=2, nblocks=1, flags=0, elems=64, aux=0, version=3):
    return struct.pack("<HBBIQIIBBBBHH", MAGIC, version, mtype, job, token,
                       group, low, rank, world, nblocks, flags, elems, aux)


def contrib(nblocks=1, elems=64, value=1, **kw):
    return (hdr(CONTRIB, nblocks=nblocks, elems=elems, **kw) +
            struct.pack("<i", value) * (nblocks * elems))


def result(nblocks=1, elems=64, value=2, **kw):
    return (hdr(RESULT, nblocks=nblocks, elems=elems, **kw) +
            struct.pack("<i", value) * (nblocks * elems))


def corpora():
    c = {}
    c["agg"] = {
        "contrib": contrib(),
        "contrib_ra": contrib(nblocks=4, world=4, rank=3, flags=0x0C,
                              group=9, low=5),
        "result_ce": result(flags=3, aux=100),
        "ack": hdr(ACK, group=3, low=4),
        "nack_ring": hdr(NACK, aux=1),
        "nack_bad_reason": hdr(NACK, aux=9),
        "nack_waiting": hdr(NACK, world=3, group=3, aux=8) +
        struct.pack("<Q", 0b011),
        "nack_waiting_bit_ge_world": hdr(NACK, aux=8) + struct.pack("<Q", 4),
        "claim_ra": hdr(CLAIM, nblocks=4, world=4, rank=1, flags=0x04,
                        group=9, low=5),
        "grant": hdr(GRANT, nblocks=4, world=4, rank=1, group=9),
        "nack_too_big": hdr(NACK, nblocks=32, low=16, aux=7),
        "nack_too_big_low_ge_nblocks": hdr(NACK, nblocks=4, low=4, aux=7),
        "max": contrib(nblocks=255, elems=64),
        "too_big": hdr(CONTRIB, nblocks=255, elems=65),
        "short_payload": contrib()[:-1],
        "long": contrib() + b"\x00",
        "rank_ge_world": contrib(rank=2),
        "bad_version": hdr(ACK, version=1),
        "contrib_ecn": hdr(CONTRIB, flags=1, elems=1) + b"\x00" * 4,
        # CINA: a contribution naming its switch's chain place (rank 1 of
        # 2 at the parent), and one whose place has rank >= world
        "contrib_chain": contrib(aux=1 | 2 << 8),
        "contrib_chain_rank_ge_world": contrib(aux=2 | 2 << 8),
    }
    # fuzz_agg_switch programs (see its header comment)
    c["agg_switch"] = {
        "two_ranks": bytes([1, 0, 3, 1, 0, 1, 5, 0, 0,
                            1, 0, 3, 1, 1, 1, 7, 0, 3,
                            2, 0, 3, 1, 0, 1, 4, 0,
                            0, 10, 2, 0, 3, 1, 1, 1, 4, 0]),
        "pool_full": bytes([1, 0, 1, 1, 0, 2, 1, 1, 0] * 6 +
                           [1, 1, 9, 1, 0, 2, 1, 1, 0, 0, 255]),
        "forged": bytes([1, 0, 2, 1, 0, 0, 1, 0, 0,
                         1, 2, 2, 1, 1, 0, 1, 0, 0]),
        "raw": bytes([3, 32]) + hdr(ACK, job=1, token=1001, world=2),
        # RA-INA claims from both ranks of a world of 2, then their
        # contributions
        "claims": bytes([4, 0, 3, 1, 0, 1, 1, 0,
                         4, 0, 3, 1, 1, 1, 1, 0,
                         1, 0, 3, 1, 0, 1, 5, 1, 0,
                         1, 0, 3, 1, 1, 1, 7, 1, 0]),
        # CINA: both ranks of a job with a chain place complete group 0,
        # whose partial sum goes to the parent; the parent's final comes
        # back (op 5 as rank 1 of 2), the ranks acknowledge it
        "chain": bytes([1, 4, 0, 1, 0, 0, 3, 0, 0,
                        1, 4, 0, 1, 1, 0, 4, 0, 0,
                        5, 4, 0, 1, 1, 0, 9, 1, 0,
                        2, 4, 0, 1, 0, 0, 1, 0,
                        2, 4, 0, 1, 1, 0, 1, 0]),
        # plain INA's 9-block group on the pool of 8: refused at once
        "too_big": bytes([1, 0, 4, 1, 0, 15, 1, 0, 0,
                          1, 0, 4, 1, 1, 15, 1, 0, 0]),
    }
    # fuzz_ina_host programs (see its header comment): 4 bytes of
    # configuration, then operations.  A RESULT is 1, group, nblocks,
    # flags, cap (2 bytes), ECN, value, corruption; a NACK 2, group,
    # reason, low (2 bytes), WAITING bits, corruption; a GRANT 3, group,
    # corruption.  Group byte g is group g - 1 of the operation.
    def res(g, cap=64, flags=0, ecn=0, bad=0):
        return [1, g, 0, flags, cap & 255, cap >> 8, ecn, 2, bad]

    def nack(g, reason, low=0, bits=0, bad=0):
        return [2, g, reason, low & 255, low >> 8, bits, bad]

    plain = [0x00, 0x00, 0x04, 3]  # world 2, rank 0, window 5, 4 groups
    ra = [0x01, 0x04, 0x03, 3]     # RA-INA, world 2, rank 1, window 4
    c["ina_host"] = {
        "plain_results": bytes(plain + [0, 1] + sum(
            (res(g) for g in range(1, 5)), [])),
        "plain_busy": bytes(plain + nack(1, 2, low=2) + [0, 20] + sum(
            (res(g, cap=2) for g in range(1, 5)), [])),
        "plain_waiting_timeout": bytes(plain + nack(2, 8, bits=2) +
                                       [0, 255] * 12),
        "ra_ring_and_results": bytes(ra + nack(1, 1) + nack(2, 1) +
                                     res(3, cap=4) + res(4, cap=4)),
        "ra_claims": bytes([0x03, 0x04, 0x03, 3] + [3, 1, 0, 3, 2, 0] +
                           nack(3, 1) + nack(4, 1) + res(1) + res(2)),
        "ra_auto_gone": bytes([0x05, 0x04, 0x03, 3] + nack(1, 1) +
                              nack(2, 3)),
        "cc_marked": bytes([0x18, 0x01, 0x0F, 7] + sum(
            (res(g, cap=3, flags=3, ecn=3) for g in range(1, 9)), [])),
        "forged": bytes(plain + res(1, bad=1) + res(1, bad=2) +
                        res(1, bad=4) + res(1, bad=8) + [4, 32] +
                        list(hdr(RESULT, job=9, world=2, elems=4))),
        "not_ready": bytes([0x00, 0x00, 0x04, 0x83, 5, 2, 0, 1] +
                           res(1) + res(2) + [5, 4]),
    }
    return c


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    for target, files in sorted(corpora().items()):
        d = os.path.join(root, target)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for name, blob in sorted(files.items()):
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
    return 0


if __name__ == "__main__":
    sys.exit(main())
