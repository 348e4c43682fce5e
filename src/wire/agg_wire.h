/*
 * agg_wire.h: the in-network aggregation (INA) datagrams exchanged between
 * hosts and an aggregation switch (dlcp-switch, or the simulator's switch
 * role).  Encode and decode only: no state, no policy.
 *
 * INA datagrams have their own magic, so a switch or a host can never take
 * an MLT datagram (magic 0xD1C9, src/wire/wire.h) for one of these, and
 * their type numbers are independent of MLT's.  Everything is little-endian.
 * Every message starts with the same 32-byte header:
 *
 *   off size field
 *   0   2    magic    0xD1CA (bytes CA D1)
 *   2   1    version  DLCP_AGG_WIRE_VERSION
 *   3   1    type     dlcp_agg_type
 *   4   4    job      job id: which job's aggregators the packet addresses
 *   8   8    token    the job's secret, chosen at random when the job
 *                     starts; the switch binds it to the job id on the
 *                     job's first packet and drops (and counts) any later
 *                     packet of that job id with another token, so no job
 *                     can read or corrupt another's aggregators
 *   16  4    group    group index inside the job's operation
 *   20  4    low      CONTRIB, CLAIM, ACK: the sender's low-water mark, the lowest
 *                     group for which it still needs the switch (every
 *                     group below it has its result or its verdict);
 *                     NACK TOO_BIG: the most consecutive aggregators the
 *                     switch can ever give the job (its pool, or the job's
 *                     partition), 1..nblocks-1; NACK BUSY: the job's
 *                     static partition, or its share of a shared pool
 *                     (the pool over the active jobs), in aggregators, so
 *                     that its hosts size their windows to it;
 *                     RESULT, GRANT, other NACKs: zero
 *   24  1    rank     CONTRIB, CLAIM, ACK: the sender; RESULT, NACK, GRANT:
 *                     the receiver
 *   25  1    world    workers in the job, 1..DLCP_AGG_MAX_WORLD
 *   26  1    nblocks  aggregator blocks in the group, 1..DLCP_AGG_MAX_BLOCKS
 *                     (RA-INA: n blocks, n = world, the seed's grouping)
 *   27  1    flags    bits 0-1 ECN: CONTRIB, CLAIM zero (the switch takes the
 *                     codepoint from the IP header), RESULT the OR of the
 *                     contributions' codepoints (3 = CE seen; the
 *                     result itself leaves ECT(0), so a CE in its IP
 *                     header is its own path's);
 *                     bit 2 RING (CONTRIB, CLAIM: the sender runs RA-INA:
 *                     if no aggregators are free, give the group a ring
 *                     verdict instead of asking to retry); bit 3 RETX
 *                     (CONTRIB, CLAIM: a retransmission, informational;
 *                     ACK: of a result that came again, which shows the
 *                     switch its re-send was needless); rest zero; ACK:
 *                     RETX only; GRANT: zero
 *   28  2    elems    int32 elements per block, 1..DLCP_AGG_MAX_BLOCK_ELEMS;
 *                     must equal the switch's block size
 *   30  2    aux      RESULT: cap, the aggregators the job may hold:
 *                     those it holds and its share of the free ones
 *                     (saturating; PANAMA's cwnd_cap); NACK: the reason
 *                     (dlcp_agg_nack); CONTRIB: the place of the
 *                     receiving switch at its parent in a chain of
 *                     switches (CINA), low byte the rank and high byte the
 *                     world it contributes with there, or zero (the
 *                     switch's sums are final); CLAIM, ACK, GRANT: zero
 *   32  ...  payload  CONTRIB and RESULT: nblocks * elems int32 values,
 *                     block after block; NACK WAITING: 8 bytes, the bitmap
 *                     of the workers whose contributions the group holds
 *                     (bit r: rank r; none at or above world); ACK,
 *                     CLAIM, GRANT and other NACKs: nothing
 *
 * The datagram's length must be exactly 32 + 4 * nblocks * elems (CONTRIB,
 * RESULT), 40 (NACK WAITING) or 32 (ACK, CLAIM, GRANT, other NACKs), and at most
 * DLCP_AGG_DGRAM_MAX.
 */
#ifndef DLCP_WIRE_AGG_WIRE_H
#define DLCP_WIRE_AGG_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#define DLCP_AGG_WIRE_MAGIC 0xD1CAu
/* 2: CLAIM, GRANT, NACK WAITING and the cap's meaning added; 3: a
 * CONTRIB's chain place (CINA).  A switch and hosts of different versions
 * drop each other's datagrams (the hosts then time out naming the switch)
 * rather than half-understand them. */
#define DLCP_AGG_WIRE_VERSION 3u
#define DLCP_AGG_HDR_LEN 32u
/* UDP's largest payload over IPv4. */
#define DLCP_AGG_DGRAM_MAX 65507u
/* Worker bitmaps are 64 bits wide. */
#define DLCP_AGG_MAX_WORLD 64u
#define DLCP_AGG_MAX_BLOCKS 255u
#define DLCP_AGG_MAX_BLOCK_ELEMS 4096u
/* The seed's block: 64 int32 elements, 256 bytes (one Tofino pass). */
#define DLCP_AGG_DEFAULT_BLOCK_ELEMS 64u

#define DLCP_AGG_FLAG_ECN_MASK 0x03u
#define DLCP_AGG_FLAG_RING 0x04u
#define DLCP_AGG_FLAG_RETX 0x08u
#define DLCP_AGG_FLAGS_KNOWN 0x0Fu
/* The ECN codepoints "ECN-capable" (ECT(0)) and "congestion experienced"
 * (RFC 3168). */
#define DLCP_AGG_ECN_ECT0 0x02u
#define DLCP_AGG_ECN_CE 0x03u

typedef enum dlcp_agg_type {
  DLCP_AGG_CONTRIB = 1, /* host -> switch: one worker's share of a group */
  DLCP_AGG_RESULT = 2,  /* switch -> host: the group's sum over all workers */
  DLCP_AGG_ACK = 3,     /* host -> switch: result received, free it */
  DLCP_AGG_NACK = 4,    /* switch -> host: the group is not aggregated */
  /* host -> switch: a group's header without its payload, asking for its
   * verdict first (RA-INA: a group given a ring verdict then costs the
   * host no upload) */
  DLCP_AGG_CLAIM = 5,
  DLCP_AGG_GRANT = 6    /* switch -> host: the group has its aggregators,
                           send the contribution */
} dlcp_agg_type;

/* A CONTRIB's chain place: rank |r| of world |w| at the parent switch. */
#define DLCP_AGG_CHAIN_PLACE(r, w) ((uint16_t)((uint32_t)(r) | ((uint32_t)(w) << 8)))
#define DLCP_AGG_CHAIN_RANK(aux) ((uint8_t)((aux) & 0xFFu))
#define DLCP_AGG_CHAIN_WORLD(aux) ((uint8_t)((aux) >> 8))

/* Why a NACK was sent (its aux field). */
typedef enum dlcp_agg_nack {
  /* RA-INA: no n consecutive aggregators were free when the group's first
   * packet arrived: the group runs ring all-reduce; every worker of the
   * group gets the same verdict. */
  DLCP_AGG_NACK_RING = 1,
  /* Plain INA: no aggregators free now (or the job's partition is full):
   * retry the contribution later, with no more groups outstanding than
   * the NACK's |low| aggregators hold (a partition; 0: no limit). */
  DLCP_AGG_NACK_BUSY = 2,
  /* The group was aggregated and freed (every worker acknowledged it), or
   * lies below every worker's low-water mark: the packet is stale.  A host
   * that holds the result ignores it; one that does not has lost the
   * group (the switch restarted, or gave up re-sending its result) and
   * fails. */
  DLCP_AGG_NACK_GONE = 3,
  /* The group lies too far ahead of the job's slowest worker for the
   * switch's verdict window: retry later. */
  DLCP_AGG_NACK_AHEAD = 4,
  /* The packet's block size differs from the switch's, or its world from
   * the one the job registered with: a configuration error, fatal. */
  DLCP_AGG_NACK_CONFIG = 5,
  /* The switch's job table is full: fatal for this attempt. */
  DLCP_AGG_NACK_NO_JOB = 6,
  /* Plain INA: the group needs more consecutive aggregators (nblocks)
   * than the switch's whole pool, or the job's static partition, holds
   * (the NACK's |low| field says how many that is): it could never be
   * aggregated, so the switch says so at once instead of BUSY for ever.
   * Fatal.  (An RA-INA group in that case gets a RING verdict.) */
  DLCP_AGG_NACK_TOO_BIG = 7,
  /* A contribution the group already holds, while the group still waits
   * for others (the sender re-sent it: no result came).  The payload says
   * who has contributed, so a host that times out can name the ranks the
   * group waits for instead of blaming the switch.  Retry later. */
  DLCP_AGG_NACK_WAITING = 8
} dlcp_agg_nack;

/* The payload of a NACK WAITING. */
#define DLCP_AGG_WAITING_LEN 8u


typedef struct dlcp_agg_hdr {
  uint8_t type; /* dlcp_agg_type */
  uint32_t job;
  uint64_t token;
  uint32_t group;
  uint32_t low;  /* NACK TOO_BIG, BUSY: the aggregators the job can have */
  uint8_t rank;
  uint8_t world;
  uint8_t nblocks;
  uint8_t flags; /* DLCP_AGG_FLAG_* */
  uint16_t elems; /* per block */
  uint16_t aux;   /* RESULT: cap; NACK: dlcp_agg_nack */
} dlcp_agg_hdr;

/* dlcp_agg_payload_len returns the payload bytes a message with header |h|
 * carries (DLCP_AGG_WAITING_LEN for NACK WAITING, 0 for ACK and the other
 * NACKs). */
size_t dlcp_agg_payload_len(const dlcp_agg_hdr *h);

/*
 * dlcp_agg_hdr_encode writes the 32-byte header |h| into |buf|.  The
 * payload, if any, is the caller's to write right after it (the switch sums
 * straight from the aggregator, the host scales straight into it).
 * Returns DLCP_AGG_HDR_LEN, DLCP_ERR_BUFFER_TOO_SMALL, or
 * DLCP_ERR_INVALID_ARGUMENT for anything dlcp_agg_decode would reject.
 */
dlcp_ssize dlcp_agg_hdr_encode(uint8_t *buf, size_t buflen,
                               const dlcp_agg_hdr *h);

/*
 * dlcp_agg_decode validates the datagram |buf| of exactly |buflen| bytes
 * and fills |h|; for CONTRIB and RESULT |*payload| points into |buf| at
 * the nblocks * elems little-endian int32 values, for NACK WAITING at the
 * little-endian 64-bit bitmap (NULL otherwise).
 * Returns 0, DLCP_ERR_TRUNCATED (shorter than the header or the payload
 * the header announces), DLCP_ERR_BAD_MAGIC, DLCP_ERR_BAD_VERSION,
 * DLCP_ERR_BAD_TYPE, DLCP_ERR_BAD_LENGTH (longer than announced or than
 * DLCP_AGG_DGRAM_MAX) or DLCP_ERR_INVALID_ARGUMENT (world, rank, nblocks,
 * elems out of range, unknown flags, a nonzero field the type requires to
 * be zero, an unknown NACK reason, a WAITING bitmap with a bit at or above
 * world).  |h| is written only on success.
 */
int dlcp_agg_decode(dlcp_agg_hdr *h, const uint8_t **payload,
                    const uint8_t *buf, size_t buflen);

#endif /* DLCP_WIRE_AGG_WIRE_H */
