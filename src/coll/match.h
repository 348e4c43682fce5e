/*
 * match.h: the collective transfer matcher, shared by every driver that
 * carries a dlcp_coll's SEND and RECV actions itself (the simulator and the
 * tests' in-memory network; the runtime matches through MLT tensor ids).
 *
 * A transfer is keyed by (job, iter, src, dst, tag): the driver's
 * operation instance (0, 0 for a driver that runs one operation at a time)
 * and the pair and tag the actions name.  The sender's SEND and the
 * receiver's RECV may come in either order; the second one makes the
 * transfer READY and the driver starts carrying it.  The matcher checks the
 * contract on the way: one SEND and one RECV per key, equal sizes, no reuse
 * of a key whose transfer is done (when the driver keeps done transfers).
 *
 * Records are the driver's own struct with a coll_xfer as first member
 * (|rec_size| bytes each), in one array addressed by index: an index stays
 * valid until the record is removed, a pointer only until the next post.
 * The driver's part of a record is zero when the slot is new and as the
 * driver left it when the slot is recycled (so a driver can keep buffers
 * there across transfers).  Sans-I/O: memory through dlcp_mem, no clock.
 */
#ifndef DLCP_COLL_MATCH_H
#define DLCP_COLL_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"

#define COLL_MATCH_NONE UINT32_MAX

typedef enum coll_xfer_state {
  COLL_XFER_FREE = 0, /* slot on the free list */
  COLL_XFER_POSTED,   /* one end posted */
  COLL_XFER_RUNNING,  /* both posted; the driver carries it */
  COLL_XFER_DONE      /* kept by coll_match_retire: its key is spent */
} coll_xfer_state;

typedef struct coll_xfer {
  uint32_t job, iter, src, dst, tag; /* the key; src/dst are ranks */
  uint32_t next;                     /* hash chain or free list */
  uint8_t state;                     /* coll_xfer_state */
  bool has_send, has_recv;
  const void *send_buf;
  void *recv_buf;
  void (*recv_place)(void *user, uint8_t *dst, const uint8_t *payload,
                     size_t len); /* the RECV's (dlcp_coll_action) */
  void *recv_place_user;
  uint32_t recv_place_unit;
  uint64_t bytes;    /* as the first end posted it */
  double loss_bound; /* the receiver's */
  uint32_t stage;    /* the sender's */
} coll_xfer;

typedef struct coll_match {
  const dlcp_mem *mem;
  size_t rec_size;
  unsigned char *rec;
  uint32_t nrec, caprec, free_head;
  uint32_t *bucket;
  uint32_t nbucket; /* power of two */
  uint32_t used;    /* records in the table (DONE ones included) */
} coll_match;

typedef enum coll_match_result {
  COLL_MATCH_WAITING,       /* recorded; the other end has not posted */
  COLL_MATCH_READY,         /* both ends posted: start the transfer */
  COLL_MATCH_DUPLICATE,     /* this end already posted under this key */
  COLL_MATCH_REUSED,        /* the key of a retired (done) transfer */
  COLL_MATCH_SIZE_MISMATCH, /* the ends disagree on the size */
  COLL_MATCH_NOMEM
} coll_match_result;

/* coll_match_init prepares |m| for records of |rec_size| >= sizeof
 * (coll_xfer) bytes (|mem| NULL: libc).  Returns 0 or DLCP_ERR_NOMEM. */
int coll_match_init(coll_match *m, const dlcp_mem *mem, size_t rec_size);

/* coll_match_free frees the table (not what the driver's parts point to:
 * walk coll_match_slots() first). */
void coll_match_free(coll_match *m);

/*
 * coll_match_post records rank |self|'s SEND or RECV action |a| of
 * operation instance (|job|, |iter|).  Sets |*index| to the transfer's
 * record, except on NOMEM.  On DUPLICATE, REUSED and SIZE_MISMATCH the
 * record is left as it was (its |bytes| is the first end's size).
 */
coll_match_result coll_match_post(coll_match *m, uint32_t job, uint32_t iter,
                                  uint32_t self, const dlcp_coll_action *a,
                                  uint32_t *index);

/* coll_match_find returns the live (posted or running) transfer with this
 * key, or COLL_MATCH_NONE. */
uint32_t coll_match_find(const coll_match *m, uint32_t job, uint32_t iter,
                         uint32_t src, uint32_t dst, uint32_t tag);

/* coll_match_cancel removes the RECV-only transfer src -> |self| |tag| that
 * rank |self| cancels.  Returns 0, or DLCP_ERR_UNKNOWN_TRANSFER if there is
 * none (unknown, or the sender has posted too). */
int coll_match_cancel(coll_match *m, uint32_t job, uint32_t iter,
                      uint32_t src, uint32_t self, uint32_t tag);

/* coll_match_remove frees record |i|; its key may be posted again. */
void coll_match_remove(coll_match *m, uint32_t i);

/* coll_match_deliver puts what the network carried for running transfer
 * |x| into its receive buffer: the sender's bytes, with |holes| (sorted
 * byte ranges that did not arrive) zero-filled; or, for a RECV with a
 * recv_place, every arrived range handed to it, whole elements only (an
 * element a hole touches is left as it is, and reported missing). */
void coll_match_deliver(const coll_xfer *x, const dlcp_coll_range *holes,
                        size_t nholes);

/* coll_match_retire marks record |i| DONE and keeps it, so a later post of
 * its key is reported as REUSED (for drivers that check the contract). */
void coll_match_retire(coll_match *m, uint32_t i);

/* The record at index |i| (any slot below coll_match_slots()). */
static inline coll_xfer *coll_match_at(const coll_match *m, uint32_t i) {
  return (coll_xfer *)(void *)(m->rec + (size_t)i * m->rec_size);
}

/* The number of slots ever allocated, free ones included. */
static inline uint32_t coll_match_slots(const coll_match *m) {
  return m->nrec;
}

#endif /* DLCP_COLL_MATCH_H */
