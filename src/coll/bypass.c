/*
 * bypass.c: the straggler-tolerant ring (the straggler-bypass seed),
 * layered on the ring plan of ring.c.
 *
 * Model.  In the ring's reduce-scatter, rank C at step s waits for slot
 * (s, j) from its predecessor B (segment j of the chunk B forwards at
 * step s), reduces its own data into it and forwards the sum to its
 * successor D at step s + 1.  If B is slow, C and everything after it
 * wait.  The seed's remedy: once C has waited alpha*T + T_trans (T: the
 * normal per-step time, T_trans: the transfer time), C sends its own,
 * unreduced segment straight to D, B sends its partial sum to D instead of
 * C when it is ready, and D reduces both.  Chunk x then skips C's hop,
 * saving T + T_trans on its chain (the seed's eq. 1).
 *
 * The race.  B may already have sent slot (s, j) when C gives up.  To make
 * "exactly one of B->C, B->D happens" hold without any ordering between
 * data and notes, B decides: C asks (NOTE BYPASS_REQ), and B either grants
 * (its send is still unissued: it re-targets it to D under tag class 2,
 * tells D BYPASS_INCOMING and C BYPASS_GRANT) or denies (already sent: C
 * keeps waiting, the data is on its way).  On GRANT, C cancels its receive
 * from B, skips its reduce and sends its raw segment to D under tag class
 * 1; on INCOMING, D re-keys its receive from C to that tag and adds a
 * receive of B's partial, and its reduce takes both.  This costs one
 * control round trip over the seed's version, so the grant arrives about
 * alpha*T + T_trans + RTT_ctrl after C started waiting: worth it whenever
 * the straggler's extra time exceeds that.
 *
 * Rules that keep it sound: only reduce-scatter slots s <= n - 3 (D must
 * still forward, i.e. not be the chunk's final owner, or ownership would
 * move); a slot already split (C itself is some D) is not bypassed again;
 * B grants only an unissued, unmodified send.  All-gather is unchanged.
 *
 * Estimates, per pipeline lane j, from "waits": the time from when the
 * lane finished its previous slot (or the operation started) to when the
 * predecessor's next slot completed here.  T_trans: an EWMA of the
 * step-0 waits, where the predecessor forwards its own data unreduced, so
 * the wait is the transfer (as this rank sees it, its own receive
 * processing included), following shorter waits quickly and longer ones
 * slowly, because the predecessor's later start only adds to them.  T:
 * EWMA of later waits minus T_trans (the predecessor's step), but only
 * waits that lower it: any other may hold a straggler's delay, and a
 * straggler slow in every operation, which on a one-lane ring delays
 * every later wait, must not teach the ring to wait for it.  For the same
 * reason T never counts above alpha*T_trans: once raised, it could not
 * come back below such a delay.  A denied
 * request (the data was sent before the predecessor heard) raises T by at
 * most a factor alpha, weighted like any sample.  Until learnt, T is
 * T_trans.  Both start from the caller's hints
 * (dlcp_coll_result of the previous operation).  T is floored at
 * BYPASS_MIN_STEP_NS so that jitter on a near-zero step does not trigger
 * bypasses.
 */
#include <string.h>

#include "coll/exec.h"

#define BYPASS_MIN_STEP_NS 1000.0
#define EWMA_GAIN 0.25
/* Gains for samples below the estimate: a cold first operation measured
 * 20-40x the transfer on a slow VM, and halving took five operations to
 * forget it; T comes down only through the few waits that hold no
 * straggler's delay, one per lane and operation. */
#define TRANS_DOWN_GAIN 0.75
#define STEP_DOWN_GAIN 0.5

enum slot_flag {
  SLOT_REQ_SENT = 1,   /* C: asked B */
  SLOT_GRANTED = 2,    /* C: bypassed */
  SLOT_DENIED = 4,     /* C: B had already sent */
  SLOT_REDIRECTED = 8, /* B: my send went to D */
  SLOT_SPLIT = 16,     /* D: my receive of this slot comes in two parts */
  SLOT_RAWSEND = 32    /* B: my send of this slot carries raw data (I
                          bypassed the previous slot): not redirectable */
};

enum step_role { ROLE_NONE = 0, ROLE_RECV, ROLE_REDUCE, ROLE_SEND };

struct coll_bypass {
  double alpha;
  uint32_t n, prev, next, next2, steps, nseg;
  double step_est, trans_est; /* ns; valid if *_known */
  bool step_known, trans_known;
  dlcp_tstamp *lane_ready; /* [nseg] when the lane started waiting */
  uint32_t *lane_step;     /* [nseg] the slot step the lane waits for */
  uint8_t *slot;           /* [steps * nseg] slot_flag */
  uint8_t *role;           /* [plan cap] step_role */
  uint32_t *slot_of;       /* [plan cap] s * nseg + j */
  uint32_t bypasses, denied;
};

int coll_bypass_new(dlcp_coll *op) {
  const dlcp_mem *mem = op->mem;
  const coll_ring_index *ix = &op->plan.ring;
  coll_bypass *b = mem->calloc(1, sizeof(*b), mem->user);
  if (!b) {
    return DLCP_ERR_NOMEM;
  }
  op->bypass = b;
  uint32_t n = op->g.world, r = op->g.rank;
  b->alpha = op->p.bypass_alpha;
  b->n = n;
  b->prev = (r + n - 1) % n;
  b->next = (r + 1) % n;
  b->next2 = (r + 2) % n;
  b->steps = ix->steps;
  b->nseg = ix->nseg;
  if (op->p.bypass_step_hint_ns) {
    b->step_est = (double)op->p.bypass_step_hint_ns;
    b->step_known = true;
  }
  if (op->p.bypass_trans_hint_ns) {
    b->trans_est = (double)op->p.bypass_trans_hint_ns;
    b->trans_known = true;
  }
  size_t nslots = (size_t)b->steps * b->nseg;
  b->lane_ready = mem->calloc(b->nseg, sizeof(dlcp_tstamp), mem->user);
  b->lane_step = mem->calloc(b->nseg, sizeof(uint32_t), mem->user);
  b->slot = mem->calloc(nslots ? nslots : 1, 1, mem->user);
  b->role = mem->calloc(op->plan.cap, 1, mem->user);
  b->slot_of = mem->calloc(op->plan.cap, sizeof(uint32_t), mem->user);
  if (!b->lane_ready || !b->lane_step || !b->slot || !b->role ||
      !b->slot_of) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t j = 0; j < b->nseg; j++) {
    b->lane_ready[j] = op->start_ns;
  }
  for (size_t i = 0; i < nslots; i++) {
    b->role[ix->recv[i]] = ROLE_RECV;
    b->role[ix->reduce[i]] = ROLE_REDUCE;
    b->role[ix->send[i]] = ROLE_SEND;
    b->slot_of[ix->recv[i]] = (uint32_t)i;
    b->slot_of[ix->reduce[i]] = (uint32_t)i;
    b->slot_of[ix->send[i]] = (uint32_t)i;
  }
  return 0;
}

void coll_bypass_del(dlcp_coll *op) {
  coll_bypass *b = op->bypass;
  if (!b) {
    return;
  }
  const dlcp_mem *mem = op->mem;
  mem->free(b->lane_ready, mem->user);
  mem->free(b->lane_step, mem->user);
  mem->free(b->slot, mem->user);
  mem->free(b->role, mem->user);
  mem->free(b->slot_of, mem->user);
  mem->free(b, mem->user);
  op->bypass = NULL;
}

static void ewma(double *est, bool *known, double sample) {
  if (!*known) {
    *est = sample;
    *known = true;
  } else {
    *est += EWMA_GAIN * (sample - *est);
  }
}

/* T.  Until a step has been seen that did not trigger, the prior is
 * T_trans: a step reads and writes the segment's bytes once, about what
 * carrying them costs.  Taking the first sample as T instead let a
 * straggler that is slow in every operation teach a one-lane ring its
 * delay before the first bypass could happen. */
static double step_time(const coll_bypass *b) {
  double t = b->step_known ? b->step_est : b->trans_est;
  /* Nor above alpha*T_trans: on a one-lane ring every later wait holds
   * the straggler's delay, so a T raised once (a denial in a cold first
   * operation) could never come back down below that delay.  A ring whose
   * steps really are that much longer than their transfer then asks in
   * vain once per operation: one note each way. */
  if (b->trans_known && t > b->alpha * b->trans_est) {
    t = b->alpha * b->trans_est;
  }
  return t > BYPASS_MIN_STEP_NS ? t : BYPASS_MIN_STEP_NS;
}

/* How long a lane may wait for its predecessor: alpha*T + T_trans. */
static double patience(const coll_bypass *b) {
  return b->alpha * step_time(b) + b->trans_est;
}

void coll_bypass_on_step_done(dlcp_coll *op, uint32_t idx, dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  if (idx >= op->nstatic) {
    return;
  }
  uint32_t sl = b->slot_of[idx];
  uint32_t s = b->nseg ? sl / b->nseg : 0, j = b->nseg ? sl % b->nseg : 0;
  const coll_step *st = &op->plan.steps[idx];
  switch ((enum step_role)b->role[idx]) {
  case ROLE_SEND:
    break;
  case ROLE_RECV:
    if (st->kind != COLL_STEP_RECV || b->lane_step[j] != s ||
        (op->flags[idx] & COLL_SF_CANCELED) ||
        (b->slot[sl] & (SLOT_SPLIT | SLOT_GRANTED)) ||
        now < b->lane_ready[j]) {
      break;
    }
    if (s == 0) {
      /* Step 0: the predecessor forwards its own data without reducing,
       * so the wait is the transfer, plus however much later than this
       * rank the predecessor started.  That skew only ever adds, so the
       * estimate follows a shorter wait most of the way and a longer one
       * slowly. */
      double w = (double)(now - b->lane_ready[j]);
      if (!b->trans_known) {
        ewma(&b->trans_est, &b->trans_known, w);
      } else {
        b->trans_est += (w - b->trans_est) *
                        (w < b->trans_est ? TRANS_DOWN_GAIN : EWMA_GAIN / 2);
      }
    } else if (b->trans_known) {
      /* Later steps: the predecessor's step plus the transfer.  These
       * waits may hold a straggler's delay (on a one-lane ring every one
       * of them does), and a straggler slow in every operation must not
       * teach the ring to wait for it: they only lower T.  A denied
       * request (the predecessor had sent by the time it heard) raises T
       * by at most a step of alpha, so a ring whose steps are simply
       * longer than T_trans stops asking within a few operations. */
      double w = (double)(now - b->lane_ready[j]);
      double t = w > b->trans_est ? w - b->trans_est : 0.0;
      double cur = step_time(b);
      if (b->slot[sl] & SLOT_DENIED) {
        double cap = b->alpha * cur;
        b->step_est = cur + EWMA_GAIN * ((t < cap ? t : cap) - cur);
        b->step_known = true;
      } else if (t < cur) {
        b->step_est = cur + STEP_DOWN_GAIN * (t - cur);
        b->step_known = true;
      }
    }
    break;
  case ROLE_REDUCE:
    /* In slot order: an empty chunk's slot completes as soon as its bank
     * is free, possibly before the slot the lane is waiting for.  Jumping
     * to it would arm a request for a slot whose bank an earlier receive
     * still fills. */
    if (b->lane_step[j] == s) {
      uint32_t t = s + 1;
      while (t < b->steps &&
             op->state[op->plan.ring.reduce[t * b->nseg + j]] ==
                 COLL_ST_DONE) {
        t++;
      }
      b->lane_step[j] = t;
      b->lane_ready[j] = now;
    }
    break;
  case ROLE_NONE:
    break;
  }
}

/* The slot lane |j| waits for, if a bypass request may be armed for it:
 * a non-empty plain receive at a step whose successor still forwards,
 * posted and not finished.  Posted matters: a receive still waiting for
 * its scratch bank has dependencies a cancel would cut, releasing the
 * next receive into a bank an earlier one is still filling. */
static bool lane_armed(const dlcp_coll *op, uint32_t j, uint32_t *slot) {
  const coll_bypass *b = op->bypass;
  uint32_t s = b->lane_step[j];
  if (!b->trans_known || b->n < 3 || s + 3 > b->n) {
    return false;
  }
  uint32_t sl = s * b->nseg + j;
  uint32_t rcv = op->plan.ring.recv[sl];
  /* Not if the slot this one feeds, (s + 1, j), was already granted to
   * the successor: the forward is promised as its partial. */
  if (b->slot[sl] & (SLOT_REQ_SENT | SLOT_SPLIT) ||
      (b->slot[sl + b->nseg] & SLOT_REDIRECTED) ||
      op->plan.steps[rcv].kind != COLL_STEP_RECV ||
      op->state[rcv] != COLL_ST_ACTIVE) {
    return false;
  }
  *slot = sl;
  return true;
}

static dlcp_tstamp lane_deadline(const coll_bypass *b, uint32_t j) {
  double d = (double)b->lane_ready[j] + patience(b);
  return d >= (double)DLCP_TSTAMP_NEVER ? DLCP_TSTAMP_NEVER : (dlcp_tstamp)d;
}

dlcp_tstamp coll_bypass_next_deadline(const dlcp_coll *op) {
  const coll_bypass *b = op->bypass;
  dlcp_tstamp best = DLCP_TSTAMP_NEVER;
  for (uint32_t j = 0; j < b->nseg; j++) {
    uint32_t sl;
    if (lane_armed(op, j, &sl)) {
      dlcp_tstamp d = lane_deadline(b, j);
      best = d < best ? d : best;
    }
  }
  return best;
}

int coll_bypass_on_timer(dlcp_coll *op, dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  for (uint32_t j = 0; j < b->nseg; j++) {
    uint32_t sl;
    if (lane_armed(op, j, &sl) && lane_deadline(b, j) <= now) {
      b->slot[sl] |= SLOT_REQ_SENT;
      int rv = coll_exec_note(
          op, b->prev, DLCP_COLL_NOTE(DLCP_COLL_NOTE_BYPASS_REQ, sl));
      if (rv != 0) {
        return rv;
      }
    }
  }
  return 0;
}

/* B: the successor asks to send slot |sl| past it. */
static int on_req(dlcp_coll *op, uint32_t sl, dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  uint32_t snd = op->plan.ring.send[sl];
  const coll_step *st = &op->plan.steps[snd];
  /* The send of slot (s, j) forwards what this rank received as slot
   * (s - 1, j).  If this rank's own request for that slot is still
   * unanswered, the send may yet become a raw send to the successor:
   * granting now would promise the same send to two ranks.  Deny; the
   * requester keeps waiting, which is the plain ring.  (A granted request
   * left SLOT_RAWSEND on this slot; a denied one leaves a plain send.) */
  bool upstream_busy =
      sl >= b->nseg &&
      (b->slot[sl - b->nseg] & (SLOT_REQ_SENT | SLOT_DENIED)) ==
          SLOT_REQ_SENT;
  bool ok = st->kind == COLL_STEP_SEND &&
            (op->state[snd] == COLL_ST_PENDING ||
             op->state[snd] == COLL_ST_READY) &&
            !upstream_busy &&
            !(b->slot[sl] & (SLOT_REDIRECTED | SLOT_RAWSEND));
  if (!ok) {
    return coll_exec_note(op, b->next,
                          DLCP_COLL_NOTE(DLCP_COLL_NOTE_BYPASS_DENY, sl));
  }
  int rv = coll_exec_retarget(
      op, snd, b->next2, DLCP_COLL_TAG(DLCP_COLL_TAG_BYPASS_PARTIAL, sl), now);
  if (rv != 0) {
    return rv;
  }
  b->slot[sl] |= SLOT_REDIRECTED;
  rv = coll_exec_note(op, b->next2,
                      DLCP_COLL_NOTE(DLCP_COLL_NOTE_BYPASS_INCOMING, sl));
  if (rv != 0) {
    return rv;
  }
  return coll_exec_note(op, b->next,
                        DLCP_COLL_NOTE(DLCP_COLL_NOTE_BYPASS_GRANT, sl));
}

/* C: the predecessor granted slot |sl| = (s, j): send the raw segment to
 * D now, drop the receive from B and the reduce. */
static int on_grant(dlcp_coll *op, uint32_t sl, dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  uint32_t rcv = op->plan.ring.recv[sl];
  uint32_t x = op->plan.ring.reduce[sl];
  uint32_t fwd = op->plan.ring.send[sl + b->nseg]; /* send of step s + 1 */
  if (!(b->slot[sl] & SLOT_REQ_SENT) ||
      (b->slot[sl] & (SLOT_GRANTED | SLOT_DENIED)) ||
      op->state[rcv] != COLL_ST_ACTIVE || op->state[x] != COLL_ST_PENDING ||
      op->state[fwd] != COLL_ST_PENDING) {
    return DLCP_ERR_BAD_TYPE;
  }
  b->slot[sl] |= SLOT_GRANTED;
  b->slot[sl + b->nseg] |= SLOT_RAWSEND;
  b->bypasses++;
  int rv = coll_exec_retarget(
      op, fwd, b->next, DLCP_COLL_TAG(DLCP_COLL_TAG_BYPASS_RAW, sl), now);
  if (rv != 0) {
    return rv;
  }
  /* Skipping the reduce leaves the range holding this rank's own data,
   * which is exactly what the raw send must carry; completing the
   * canceled receive releases the reduce, which releases the send. */
  op->flags[x] |= COLL_SF_SKIP;
  return coll_exec_cancel_recv(op, rcv, now);
}

/* D: slot |sl| = (s, j) of the rank two back comes in two parts. */
static int on_incoming(dlcp_coll *op, uint32_t sl, dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  uint32_t mine = sl + b->nseg; /* my slot (s + 1, j) */
  uint32_t rcv = op->plan.ring.recv[mine];
  uint32_t x = op->plan.ring.reduce[mine];
  if ((b->slot[mine] & SLOT_SPLIT) || op->state[rcv] == COLL_ST_DONE ||
      op->state[x] != COLL_ST_PENDING ||
      op->plan.steps[rcv].kind != COLL_STEP_RECV) {
    return DLCP_ERR_BAD_TYPE;
  }
  b->slot[mine] |= SLOT_SPLIT;
  int rv = coll_exec_retarget(
      op, rcv, b->prev, DLCP_COLL_TAG(DLCP_COLL_TAG_BYPASS_RAW, sl), now);
  if (rv != 0) {
    return rv;
  }
  const coll_step *r = &op->plan.steps[rcv];
  int64_t ex = coll_exec_alloc_extra(op, r->bytes);
  if (ex < 0) {
    return DLCP_ERR_NOMEM;
  }
  coll_step part = {.kind = COLL_STEP_RECV,
                    .buf = COLL_BUF_EXTRA,
                    .peer = (b->prev + b->n - 1) % b->n,
                    .tag = DLCP_COLL_TAG(DLCP_COLL_TAG_BYPASS_PARTIAL, sl),
                    .off = (uint64_t)ex,
                    .bytes = r->bytes,
                    .elem = r->elem};
  uint32_t idx = coll_exec_add_step(op, &part, x);
  if (idx == COLL_NO_STEP) {
    return DLCP_ERR_INTERNAL;
  }
  op->plan.steps[x].value = (uint64_t)idx + 1;
  return 0;
}

int coll_bypass_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                        dlcp_tstamp now) {
  coll_bypass *b = op->bypass;
  uint64_t kind = value >> DLCP_COLL_NOTE_KIND_SHIFT;
  uint64_t sl64 = value & DLCP_COLL_NOTE_ARG_MASK;
  /* Only slots that may be bypassed: steps 0..n-3. */
  if (b->n < 3 || sl64 >= (uint64_t)(b->n - 2) * b->nseg) {
    return DLCP_ERR_BAD_TYPE;
  }
  uint32_t sl = (uint32_t)sl64;
  switch (kind) {
  case DLCP_COLL_NOTE_BYPASS_REQ:
    return peer == b->next ? on_req(op, sl, now) : DLCP_ERR_BAD_TYPE;
  case DLCP_COLL_NOTE_BYPASS_GRANT:
    return peer == b->prev ? on_grant(op, sl, now) : DLCP_ERR_BAD_TYPE;
  case DLCP_COLL_NOTE_BYPASS_DENY:
    if (peer != b->prev || !(b->slot[sl] & SLOT_REQ_SENT) ||
        (b->slot[sl] & (SLOT_GRANTED | SLOT_DENIED))) {
      return DLCP_ERR_BAD_TYPE;
    }
    b->slot[sl] |= SLOT_DENIED;
    b->denied++;
    return 0;
  case DLCP_COLL_NOTE_BYPASS_INCOMING:
    return peer == (b->prev + b->n - 1) % b->n ? on_incoming(op, sl, now)
                                                : DLCP_ERR_BAD_TYPE;
  default:
    return DLCP_ERR_BAD_TYPE;
  }
}

void coll_bypass_result(const dlcp_coll *op, dlcp_coll_result *res) {
  const coll_bypass *b = op->bypass;
  res->bypasses = b->bypasses;
  res->bypass_denied = b->denied;
  /* Until a step is learnt, T is its prior (see step_time). */
  res->step_ns = b->step_known || b->trans_known
                     ? (dlcp_duration)step_time(b)
                     : 0;
  res->trans_ns = b->trans_known ? (dlcp_duration)b->trans_est : 0;
}
