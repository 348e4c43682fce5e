/*
 * shm.h: datagrams between ranks on one host through shared memory.
 *
 * On loopback a UDP datagram costs two kernel copies (sender's buffer into
 * a socket buffer, socket buffer into the receiver's) and a trip through
 * the IP stack; at 64 MiB all-reduces that is most of the CPU time.  Each
 * communicator therefore owns an inbound segment (a memfd) with one
 * single-producer single-consumer ring of datagram slots per sending rank;
 * a peer on the same host maps it (through /proc/PID/fd/FD, both published
 * in the rendezvous address record) and writes its datagrams there: two
 * user-space copies, no system call per datagram.  Everything above is
 * unchanged: MLT still numbers, acknowledges and retransmits, and fault
 * injection still applies.  A full ring holds the sender's data back
 * (dlcp_shm_free_slots) rather than drop it: a drop here is no network
 * loss, and would count against a transfer's loss bound.
 *
 * The consumer may sleep in epoll: it raises a flag in its segment before
 * it stops looking, and a producer that finds the flag raised after
 * publishing sends a zero-length UDP datagram (the doorbell) to the
 * consumer's first socket.  Both sides fence between their store and their
 * load (a Dekker pair), so either the consumer sees the new datagram or the
 * producer sees the flag.
 */
#ifndef DLCP_RT_SHM_H
#define DLCP_RT_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rt/errbuf.h"

/* Slots per ring: MLT's window (1 MiB by default, at least 21 datagrams)
 * fits, so a ring fills only when the consumer stops reading. */
#define DLCP_SHM_SLOTS 32u
/* Largest datagram a slot holds: a whole UDP datagram. */
#define DLCP_SHM_SLOT_DATA 65536u
/* Peers a rank shares memory with at most: a ring in use pins 2 MiB, so
 * a rank's rings stay within 30 MiB however crowded its host (a hundred
 * ranks on two cores).  Eight to sixteen accelerators a machine is the
 * common case, and fits; a host with more ranks shares rings between the
 * pairs dlcp_shm_partners picks, the others keep UDP. */
#define DLCP_SHM_MAX_PEERS 15u

struct dlcp_shm_header;
struct dlcp_shm_ring;

/* This rank's inbound segment. */
typedef struct dlcp_shm_in {
  struct dlcp_shm_header *hdr; /* NULL: no segment */
  int fd;
  uint32_t world, rank;
  uint64_t nonce;
  uint32_t admitted; /* rings mapped: src[i] writes into ring[i] */
  uint32_t src[DLCP_SHM_MAX_PEERS];
  struct dlcp_shm_ring *ring[DLCP_SHM_MAX_PEERS];
} dlcp_shm_in;

/* A mapping of a peer's segment, writing into its ring for this rank. */
typedef struct dlcp_shm_out {
  struct dlcp_shm_header *hdr; /* NULL: the peer is not reached this way */
  struct dlcp_shm_ring *ring;
  uint64_t tail; /* next slot to fill (this side's copy) */
  bool dirty;    /* published since the last doorbell check */
} dlcp_shm_out;

/* dlcp_shm_partners says whether ranks |a| and |b| of a world of |world|
 * share rings when their host holds more ranks than DLCP_SHM_MAX_PEERS
 * (with fewer, every pair on the host does).  The pairs kept are those
 * DLCP_SHM_MAX_PEERS rings cover and the collectives use most: ranks a
 * power of two apart either way round the world (the ring's neighbours at
 * 1, recursive doubling's and halving-doubling's partners, the
 * dissemination barrier's), up to the largest distance at which every
 * rank still has at most DLCP_SHM_MAX_PEERS of them.  Symmetric, and the
 * same on every rank, so both ends of a pair decide alike. */
bool dlcp_shm_partners(uint32_t a, uint32_t b, uint32_t world);

/* dlcp_shm_in_create makes this rank's segment: room for |world| rings
 * (the one for |rank| unused), none of it allocated, stamped with a random
 * |nonce| that peers check.  Returns 0 or an error code with |eb| set. */
int dlcp_shm_in_create(dlcp_shm_in *in, uint32_t job, uint32_t rank,
                       uint32_t world, uint64_t nonce, dlcp_errbuf *eb);
/* dlcp_shm_in_admit maps the ring rank |src| writes into, which this rank
 * reads from then on (at most DLCP_SHM_MAX_PEERS of them; the others are
 * never allocated).  Returns 0, or an error code with |eb| set (a peer
 * that writes into a ring this rank cannot read would lose everything it
 * sends: the join fails, join.c). */
int dlcp_shm_in_admit(dlcp_shm_in *in, uint32_t src, dlcp_errbuf *eb);
void dlcp_shm_in_close(dlcp_shm_in *in);

/* dlcp_shm_out_open maps the segment rank |peer| published as |pid|, |fd|
 * and |nonce|, and checks that it is that rank's segment of this job and
 * world.  Returns 0, or an error code with |eb| saying why (the caller
 * falls back to UDP). */
int dlcp_shm_out_open(dlcp_shm_out *out, pid_t pid, int fd, uint64_t nonce,
                      uint32_t job, uint32_t peer, uint32_t me,
                      uint32_t world, dlcp_errbuf *eb);
void dlcp_shm_out_close(dlcp_shm_out *out);

/* What a slot holds: a datagram, or a piece of the control byte stream
 * (which then goes through the ring only, so it stays in order). */
typedef enum dlcp_shm_kind {
  DLCP_SHM_DATAGRAM = 0,
  DLCP_SHM_CONTROL = 1
} dlcp_shm_kind;

/* dlcp_shm_put copies one datagram or control piece (|hdr| then
 * |payload|) into the ring and publishes it; false when the ring is full
 * or it is too big for a slot (a datagram is then dropped, control bytes
 * wait). */
bool dlcp_shm_put(dlcp_shm_out *out, dlcp_shm_kind kind, const uint8_t *hdr,
                  size_t hdr_len, const void *payload, size_t payload_len);

/* dlcp_shm_free_slots returns how many more datagrams or control pieces
 * the ring takes now (the consumer may free more at any time). */
uint32_t dlcp_shm_free_slots(const dlcp_shm_out *out);

/* dlcp_shm_needs_doorbell is called after a batch of puts: whether the
 * consumer may be asleep and must be woken (it clears the flag, so only
 * one producer rings). */
bool dlcp_shm_needs_doorbell(dlcp_shm_out *out);

/* The consumer's side.  dlcp_shm_peek returns the oldest unread datagram
 * from rank |src| and its length (NULL when there is none, or |src| was
 * not admitted); its bytes live
 * in shared memory, which the producer does not touch until
 * dlcp_shm_release. */
const uint8_t *dlcp_shm_peek(dlcp_shm_in *in, uint32_t src, size_t *len,
                             dlcp_shm_kind *kind);
/* Whether any ring holds something (a cheap look, without the flag). */
bool dlcp_shm_pending(const dlcp_shm_in *in);
void dlcp_shm_release(dlcp_shm_in *in, uint32_t src);

/* dlcp_shm_begin_drain lowers the sleeping flag: the thread that drives
 * this rank polls its rings from now on, so producers stop ringing.
 * dlcp_shm_try_sleep raises it before that thread blocks and returns false
 * (flag lowered again) if something arrived meanwhile, in which case the
 * caller drains instead of blocking.  Only the driving thread may do
 * either: another thread lowering the flag while the driver sleeps would
 * lose the next doorbell. */
void dlcp_shm_begin_drain(dlcp_shm_in *in);
bool dlcp_shm_try_sleep(dlcp_shm_in *in);

#endif /* DLCP_RT_SHM_H */
