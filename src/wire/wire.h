/*
 * wire.h: the MLT on-the-wire formats.  Encode and decode only: no state,
 * no policy.
 *
 * Every message is little-endian and starts with the same 16-byte preamble:
 *
 *   off size field
 *   0   2    magic    0xD1C9 (bytes C9 D1)
 *   2   1    version  DLCP_WIRE_VERSION
 *   3   1    type     dlcp_wire_type
 *   4   4    job      job token; a message from another job is dropped
 *   8   4    xfer     transfer id, chosen by the receiver in START
 *                     (0 in START itself, which carries one per entry)
 *   12  4    len      total message length in bytes, preamble included
 *
 * The length in the preamble is what frames control messages on a byte
 * stream (TCP) and what a datagram's size is checked against.
 *
 * DATA (datagram channel), 44-byte header followed by the payload:
 *   16  1    flags    bits 0-2 priority (0 = most urgent), bit 3 important
 *                     (send ECN-capable), bit 4 retransmission, bit 5 last
 *                     packet of the sender's round, bit 6 ACK requested
 *                     (a sender with a small window asks for ACKs more
 *                     often than every ack_every packets); bit 7 zero
 *   17  1    path     path id chosen by the sender (source routing)
 *   18  2    layer    model layer the tensor belongs to
 *   20  4    tensor   application tensor id
 *   24  4    seq      per-transfer transmission counter
 *   28  8    offset   byte offset of the payload inside the tensor
 *   36  8    tx_ts    sender time stamp (ns), echoed by ACK
 *   44  ...  payload  len - 44 bytes
 *
 * ACK (datagram channel), 48 bytes:
 *   16  8    echo_ts  tx_ts of the data packet that triggered the ACK
 *   24  4    rx_pkts  data packets of this transfer received so far
 *   28  4    seq      seq of the data packet that triggered the ACK
 *   32  2    covered  data packets of the connection received since the
 *                     previous ACK, this one included (saturates)
 *   34  2    ce       how many of them arrived CE marked (<= covered)
 *   36  4    grant    the receiver's share of its downlink for this
 *                     connection, bytes in flight (0 = no opinion)
 *   40  4    hold     ns between the triggering packet's arrival at the
 *                     receiving host and this ACK (saturates): the
 *                     receiver's own delay, which the sender takes out of
 *                     the RTT it reads as congestion
 *   44  4    reserved (zero)
 *
 * START (control, receiver -> sender): "buffers are posted, send these":
 *   16  2    count    number of entries, >= 1
 *   18  2    reserved (zero)
 *   20  ...  count entries of 32 bytes:
 *            0 4 tensor, 4 4 xfer, 8 8 size (bytes),
 *            16 4 loss bound in parts per million (< 1000000),
 *            20 4 segment size (bytes, DLCP_WIRE_MIN_SEG..DLCP_WIRE_MAX_SEG),
 *            24 4 grant: the receiver's share of its downlink for this
 *                 connection, bytes in flight (0 = no opinion),
 *            28 4 reserved (zero)
 *            ceil(size / segment size) must fit 32 bits (BITMAP counts
 *            segments in 32 bits); size 0 is allowed
 *
 * PROBE (control, sender -> receiver), 24 bytes:
 *   16  4    round    probe round, starting at 1
 *   20  4    sent     segments sent so far (informational)
 *
 * BITMAP (control, receiver -> sender): which segments are still missing,
 * as a list of ranges inside the window [first, end) of segment indices:
 *   16  4    round    the PROBE round this answers; 0: unprompted, sent
 *                     when a round's last packet arrived with more
 *                     missing than the loss bound allows
 *   20  4    nsegs    total segments of the tensor
 *   24  4    first    window start (segment index)
 *   28  4    end      window end (exclusive); end < nsegs means the list
 *                     did not fit and segments >= end are not described
 *   32  4    have     segments the receiver holds in total
 *   36  4    nranges  number of missing ranges in the window
 *   40  ...  ranges   nranges pairs of unsigned LEB128 varints (gap, run):
 *                     gap = start - previous range end (window start for
 *                     the first), run = range length >= 1
 *
 * The range list is canonical, so one state has exactly one encoding:
 * varints are in their shortest form (at most 5 bytes), ranges are maximal
 * (gap >= 1 after the first range), and a cut window (end < nsegs) lists at
 * least one range and ends where the first unlisted range starts, so
 * segment end - 1 is held.
 *
 * STOP (control, receiver -> sender), 32 bytes:
 *   16  4    status   0, or a DLCP_ERR_* the receiver failed with (int32;
 *                     positive values are rejected)
 *   20  4    have     segments held when stopping
 *   24  8    bytes    bytes held when stopping
 *
 * FINISH (control, sender -> receiver), 24 bytes:
 *   16  4    status   0, or a DLCP_ERR_* the sender failed with (<= 0)
 *   20  4    sent     data packets sent in total
 *
 * NOTE (control, either way), 32 bytes: a collective operation's small
 * reliable message (straggler bypass, loss agreement); xfer is 0:
 *   16  4    op       the collective operation's id on this job
 *   20  4    reserved (zero)
 *   24  8    value    the operation's 64-bit note
 *
 * EAGER (control, sender -> receiver): a whole small tensor carried on the
 * reliable channel instead of START + DATA + STOP, so a latency-bound
 * transfer costs one one-way trip; xfer is 0 (the receiver never announced
 * one), the tensor id matches the receiver's post as START would:
 *   16  4    tensor   application tensor id
 *   20  2    layer    model layer the tensor belongs to
 *   22  1    flags    bits 0-2 priority; rest zero
 *   23  1    reserved (zero)
 *   24  ...  payload  the tensor, len - 24 bytes (may be empty)
 *
 * OFFER (control, sender -> receiver), 32 bytes: a send above the eager
 * size that has waited long for its START says what it holds, so that a
 * receiver waiting for an EAGER of that tensor instead learns at once
 * that the sizes disagree; xfer is 0 (no START has named one):
 *   16  4    tensor   application tensor id
 *   20  4    reserved (zero)
 *   24  8    size     the send's bytes
 *
 * CDATA (datagram, either way): one control message (START ... OFFER,
 * with its own preamble), or one piece of it, carried on the datagram
 * channel with its own retransmission, so a lost control message costs an
 * RTO of a few RTTs instead of TCP's 200 ms floor.  A message longer than
 * what fits one frame of the path goes as consecutive pieces, never as
 * one datagram that IP fragments: a lost fragment loses the whole
 * datagram, and incomplete ones fill the kernel's reassembly memory until
 * it drops every fragment for its 30 s timeout (docs/protocol.md).  The
 * preamble's xfer field says how many bytes of the message follow this
 * piece in the next CDATAs (0: the message ends here):
 *   16  4    cseq     the sender's control sequence number (per
 *                     connection and direction, from 0, wrapping)
 *   20  4    ack      a cumulative acknowledgement of the other
 *                     direction, as CACK's next: every cseq before it has
 *                     arrived (a CDATA carries one, so the reply to a
 *                     control message acknowledges it for free)
 *   24  8    tx_ts    sender time stamp (ns) of this transmission, echoed
 *                     by the CACK it brings about
 *   32  ...  the control message or piece, len - 32 bytes (at least 1;
 *            with the bytes that follow, at most DLCP_WIRE_CTRL_MAX)
 *
 * CACK (datagram, either way), 40 bytes.  The preamble's xfer field is
 * the hold: ns between the arrival of the CDATA echoed below and this
 * CACK (saturates), the delay this end added on purpose or not, which the
 * sender takes out of the round trip up to the ack delay both ends agree
 * on (as QUIC's ACK Delay; the data ACK's hold is the same measure):
 *   16  4    next     every cseq before this one has arrived
 *   20  4    sack     bit i set: cseq next + 1 + i has arrived too
 *   24  4    early    messages that arrived again, since the previous
 *                     CACK, before this end had acknowledged their first
 *                     copy (saturates): the sender's timeout was shorter
 *                     than this end took to answer, so its copy was
 *                     needless (a duplicate of an acknowledged message
 *                     may only mean the acknowledgement was lost, and is
 *                     not counted)
 *   28  4    early_seq  the cseq of the latest of them (0 if early is 0)
 *   32  8    echo_ts  tx_ts of the latest CDATA that arrived before this
 *                     CACK, leaving out copies of messages this end held
 *                     but had not acknowledged (the transmission that
 *                     brought the message stays echoed): it tells an
 *                     acknowledgement of a copy from one of the first
 *                     transmission (Karn's ambiguity)
 */
#ifndef DLCP_WIRE_H
#define DLCP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#define DLCP_WIRE_MAGIC 0xD1C9u
#define DLCP_WIRE_VERSION 4u
#define DLCP_WIRE_PREAMBLE_LEN 16u
#define DLCP_WIRE_DATA_HDR_LEN 44u
#define DLCP_WIRE_ACK_LEN 48u
#define DLCP_WIRE_PROBE_LEN 24u
#define DLCP_WIRE_STOP_LEN 32u
#define DLCP_WIRE_FINISH_LEN 24u
#define DLCP_WIRE_NOTE_LEN 32u
#define DLCP_WIRE_EAGER_HDR_LEN 24u
#define DLCP_WIRE_OFFER_LEN 32u
#define DLCP_WIRE_START_HDR_LEN 20u
#define DLCP_WIRE_START_ENTRY_LEN 32u
#define DLCP_WIRE_BITMAP_HDR_LEN 40u
#define DLCP_WIRE_CDATA_HDR_LEN 32u
#define DLCP_WIRE_CACK_LEN 40u
/* The largest control message a decoder accepts (1 MiB).  With segments of
 * at least 1400 bytes, even the worst-case bitmap of a 1 GiB tensor (every
 * other segment missing: 2 bytes per range) fits. */
#define DLCP_WIRE_CTRL_MAX (1u << 20)
/* The largest datagram (UDP's limit). */
#define DLCP_WIRE_DGRAM_MAX 65507u
#define DLCP_WIRE_MIN_SEG 64u
#define DLCP_WIRE_MAX_SEG (DLCP_WIRE_DGRAM_MAX - DLCP_WIRE_DATA_HDR_LEN)
#define DLCP_WIRE_PPM 1000000u
#define DLCP_WIRE_PRIO_MASK 0x07u
#define DLCP_WIRE_FLAG_IMPORTANT 0x08u
#define DLCP_WIRE_FLAG_RETX 0x10u
#define DLCP_WIRE_FLAG_LAST 0x20u
#define DLCP_WIRE_FLAG_ACK_REQ 0x40u
#define DLCP_WIRE_FLAGS_KNOWN 0x7Fu

typedef enum dlcp_wire_type {
  DLCP_WIRE_DATA = 1,
  DLCP_WIRE_ACK = 2,
  DLCP_WIRE_START = 3,
  DLCP_WIRE_PROBE = 4,
  DLCP_WIRE_BITMAP = 5,
  DLCP_WIRE_STOP = 6,
  DLCP_WIRE_FINISH = 7,
  DLCP_WIRE_NOTE = 8,
  DLCP_WIRE_EAGER = 9,
  DLCP_WIRE_CDATA = 10,
  DLCP_WIRE_CACK = 11,
  DLCP_WIRE_OFFER = 12,
} dlcp_wire_type;

typedef struct dlcp_wire_preamble {
  uint8_t type;  /* dlcp_wire_type */
  uint32_t job;
  uint32_t xfer;
  uint32_t len; /* total message length, bytes */
} dlcp_wire_preamble;

typedef struct dlcp_wire_data {
  uint32_t job;
  uint32_t xfer;
  uint8_t flags; /* DLCP_WIRE_PRIO_MASK | DLCP_WIRE_FLAG_* */
  uint8_t path;
  uint16_t layer;
  uint32_t tensor;
  uint32_t seq;
  uint64_t offset;   /* bytes into the tensor */
  uint64_t tx_ts;    /* ns */
  uint16_t payload_len; /* bytes following the header */
} dlcp_wire_data;

typedef struct dlcp_wire_ack {
  uint32_t job;
  uint32_t xfer;
  uint64_t echo_ts; /* ns */
  uint32_t rx_pkts;
  uint32_t seq; /* of the acknowledged packet: everything the sender sent
                   before it has arrived or is lost */
  uint16_t covered; /* packets received since the previous ACK */
  uint16_t ce;      /* of which CE marked; <= covered */
  uint32_t grant;   /* receiver's window grant, bytes; 0 = none */
  uint32_t hold_ns; /* receiver's delay before this ACK */
} dlcp_wire_ack;

typedef struct dlcp_wire_start_entry {
  uint32_t tensor;
  uint32_t xfer;     /* != 0 */
  uint64_t size;     /* bytes */
  uint32_t loss_ppm; /* < DLCP_WIRE_PPM */
  uint32_t seg_size; /* DLCP_WIRE_MIN_SEG..DLCP_WIRE_MAX_SEG */
  uint32_t grant;    /* receiver's window grant, bytes; 0 = none */
} dlcp_wire_start_entry;

typedef struct dlcp_wire_probe {
  uint32_t job;
  uint32_t xfer;
  uint32_t round;
  uint32_t sent;
} dlcp_wire_probe;

typedef struct dlcp_wire_stop {
  uint32_t job;
  uint32_t xfer;
  int32_t status;
  uint32_t have;
  uint64_t bytes;
} dlcp_wire_stop;

typedef struct dlcp_wire_finish {
  uint32_t job;
  uint32_t xfer;
  int32_t status;
  uint32_t sent;
} dlcp_wire_finish;

typedef struct dlcp_wire_note {
  uint32_t job;
  uint32_t op;
  uint64_t value;
} dlcp_wire_note;

typedef struct dlcp_wire_eager {
  uint32_t job;
  uint32_t tensor;
  uint16_t layer;
  uint8_t priority; /* 0..7 */
} dlcp_wire_eager;

typedef struct dlcp_wire_offer {
  uint32_t job;
  uint32_t tensor;
  uint64_t size;
} dlcp_wire_offer;

typedef struct dlcp_wire_cack {
  uint32_t job;
  uint32_t next; /* every cseq before it has arrived */
  uint32_t sack; /* bit i: cseq next + 1 + i has arrived */
  uint32_t early;     /* copies that came before we acknowledged the first */
  uint32_t early_seq; /* the cseq of the latest of them (0 if none) */
  uint64_t echo_ts;   /* tx_ts of the latest CDATA that arrived (above) */
  uint32_t hold_ns;   /* since that CDATA arrived (above) */
} dlcp_wire_cack;

/* A CDATA's envelope; |inner| points into the datagram decoded. */
typedef struct dlcp_wire_cdata {
  uint32_t job;
  uint32_t cseq;
  uint32_t ack;  /* every cseq of the other direction before it arrived */
  uint32_t rest; /* bytes of the message after this piece */
  uint64_t tx_ts;
  const uint8_t *inner;
  size_t inner_len;
} dlcp_wire_cdata;

/* A run of segment indices [start, start + count). */
typedef struct dlcp_wire_range {
  uint32_t start;
  uint32_t count;
} dlcp_wire_range;

typedef struct dlcp_wire_bitmap {
  uint32_t job;
  uint32_t xfer;
  uint32_t round;
  uint32_t nsegs;
  uint32_t first;
  uint32_t end;
  uint32_t have;
  uint32_t nranges;
  /* Points into the decoded message: the varint-encoded range list, valid
   * while the message buffer is.  Walk it with dlcp_wire_bitmap_next(). */
  const uint8_t *ranges;
  size_t ranges_len;
} dlcp_wire_bitmap;

/*
 * dlcp_wire_peek decodes the preamble of |buf| (|buflen| bytes, possibly a
 * prefix of a stream).  It checks magic, version, type and that len is
 * plausible for the type (at least the fixed part, at most
 * DLCP_WIRE_CTRL_MAX or DLCP_WIRE_DGRAM_MAX; exactly the size of ACK, PROBE,
 * STOP, FINISH, NOTE, CACK and OFFER; 20 + 32k for START; a non-empty
 * payload for DATA).  It
 * does not require the whole message to be present: a stream reader uses
 * |pre->len| to know how much to wait for.
 *
 * Returns 0, DLCP_ERR_TRUNCATED if fewer than 16 bytes are present,
 * DLCP_ERR_BAD_MAGIC, DLCP_ERR_BAD_VERSION, DLCP_ERR_BAD_TYPE or
 * DLCP_ERR_BAD_LENGTH.
 */
int dlcp_wire_peek(dlcp_wire_preamble *pre, const uint8_t *buf, size_t buflen);

/*
 * dlcp_wire_data_encode writes the 44-byte DATA header for |d| (whose
 * payload_len must already be set) into |buf|.  The payload is not copied:
 * the caller sends it from the application buffer right after the header.
 * Returns DLCP_WIRE_DATA_HDR_LEN, or DLCP_ERR_BUFFER_TOO_SMALL /
 * DLCP_ERR_INVALID_ARGUMENT (unknown flag bits, payload too large).
 */
dlcp_ssize dlcp_wire_data_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_data *d);

/*
 * dlcp_wire_data_decode decodes the DATA datagram |buf| of exactly |buflen|
 * bytes.  On success |*payload| points into |buf| at the payload.  The
 * preamble length must equal |buflen|, the payload must not be empty and
 * offset + payload_len must not overflow 64 bits.  Whether the offset lies
 * inside the tensor is checked by dlcp_wire_data_check_bounds(), which needs
 * the tensor's size.
 * Returns 0 or a negative DLCP_ERR_* code from the preamble or
 * DLCP_ERR_BAD_LENGTH / DLCP_ERR_INVALID_ARGUMENT (unknown flags, xfer 0) /
 * DLCP_ERR_BAD_OFFSET (offset + payload_len overflows).
 *
 * All decoders below share these conventions: DLCP_ERR_TRUNCATED when
 * |buflen| is shorter than the preamble length, DLCP_ERR_BAD_LENGTH when it
 * is longer or a count or varint does not match the bytes,
 * DLCP_ERR_BAD_TYPE for a message of another type, and
 * DLCP_ERR_INVALID_ARGUMENT for a field value the format forbids (nonzero
 * reserved bytes, xfer 0, a range outside the window ...).  The output is
 * written only on success.  Encoders reject with DLCP_ERR_INVALID_ARGUMENT
 * whatever the decoders would reject.
 */
int dlcp_wire_data_decode(dlcp_wire_data *d, const uint8_t **payload,
                          const uint8_t *buf, size_t buflen);

/*
 * dlcp_wire_data_decode_header decodes a DATA datagram of |dgram_len| bytes
 * from its first |hdr_len| bytes alone (at least the 44-byte header), with
 * the same checks as dlcp_wire_data_decode: for a receiver that reads the
 * header first and the payload straight to where it belongs.
 */
int dlcp_wire_data_decode_header(dlcp_wire_data *d, const uint8_t *hdr,
                                 size_t hdr_len, size_t dgram_len);

/*
 * dlcp_wire_data_check_bounds returns 0 if the payload of |d| lies in a
 * tensor of |size| bytes cut into |seg_size|-byte segments: the offset is
 * segment aligned and the length is exactly that segment's length.  It
 * returns DLCP_ERR_BAD_OFFSET otherwise.
 */
int dlcp_wire_data_check_bounds(const dlcp_wire_data *d, uint64_t size,
                                uint32_t seg_size);

dlcp_ssize dlcp_wire_ack_encode(uint8_t *buf, size_t buflen,
                                const dlcp_wire_ack *a);
int dlcp_wire_ack_decode(dlcp_wire_ack *a, const uint8_t *buf, size_t buflen);

/*
 * dlcp_wire_start_encode writes a START carrying |n| entries.  Returns the
 * message length, DLCP_ERR_BUFFER_TOO_SMALL or DLCP_ERR_INVALID_ARGUMENT
 * (n == 0, n > 65535, a message longer than DLCP_WIRE_CTRL_MAX, an entry
 * with xfer 0, loss bound >= 1, bad segment size, more than 2^32 - 1
 * segments).
 */
dlcp_ssize dlcp_wire_start_encode(uint8_t *buf, size_t buflen, uint32_t job,
                                  const dlcp_wire_start_entry *entries,
                                  size_t n);

/*
 * dlcp_wire_start_decode validates the START message in |buf| (exactly
 * |buflen| bytes, as framed by the preamble) and returns its entry count in
 * |*n|; every entry is validated here, so dlcp_wire_start_entry_get() on
 * an index below |*n| cannot fail.
 */
int dlcp_wire_start_decode(uint32_t *job, uint32_t *n, const uint8_t *buf,
                           size_t buflen);
void dlcp_wire_start_entry_get(dlcp_wire_start_entry *e, const uint8_t *buf,
                               uint32_t index);

dlcp_ssize dlcp_wire_probe_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_probe *p);
int dlcp_wire_probe_decode(dlcp_wire_probe *p, const uint8_t *buf,
                           size_t buflen);
dlcp_ssize dlcp_wire_stop_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_stop *s);
int dlcp_wire_stop_decode(dlcp_wire_stop *s, const uint8_t *buf,
                          size_t buflen);
dlcp_ssize dlcp_wire_finish_encode(uint8_t *buf, size_t buflen,
                                   const dlcp_wire_finish *f);
int dlcp_wire_finish_decode(dlcp_wire_finish *f, const uint8_t *buf,
                            size_t buflen);
dlcp_ssize dlcp_wire_note_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_note *n);
int dlcp_wire_note_decode(dlcp_wire_note *n, const uint8_t *buf,
                          size_t buflen);
dlcp_ssize dlcp_wire_offer_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_offer *o);
int dlcp_wire_offer_decode(dlcp_wire_offer *o, const uint8_t *buf,
                           size_t buflen);
/* EAGER copies |payload_len| bytes of |payload| after the header; the
 * decoder points |*payload| into |buf| (borrowed from the caller). */
dlcp_ssize dlcp_wire_eager_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_eager *e,
                                  const void *payload, size_t payload_len);
int dlcp_wire_eager_decode(dlcp_wire_eager *e, const uint8_t **payload,
                           size_t *payload_len, const uint8_t *buf,
                           size_t buflen);

/*
 * dlcp_wire_cdata_encode_header writes the 32-byte CDATA header for a
 * control message or piece of |h->inner_len| bytes that the caller places
 * right after it, with |h->rest| bytes of the message still to come
 * (|h->inner| is not read).  Returns DLCP_WIRE_CDATA_HDR_LEN,
 * DLCP_ERR_BUFFER_TOO_SMALL or DLCP_ERR_INVALID_ARGUMENT (inner_len 0,
 * the datagram over DLCP_WIRE_DGRAM_MAX, or the message over
 * DLCP_WIRE_CTRL_MAX).
 * dlcp_wire_cdata_decode checks the envelope (not the inner message: feed
 * it, once whole, to its own decoder) and points |h->inner| into |buf|.
 */
dlcp_ssize dlcp_wire_cdata_encode_header(uint8_t *buf, size_t buflen,
                                         const dlcp_wire_cdata *h);
int dlcp_wire_cdata_decode(dlcp_wire_cdata *h, const uint8_t *buf,
                           size_t buflen);
/* A CACK with an early_seq but no early copies is refused both ways
 * (DLCP_ERR_INVALID_ARGUMENT). */
dlcp_ssize dlcp_wire_cack_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_cack *c);
int dlcp_wire_cack_decode(dlcp_wire_cack *c, const uint8_t *buf,
                          size_t buflen);

/*
 * dlcp_wire_bitmap_encode_words writes a BITMAP describing the segments
 * [first, nsegs) of a receiver whose holdings are the bit array |words|
 * (bit i of words[i / 64] set = segment i held).  It encodes as many missing
 * ranges as fit in |buflen| and sets the window end accordingly, so a
 * caller with a small buffer still makes progress.  |hdr| supplies job,
 * xfer, round, nsegs, first and have, and end: 0 for a window up to
 * nsegs, else a bound on it (first <= end <= nsegs: segments from end on
 * are left out, as a receiver asking for the holes below the segments it
 * has seen does: such a window must hold a missing segment and end after
 * a held one, or DLCP_ERR_INVALID_ARGUMENT); the window's end and nranges
 * are computed.
 * |buflen| is capped at DLCP_WIRE_CTRL_MAX so the result always decodes.
 * |words| holds at least ceil(nsegs / 64) words (it may be NULL when
 * first == nsegs); padding bits past nsegs are ignored.
 * Returns the message length or DLCP_ERR_BUFFER_TOO_SMALL (not even the
 * fixed part and one range fit) / DLCP_ERR_INVALID_ARGUMENT.
 */
dlcp_ssize dlcp_wire_bitmap_encode_words(uint8_t *buf, size_t buflen,
                                         const dlcp_wire_bitmap *hdr,
                                         const uint64_t *words);

/*
 * dlcp_wire_bitmap_decode validates a BITMAP: the window lies inside the
 * tensor, every varint is well formed, the ranges are increasing,
 * non-empty, inside the window and exactly nranges long, and nothing
 * trails them.  On success the range list can be walked without further
 * checks.
 */
int dlcp_wire_bitmap_decode(dlcp_wire_bitmap *b, const uint8_t *buf,
                            size_t buflen);

/*
 * dlcp_wire_bitmap_next reads the next missing range of a decoded bitmap.
 * |*cursor| starts at 0 and |*prev_end| at b->first; both are advanced.
 * Returns 1 with |*r| filled, or 0 when the list is exhausted.
 */
int dlcp_wire_bitmap_next(const dlcp_wire_bitmap *b, size_t *cursor,
                          uint32_t *prev_end, dlcp_wire_range *r);

#endif /* DLCP_WIRE_H */
