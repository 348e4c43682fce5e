/*
 * ina.c: one rank's side of an all-reduce through the aggregation switch
 * (model and error bound in ina.h).
 *
 * Groups move UNSENT -> SENT -> INA (result written) or RING (verdict).
 * SENT groups are kept in a list in the order they were last sent; since
 * every group waits the same RTO, the list's head is always the next to
 * time out, and a re-send moves it to the tail.  The RTO is |rto_ns| or,
 * when that is longer, srtt + 4 rttvar of the contribution-to-result times
 * of groups sent once (RFC 6298 with Karn's rule), doubled (up to
 * MAX_BACKOFF times) by the timeout of a datagram the switch did not
 * answer at all and was sent since the last doubling, until an answer
 * that can only be to a group's last send (RFC 6298's back-off).  A
 * switch or hosts slower than |rto_ns| (twelve ranks and the daemon on two
 * loaded cores) otherwise get every group again and again, each duplicate
 * makes the switch answer again, and the load feeds itself: three jobs'
 * all-reduces took 1.6-1.9 s instead of 0.2 (docs/ina.md, "Three jobs on
 * the testbed").  Only unanswered datagrams back off: a group the switch
 * answered BUSY, or holds (WAITING) while other ranks are late, is retried
 * at the RTO, not backed off.  Other ranks wait for those retries, so backing
 * them off too lengthened their contribution-to-result times, and through
 * them their RTOs, which lengthened the retries: with a pool smaller than
 * the jobs' demand, RTOs grew to tens of seconds.
 * ACKs wait in a small ring (an ACK that does not fit is dropped: the
 * switch re-sends the result and the rank acknowledges it again).  Every
 * datagram carries the low-water mark, which acknowledges every result
 * below it: with room in the pool, an ACK goes out on its own only when
 * no contribution or claim due now would carry a mark above its group
 * (dlcp_ina_poll).  Groups
 * are sent in order from the low-water mark |low| (the first group not yet
 * done) and never more than |window| ahead of it, which keeps every rank
 * inside the switch's verdict window.
 */
#include "coll/ina.h"

#include <math.h>
#include <string.h>

#include "base/sanitizer.h"
#include "coll/ina_cc.h"
#include "proto/rtt.h"
#include "wire/bytes.h"

#define NONE UINT32_MAX
/* The hosts' per-element loops (the largest magnitude, scaling to int32
 * and back) are compute-bound at x86-64's baseline, SSE2, which lacks a
 * 32-bit integer maximum: they also get an AVX2 clone, chosen when the
 * program loads (GNU ifunc).  Both give the same bits (the same IEEE
 * operations, no fused multiply-add).  64 MiB of exponents took 11.4 ms
 * with SSE2 and 4.2-4.6 with AVX2; on the 10 Gbit/s testbed, where the
 * hosts' CPU paces INA, a 64 MiB INA all-reduce went from 356 to 290 ms
 * and RA-INA from 345 to 273 (docs/ina.md, "On the testbed").  No clones
 * under ThreadSanitizer or MemorySanitizer: they instrument the resolver,
 * which the dynamic linker runs before they are set up (make tsan crashed
 * there). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && \
    !defined(DLCP_UNDER_TSAN) && !defined(DLCP_UNDER_MSAN)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif
/* The most the back-off multiplies the RTO by, and the longest it makes
 * it (unless srtt alone is longer): a group is re-sent well within the
 * switch's lease (10 s by default). */
#define MAX_BACKOFF 64u
#define MAX_BACKED_OFF_NS UINT64_C(1000000000)

/* CLAIMING: its header-only CLAIM is out (p.claim); GRANTED: the switch
 * gave it aggregators, its contribution waits for room in the window. */
enum { GS_UNSENT = 0, GS_CLAIMING, GS_GRANTED, GS_SENT, GS_INA, GS_RING };

struct dlcp_ina {
  const dlcp_mem *mem;
  dlcp_ina_params p;
  uint32_t ngroups;
  uint32_t group_elems;
  uint32_t clog2; /* ceil(log2 scale_world) */
  const unsigned char *in;
  unsigned char *out;
  int32_t *exps;  /* FLOAT32 only */
  uint8_t *state;
  uint16_t *tries;
  uint8_t *unanswered; /* the group's sends since the switch's last answer */
  uint8_t *sent_back;  /* 1: sent, then sent back by a BUSY (unsend) */
  dlcp_tstamp *sent_at;
  uint32_t *prev, *next; /* SENT list (CLAIMING too), oldest first */
  uint32_t head, tail;
  uint32_t low;      /* first group not done */
  bool capped;       /* announce at most |low_cap| (dlcp_ina_cap_low) */
  uint32_t low_cap;  /* absolute group number */
  uint32_t next_new; /* first group never sent */
  uint32_t ready;    /* groups below it may be sent (dlcp_ina_release) */
  uint32_t nsent;    /* groups in SENT */
  uint32_t nclaim;   /* groups in CLAIMING */
  uint32_t *granted; /* GRANTED groups in grant order, a ring of window */
  uint32_t ghead, gcount;
  double ring_share; /* average of recent verdicts, RING 1, INA 0 */
  uint32_t ndone;
  uint32_t *acks;    /* groups to acknowledge */
  uint8_t *ack_again; /* per entry of |acks|: its result came again */
  uint32_t ahead, acount, acap;
  uint32_t low_sent; /* the last datagram's low-water mark (absolute
                        group number; first_group before any) */
  dlcp_duration srtt, rttvar; /* 0: no sample yet */
  dlcp_duration rto;          /* before the back-off */
  uint32_t backoff;           /* 1..MAX_BACKOFF */
  dlcp_tstamp backoff_at;     /* when it last doubled */
  /* The switch's pool as its BUSY answers tell it (pool_busy): the
   * groups the job's partition or share holds (share_groups; 0 before any
   * BUSY, or for RA-INA before any result: pool_cap), and the window
   * inside it (pool_groups; UINT32_MAX before).
   * Groups go only inside the span of pool_groups from the lowest group
   * not done, at most that many out.  A BUSY naming a new share sets the
   * window to it; a BUSY for a group inside the window takes it down by
   * one, to half the share at the least, and each window's worth of
   * results without one (calm_results) brings it back up by one.  Half:
   * a group's aggregators are freed only once every rank has acknowledged
   * its result, after the rank that got it first has sent its next group
   * (SwitchML keeps two copies of each slot).  A fixed half took three
   * jobs' plain-INA all-reduces on a shared pool to 15.8 ms (`make
   * results`, 16 KiB), this 6.2; a fixed whole took one job on a
   * partition of 4 groups to 3.4 ms (test_ina_window_fits_partition),
   * half 0.83, this 0.74. */
  uint32_t share_groups;
  uint32_t pool_groups;
  /* The window (groups) within p.window: with p.window_bytes, the groups
   * answered per half the configured RTO so far (pace_window), at least
   * wnd_floor, the window_bytes' worth; else p.window. */
  uint32_t wnd, wnd_floor;
  dlcp_tstamp pace_t0;    /* the operation's start */
  uint32_t calm_results;
  /* p.cc only: a window per tree (one without cc_trees), and the groups
   * of each tree in SENT. */
  dlcp_ina_cc cc[DLCP_INA_MAX_TREES];
  uint32_t nsent_tree[DLCP_INA_MAX_TREES];
  uint32_t ntrees;
  bool reported;
  dlcp_ina_result r;
};

/* ---- scaling ---------------------------------------------------------- */

static uint32_t ceil_log2(uint32_t n) {
  uint32_t c = 0;

  while ((1u << c) < n) {
    c++;
  }
  return c;
}

/* The scale shift s_g of ina.h; 0 for a zero group. */
static int shift_of(int32_t exp, uint32_t clog2) {
  if (exp == DLCP_INA_EXP_ZERO) {
    return 0;
  }
  return 30 - (int)clog2 - exp;
}

double dlcp_ina_error_bound(int32_t exp, uint32_t world) {
  if (exp == DLCP_INA_EXP_ZERO) {
    return 0.0;
  }
  return world * ldexp(1.0, -shift_of(exp, ceil_log2(world)) - 1);
}

/* The largest |x| of the |n| floats at |in|, as its bits: for floats
 * without their sign the integer order is the numeric one, and Inf and
 * NaN (exponent all ones) are above every finite value, so one integer
 * maximum, which vectorizes, also finds them.  Signed: with the sign bit
 * cleared the order is the same, and SSE2 compares signed integers only
 * (the unsigned maximum took 8 % longer over 64 MiB). */
VECTOR_CLONES
static uint32_t max_abs_bits(const unsigned char *in, size_t n) {
  int32_t mb = 0;

  for (size_t i = 0; i < n; i++) {
    int32_t b;

    memcpy(&b, in + 4 * i, 4);
    b &= 0x7FFFFFFF;
    mb = b > mb ? b : mb;
  }
  return (uint32_t)mb;
}

int dlcp_ina_exponents(const float *x, uint64_t count, uint32_t group_elems,
                       int32_t *exps) {
  uint64_t ng = (count + group_elems - 1u) / group_elems;

  for (uint64_t g = 0; g < ng; g++) {
    uint64_t end = (g + 1u) * group_elems < count ? (g + 1u) * group_elems
                                                  : count;
    uint32_t mb = max_abs_bits((const unsigned char *)(x + g * group_elems),
                               (size_t)(end - g * group_elems));
    float m;
    int e;

    if (mb >= 0x7F800000u) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    memcpy(&m, &mb, 4);
    if (m == 0.0f) {
      exps[g] = DLCP_INA_EXP_ZERO;
      continue;
    }
    (void)frexpf(m, &e);
    exps[g] = e;
  }
  return 0;
}

uint32_t dlcp_ina_ngroups(uint64_t count, uint32_t block_elems,
                          uint32_t group_blocks) {
  uint64_t ge = (uint64_t)block_elems * group_blocks;

  return ge == 0 ? 0 : (uint32_t)((count + ge - 1u) / ge);
}

/* The tree group |g| takes (cc_trees: round-robin on the absolute group
 * number, as the switches). */
static uint32_t tree_of(const dlcp_ina *h, uint32_t g) {
  return h->ntrees > 1 ? (h->p.first_group + g) % h->ntrees : 0;
}

/* Elements of group |g| that lie inside the vector. */
static uint32_t group_len(const dlcp_ina *h, uint32_t g) {
  uint64_t start = (uint64_t)g * h->group_elems;
  uint64_t left = h->p.count - start;

  return left < h->group_elems ? (uint32_t)left : h->group_elems;
}

/* Writes x * scale rounded to the nearest integer (ties to even) of the
 * |n| floats at |in| as int32 at |dst|; false, writing nothing, if one is
 * beyond +-|lim| (NaN and Inf too).  x * scale is exact in double (a power
 * of two times a float); adding and subtracting 1.5 * 2^52 rounds it in
 * the FPU's default mode without libm (x86-64's baseline has no rounding
 * instruction, and floor() per element was most of the hosts' CPU time on
 * the testbed), and both loops vectorize. */
VECTOR_CLONES
static bool scale_floats(uint8_t *restrict dst, const unsigned char *restrict in,
                         size_t n, double scale, int32_t lim) {
  const double round = 6755399441055744.0; /* 1.5 * 2^52 */
  uint32_t mb = max_abs_bits(in, n);
  float m;

  memcpy(&m, &mb, 4);
  if (mb >= 0x7F800000u || (double)m * scale > (double)lim) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    float x;

    memcpy(&x, in + 4 * i, 4);
    double r = ((double)x * scale + round) - round;
    dlcp_put_u32(dst + 4 * i, (uint32_t)(int32_t)r);
  }
  return true;
}

/* Writes group |g|'s contribution as int32 at |dst|; the tail past the
 * vector is zero.  Returns 0 or DLCP_ERR_INVALID_ARGUMENT if a value does
 * not fit its agreed exponent (the exponents were not agreed over every
 * rank's data). */
static int encode_group(const dlcp_ina *h, uint32_t g, uint8_t *dst) {
  uint32_t n = group_len(h, g);
  size_t off = (size_t)g * h->group_elems;

  if (h->p.dtype == DLCP_INT32) {
    for (uint32_t i = 0; i < n; i++) {
      int32_t v;

      memcpy(&v, h->in + 4u * (off + i), 4);
      dlcp_put_u32(dst + 4u * i, (uint32_t)v);
    }
  } else {
    int s = shift_of(h->exps[g], h->clog2);
    double scale = ldexp(1.0, s);
    int32_t lim = (int32_t)((h->p.inputs > 1 ? h->p.inputs : 1u)
                            << (30 - (int)h->clog2));

    if (!scale_floats(dst, h->in + 4u * off, n, scale, lim)) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
  }
  memset(dst + 4u * n, 0, 4u * (h->group_elems - n));
  return 0;
}

/* Writes the |n| little-endian int32 at |src| times |unscale| as floats at
 * |out| (the loop vectorizes). */
VECTOR_CLONES
static void unscale_ints(unsigned char *restrict out,
                         const uint8_t *restrict src, size_t n,
                         double unscale) {
  for (size_t i = 0; i < n; i++) {
    float y = (float)((double)(int32_t)dlcp_get_u32(src + 4 * i) * unscale);

    memcpy(out + 4 * i, &y, 4);
  }
}

/* Writes the group's sum |src| (little-endian int32) into the output. */
static void decode_group(dlcp_ina *h, uint32_t g, const uint8_t *src) {
  uint32_t n = group_len(h, g);
  size_t off = (size_t)g * h->group_elems;
  bool avg = h->p.op == DLCP_AVG;
  /* AVG divides by the contributions in the sum: a chain's whole world */
  uint32_t nsum = h->p.scale_world != 0 ? h->p.scale_world : h->p.world;

  if (h->p.dtype == DLCP_INT32) {
    for (uint32_t i = 0; i < n; i++) {
      int32_t v = (int32_t)dlcp_get_u32(src + 4u * i);

      if (avg) {
        v = (int32_t)(v / (int32_t)nsum);
      }
      memcpy(h->out + 4u * (off + i), &v, 4);
    }
  } else {
    double unscale = ldexp(1.0, -shift_of(h->exps[g], h->clog2));

    if (avg) {
      unscale /= nsum;
    }
    unscale_ints(h->out + 4u * off, src, n, unscale);
  }
}

/* ---- the SENT list ---------------------------------------------------- */

static void sent_unlink(dlcp_ina *h, uint32_t g) {
  if (h->prev[g] != NONE) {
    h->next[h->prev[g]] = h->next[g];
  } else {
    h->head = h->next[g];
  }
  if (h->next[g] != NONE) {
    h->prev[h->next[g]] = h->prev[g];
  } else {
    h->tail = h->prev[g];
  }
  h->prev[g] = h->next[g] = NONE;
}

static void sent_append(dlcp_ina *h, uint32_t g) {
  h->prev[g] = h->tail;
  h->next[g] = NONE;
  if (h->tail != NONE) {
    h->next[h->tail] = g;
  } else {
    h->head = g;
  }
  h->tail = g;
}

/* ---- events ----------------------------------------------------------- */

static void fail(dlcp_ina *h, int status) {
  if (h->r.status == 0) {
    h->r.status = status;
  }
}

/* Queues the ACK of group |g|'s result; |again|: the switch re-sent it. */
static void queue_ack(dlcp_ina *h, uint32_t g, bool again) {
  if (h->acount < h->acap) {
    h->acks[(h->ahead + h->acount) % h->acap] = g;
    h->ack_again[(h->ahead + h->acount) % h->acap] = again;
    h->acount++;
  }
}

/* Group |g| is done (result written, or ring verdict). */
static void group_done(dlcp_ina *h, uint32_t g, int st) {
  if (h->state[g] == GS_SENT) {
    sent_unlink(h, g);
    h->nsent--;
    h->nsent_tree[tree_of(h, g)]--;
  } else if (h->state[g] == GS_CLAIMING) {
    sent_unlink(h, g);
    h->nclaim--;
  }
  h->state[g] = (uint8_t)st;
  h->ndone++;
  while (h->low < h->ngroups && h->state[h->low] >= GS_INA) {
    h->low++;
  }
}

/* The switch answered group |g|.  An answer that can only be to the
 * group's last send ends the back-off: the only send since the last
 * answer, or for a WAITING, which only a copy draws, one of two.  A
 * result to a group sent once is a contribution-to-result time (|result|;
 * Karn's rule); the RTO never drops below the configured one. */
static void answered(dlcp_ina *h, uint32_t g, bool result, bool waiting,
                     dlcp_tstamp now) {
  uint8_t n = h->unanswered[g];
  h->unanswered[g] = 0;
  if ((n != 1 && !(waiting && n == 2)) || now < h->sent_at[g]) {
    return;
  }
  h->backoff = 1;
  if (result && h->tries[g] == 1) {
    dlcp_rtt_sample(&h->srtt, &h->rttvar, now - h->sent_at[g]);
    dlcp_duration rto = dlcp_rtt_timeout(h->srtt, h->rttvar);
    h->rto = rto > h->p.rto_ns ? rto : h->p.rto_ns;
  }
}

/* How long a datagram sent now waits for an answer. */
static dlcp_duration rto_now(const dlcp_ina *h) {
  dlcp_duration t = h->rto * h->backoff;
  if (t > MAX_BACKED_OFF_NS) {
    t = h->rto > MAX_BACKED_OFF_NS ? h->rto : MAX_BACKED_OFF_NS;
  }
  return t;
}

/* The bytes of a group's CONTRIB datagram. */
static size_t contrib_len(const dlcp_ina *h) {
  return DLCP_AGG_HDR_LEN + 4u * (size_t)h->group_elems;
}

/* With p.window_bytes (and without PANAMA's window, which follows the
 * ECN marks instead), the window follows the pace of the results: as
 * many groups as the switch answered per half the configured RTO since
 * the operation began, so the queue a window builds at the slowest link
 * on the way drains well within the RTO (a 64-group window of 8.7 KB
 * datagrams queued 4.5 ms at 1 Gbit/s, and most groups were sent twice),
 * where a fast path keeps the whole window.  Counted from the start, the
 * first round trip included, the pace grows from below: counted from the
 * first result, the results that came back to back at first made it
 * overshoot (5 % slower at 1 Gbit/s).  Between wnd_floor and p.window. */
static void pace_window(dlcp_ina *h, dlcp_tstamp now) {
  if (h->p.window_bytes == 0 || h->p.cc) {
    return;
  }
  if (now <= h->pace_t0) {
    return;
  }
  double want = (double)h->r.results * (double)(h->p.rto_ns / 2u) /
                (double)(now - h->pace_t0);
  uint32_t w = want >= (double)h->p.window ? h->p.window : (uint32_t)want;
  h->wnd = w > h->wnd_floor ? w : h->wnd_floor;
}

/* Group |g| timed out.  If the switch did not answer its last send, sent
 * since the RTO last doubled, the RTO doubles: a window of groups sent
 * together times out together and doubles it once. */
static void back_off(dlcp_ina *h, uint32_t g, dlcp_tstamp now) {
  if (h->unanswered[g] > 0 && h->sent_at[g] >= h->backoff_at &&
      h->backoff < MAX_BACKOFF) {
    h->backoff *= 2;
    h->backoff_at = now;
  }
}

/* A group's verdict, for DLCP_INA_CLAIM_AUTO's average. */
static void verdict_seen(dlcp_ina *h, bool ring) {
  h->ring_share += ((ring ? 1.0 : 0.0) - h->ring_share) / 16.0;
}

/* Retry group |g| when the RTO expires, counted from now. */
static void retry_later(dlcp_ina *h, uint32_t g, dlcp_tstamp now) {
  h->sent_at[g] = now;
  sent_unlink(h, g);
  sent_append(h, g);
}

/* A RESULT's cap (aggregators; UINT16_MAX: more than any window) in
 * groups, UINT32_MAX when saturated. */
static uint32_t cap_groups(const dlcp_ina *h, uint16_t cap) {
  return cap == UINT16_MAX ? UINT32_MAX : cap / h->p.group_blocks;
}

/* The groups |aggs| aggregators hold (at least one, so that the job keeps
 * probing). */
static uint32_t pool_groups_of(const dlcp_ina *h, uint32_t aggs) {
  uint32_t n = aggs / h->p.group_blocks;

  return n > 0 ? n : 1u;
}

/* Group |g| goes back to UNSENT, to go again in order (the new groups'
 * path of dlcp_ina_poll), its count of sends (max_retx) started afresh as
 * for a group never sent: a BUSY answered the job. */
static void unsend(dlcp_ina *h, uint32_t g) {
  sent_unlink(h, g);
  h->nsent--;
  h->nsent_tree[tree_of(h, g)]--;
  h->tries[g] = 0;
  h->state[g] = GS_UNSENT;
  h->sent_back[g] = 1;
  if (g < h->next_new) {
    h->next_new = g;
  }
}

/* Group |g|, inside the window, found no room in the pool: the window
 * goes down by one, to half the share at the least (see share_groups). */
static void pool_shrink(dlcp_ina *h, uint32_t g) {
  if (g - h->low < h->pool_groups &&
      h->pool_groups > (h->share_groups + 1u) / 2u) {
    h->pool_groups--;
    h->calm_results = 0;
  }
}

/* A BUSY answered group |g| and named the job's pool (|aggs|
 * aggregators): the window follows (see share_groups), and the groups
 * out beyond it go back to UNSENT, |g| too.  Retried at the RTO instead,
 * every group beyond the window drew a BUSY per RTO until the groups
 * before it were done (a whole first window, 64 groups against a share of
 * 5, in `make results`' "INA shared FCFS"), and a rank whose one group
 * out was a later one, which the others had sent back, kept out the group
 * they all waited for.  Sent back, |g| goes again once a result opens the
 * window, not an RTO later. */
static void pool_busy(dlcp_ina *h, uint32_t g, uint32_t aggs) {
  uint32_t share = pool_groups_of(h, aggs);

  if (share != h->share_groups) {
    h->share_groups = share;
    h->pool_groups = share;
  } else {
    pool_shrink(h, g);
  }
  for (uint32_t k = h->head; k != NONE;) {
    uint32_t next = h->next[k];

    if (h->state[k] == GS_SENT &&
        (k == g || k - h->low >= h->pool_groups)) {
      unsend(h, k);
    }
    k = next;
  }
}

/* RA-INA's window follows a result's cap, the aggregators the job may
 * hold now (those it holds and its share of the free ones), which is its
 * only word of the pool: a switch answers its groups RING, never BUSY.
 * The window then climbs to the largest cap seen, one group per window's
 * worth of results, and a RING verdict inside it takes it down by one, to
 * half at the least, as a BUSY does plain INA's (pool_shrink).  Sent
 * beyond what the pool could hold, a group was bound for the ring, which
 * is slower than the switch in the runs that motivated it: three jobs on
 * a 16 KiB pool at 10 Gbit/s (`make results`, "ina") went 102.6 -> 71.0
 * ms mean JCT without claims (docs/ina.md). */
static void pool_cap(dlcp_ina *h, uint16_t cap) {
  uint32_t share;

  if (cap == UINT16_MAX) {
    return; /* saturated: more than any window */
  }
  share = pool_groups_of(h, cap);
  if (h->share_groups == 0) {
    h->share_groups = share;
    h->pool_groups = share;
  } else if (share > h->share_groups) {
    h->share_groups = share;
  }
}

static int on_nack(dlcp_ina *h, uint32_t g, const dlcp_agg_hdr *a,
                   const uint8_t *payload, dlcp_tstamp now) {
  if (h->state[g] != GS_SENT && h->state[g] != GS_CLAIMING) {
    return 0; /* an answer to an older copy of a group already done */
  }
  switch ((dlcp_agg_nack)a->aux) {
  case DLCP_AGG_NACK_RING:
    if (h->p.mode != DLCP_INA_RING_FALLBACK) {
      h->r.rejected++;
      return DLCP_ERR_UNKNOWN_TRANSFER;
    }
    answered(h, g, false, false, now);
    h->r.ring_groups++;
    verdict_seen(h, true);
    if (h->share_groups != 0) {
      pool_shrink(h, g); /* RA-INA's BUSY, as it were (pool_cap) */
    }
    group_done(h, g, GS_RING);
    return 0;
  case DLCP_AGG_NACK_BUSY:
    if (a->low != 0) {
      pool_busy(h, g, a->low);
    }
    /* fall through */
  case DLCP_AGG_NACK_AHEAD:
    answered(h, g, false, false, now);
    h->r.busy++;
    if (h->state[g] != GS_UNSENT) { /* not sent back by pool_busy */
      retry_later(h, g, now);
    }
    return 0;
  case DLCP_AGG_NACK_WAITING: {
    if (h->state[g] != GS_SENT) {
      return 0; /* only a contribution is answered so */
    }
    /* Not progress: the switch only says who has not contributed yet.
     * Keep probing at the RTO: a result the switch sends later may be
     * lost, and a re-send brings it back at once (parking the group
     * instead, to spare the re-sends, left recovery to the switch's
     * backed-off re-send timer: one simulated iteration took 65 ms). */
    uint64_t all = h->p.world == 64u ? UINT64_MAX
                                     : (UINT64_C(1) << h->p.world) - 1u;
    answered(h, g, false, true, now);
    h->r.waiting++;
    h->r.waiting_group = h->p.first_group + g;
    h->r.missing = all & ~dlcp_get_u64(payload);
    h->r.waiting_above = h->r.missing == 0;
    retry_later(h, g, now);
    return 0;
  }
  case DLCP_AGG_NACK_GONE:
    fail(h, DLCP_ERR_PEER_ABORTED);
    return DLCP_ERR_PEER_ABORTED;
  case DLCP_AGG_NACK_CONFIG:
    fail(h, DLCP_ERR_CONFIG);
    return DLCP_ERR_CONFIG;
  case DLCP_AGG_NACK_NO_JOB:
    fail(h, DLCP_ERR_LIMIT);
    return DLCP_ERR_LIMIT;
  case DLCP_AGG_NACK_TOO_BIG:
    /* Plain INA only (RA-INA's group would have had a RING verdict): the
     * switch can never hold the group, and retrying would only end in a
     * timeout. */
    h->r.switch_pool = a->low;
    fail(h, DLCP_ERR_CONFIG);
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

int dlcp_ina_on_packet(dlcp_ina *h, const uint8_t *buf, size_t len,
                       uint8_t ecn, dlcp_tstamp now) {
  dlcp_agg_hdr a;
  const uint8_t *payload;
  uint32_t g;
  int rv = dlcp_agg_decode(&a, &payload, buf, len);

  if (rv == 0 && (a.job != h->p.job || a.token != h->p.token)) {
    rv = DLCP_ERR_FOREIGN_JOB;
  }
  if (rv == 0 &&
      (a.rank != h->p.rank || a.world != h->p.world ||
       a.elems != h->p.block_elems || a.nblocks != h->p.group_blocks ||
       (a.type != DLCP_AGG_RESULT && a.type != DLCP_AGG_NACK &&
        a.type != DLCP_AGG_GRANT) ||
       a.group - h->p.first_group >= h->ngroups)) {
    rv = DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if (rv != 0) {
    h->r.rejected++;
    return rv;
  }
  g = a.group - h->p.first_group;
  if (a.type == DLCP_AGG_NACK) {
    return on_nack(h, g, &a, payload, now);
  }
  if (a.type == DLCP_AGG_GRANT) {
    if (h->state[g] == GS_CLAIMING) {
      answered(h, g, false, false, now);
      sent_unlink(h, g);
      h->nclaim--;
      h->state[g] = GS_GRANTED;
      h->tries[g] = 0; /* the contribution's own sends from here */
      h->granted[(h->ghead + h->gcount) % h->p.window] = g;
      h->gcount++;
    }
    return 0; /* or a copy of a grant already taken */
  }
  h->r.last_cap = a.aux;
  if (h->state[g] == GS_INA) {
    h->r.dup_results++;
    queue_ack(h, g, true); /* the switch re-sent it: our ACK was lost */
    return 0;
  }
  /* A group a BUSY sent back may have had an earlier copy counted: its
   * result is as good as any (refused, it waited for a re-send). */
  if (h->state[g] != GS_SENT &&
      !(h->state[g] == GS_UNSENT && h->sent_back[g])) {
    h->r.rejected++;
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  answered(h, g, true, false, now);
  verdict_seen(h, false); /* once per group: here, not at its GRANT */
  h->r.results++;
  h->r.ina_groups++;
  /* Congestion on the way up (the OR of the group's contributions) or on
   * this result's own way down.  Each rank reacts to its own paths:
   * sharing one signal instead (each rank echoing its CE to the switch,
   * which ORed it into every rank's next result) made a simulated 8-rank
   * job under 30-70 % background load 2-3x slower, for the same short-flow
   * tail (docs/ina.md). */
  bool marked = (a.flags & DLCP_AGG_FLAG_ECN_MASK) == DLCP_AGG_ECN_CE ||
                (ecn & DLCP_AGG_FLAG_ECN_MASK) == DLCP_AGG_ECN_CE;
  if (marked) {
    h->r.ecn_marked++;
  }
  if (h->p.cc) {
    dlcp_ina_cc_on_result(&h->cc[tree_of(h, g)], marked,
                          cap_groups(h, a.aux));
  } else if (h->p.mode == DLCP_INA_RING_FALLBACK) {
    pool_cap(h, a.aux);
  }
  /* A window's worth of results without a BUSY inside it. */
  if (h->pool_groups < h->share_groups &&
      ++h->calm_results >= h->pool_groups) {
    h->pool_groups++;
    h->calm_results = 0;
  }
  pace_window(h, now);
  decode_group(h, g, payload);
  group_done(h, g, GS_INA);
  if ((h->r.missing != 0 || h->r.waiting_above) &&
      h->r.waiting_group == h->p.first_group + g) {
    h->r.missing = 0; /* whoever it waited for came */
    h->r.waiting_above = false;
  }
  queue_ack(h, g, false);
  return 0;
}

/* ---- actions out ------------------------------------------------------ */

/* The low-water mark a datagram sent now announces. */
static uint32_t announced_low(const dlcp_ina *h) {
  uint32_t low = h->p.first_group + h->low;

  if (h->capped && (int32_t)(h->low_cap - low) < 0) {
    low = h->low_cap; /* an older operation still needs the switch */
  }
  return low;
}

static void make_hdr(const dlcp_ina *h, dlcp_agg_hdr *a, uint8_t type,
                     uint32_t g) {
  memset(a, 0, sizeof(*a));
  a->type = type;
  a->job = h->p.job;
  a->token = h->p.token;
  a->group = h->p.first_group + g;
  a->low = announced_low(h);
  a->rank = (uint8_t)h->p.rank;
  a->world = (uint8_t)h->p.world;
  a->nblocks = (uint8_t)h->p.group_blocks;
  a->elems = (uint16_t)h->p.block_elems;
  if (type == DLCP_AGG_CONTRIB) {
    a->aux = h->p.chain_place;
  }
}

/* Books the datagram of group |g| just written, |len| bytes, as the
 * action: a re-send moves the group to the SENT list's end (a first send
 * has set its state and counter). */
static void record_send(dlcp_ina *h, dlcp_ina_action *act, uint32_t g,
                        bool retx, size_t len, dlcp_tstamp now) {
  if (retx) {
    sent_unlink(h, g);
    h->r.retransmits++;
  }
  h->tries[g]++;
  if (h->unanswered[g] < UINT8_MAX) {
    h->unanswered[g]++;
  }
  h->sent_at[g] = now;
  sent_append(h, g);
  h->low_sent = announced_low(h);
  act->type = DLCP_INA_ACT_SEND;
  act->len = len;
}

/* Writes the CLAIM of group |g| (re-sent if |retx|). */
static int send_claim(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                      size_t buflen, uint32_t g, bool retx, dlcp_tstamp now) {
  dlcp_agg_hdr a;

  if (buflen < DLCP_AGG_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  make_hdr(h, &a, DLCP_AGG_CLAIM, g);
  a.flags = DLCP_AGG_FLAG_RING | (retx ? DLCP_AGG_FLAG_RETX : 0);
  (void)dlcp_agg_hdr_encode(buf, buflen, &a);
  if (!retx) {
    h->state[g] = GS_CLAIMING;
    h->nclaim++;
  }
  h->r.claims_sent++;
  record_send(h, act, g, retx, DLCP_AGG_HDR_LEN, now);
  return 0;
}

/* Writes the CONTRIB of group |g| (re-sent if |retx|). */
static int send_group(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                      size_t buflen, uint32_t g, bool retx, dlcp_tstamp now) {
  dlcp_agg_hdr a;
  size_t len = contrib_len(h);
  int rv;

  if (buflen < len) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  make_hdr(h, &a, DLCP_AGG_CONTRIB, g);
  if (h->p.mode == DLCP_INA_RING_FALLBACK) {
    a.flags |= DLCP_AGG_FLAG_RING;
  }
  if (retx) {
    a.flags |= DLCP_AGG_FLAG_RETX;
  }
  (void)dlcp_agg_hdr_encode(buf, buflen, &a);
  rv = encode_group(h, g, buf + DLCP_AGG_HDR_LEN);
  if (rv != 0) {
    fail(h, rv);
    return rv;
  }
  if (!retx) {
    h->state[g] = GS_SENT;
    h->nsent++;
    h->nsent_tree[tree_of(h, g)]++;
  }
  h->r.sent++;
  record_send(h, act, g, retx, len, now);
  return 0;
}

/* The window: the configured one, or every tree's (cc). */
static uint32_t window_limit(const dlcp_ina *h) {
  uint32_t w = h->wnd;

  if (h->p.cc) {
    w = 0;
    for (uint32_t t = 0; t < h->ntrees; t++) {
      w += dlcp_ina_cc_window(&h->cc[t]);
    }
  }
  return w;
}

/* The groups that may be outstanding now: the window within the pool's. */
static uint32_t outstanding_limit(const dlcp_ina *h) {
  uint32_t w = window_limit(h);

  return w < h->pool_groups ? w : h->pool_groups;
}

/* Whether group |g| may go out now: its tree's window (cc) has room, and
 * the groups outstanding stay inside the window and, unless |g| was
 * granted, the pool's.  A granted group holds its aggregators already, and
 * ranks may be granted groups in different orders: with RA-INA's pool
 * window of one group (pool_cap), three ranks sent group 109 and the
 * fourth group 115 into it, and each waited for the other
 * (agg_test test_jobs_share_small_pool). */
static bool may_send(const dlcp_ina *h, uint32_t g, bool granted) {
  uint32_t t = tree_of(h, g);

  if (h->p.cc && h->nsent_tree[t] >= dlcp_ina_cc_window(&h->cc[t])) {
    return false;
  }
  return h->nsent < (granted ? window_limit(h) : outstanding_limit(h));
}

/* Drops the queued ACKs that the last datagram's low-water mark covered
 * (a result the switch sent again excepted: only an ACK shows the switch
 * that a re-send was needless). */
static void drop_covered_acks(dlcp_ina *h) {
  while (h->acount > 0 && !h->ack_again[h->ahead] &&
         (int32_t)(h->p.first_group + h->acks[h->ahead] - h->low_sent) < 0) {
    h->ahead = (h->ahead + 1u) % h->acap;
    h->acount--;
    h->r.acks_implied++;
  }
}

/* Whether the switch's last cap (aggregators the job holds plus its share
 * of the free ones) has room for every group this rank may have out and
 * for those whose ACKs it holds: then no contribution needs the
 * aggregators an ACK frees. */
static bool pool_has_room(const dlcp_ina *h) {
  return cap_groups(h, h->r.last_cap) > window_limit(h) + h->acount;
}

/* Whether the ACK at the head of the queue may ride in the next
 * contribution: that datagram's mark would cover it, and the pool has
 * room, so its group's aggregators are not needed first. */
static bool head_ack_coverable(const dlcp_ina *h) {
  return !h->ack_again[h->ahead] && pool_has_room(h) &&
         (int32_t)(h->p.first_group + h->acks[h->ahead] - announced_low(h)) <
             0;
}

static int send_ack(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                    size_t buflen) {
  dlcp_agg_hdr a;

  if (buflen < DLCP_AGG_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  make_hdr(h, &a, DLCP_AGG_ACK, h->acks[h->ahead]);
  if (h->ack_again[h->ahead]) {
    a.flags = DLCP_AGG_FLAG_RETX;
  }
  (void)dlcp_agg_hdr_encode(buf, buflen, &a);
  h->ahead = (h->ahead + 1u) % h->acap;
  h->acount--;
  h->low_sent = a.low;
  act->type = DLCP_INA_ACT_SEND;
  act->len = DLCP_AGG_HDR_LEN;
  return 0;
}

/* The next contribution or claim due now, if any (act stays NONE when
 * there is none): a re-send at its RTO, a granted group, a claim, a new
 * group. */
static int send_due(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                    size_t buflen, dlcp_tstamp now) {
  if (h->r.status == 0 && h->head != NONE &&
      h->sent_at[h->head] + rto_now(h) <= now) {
    uint32_t g = h->head;

    back_off(h, g, now);
    if (h->tries[g] > h->p.max_retx) {
      fail(h, DLCP_ERR_TIMEOUT);
    } else if (h->state[g] == GS_CLAIMING) {
      return send_claim(h, act, buf, buflen, g, true, now);
    } else {
      return send_group(h, act, buf, buflen, g, true, now);
    }
  }
  if (h->r.status == 0 && h->gcount > 0 &&
      may_send(h, h->granted[h->ghead], true)) {
    uint32_t g = h->granted[h->ghead];
    h->ghead = (h->ghead + 1u) % h->p.window;
    h->gcount--;
    return send_group(h, act, buf, buflen, g, false, now);
  }
  /* Past the groups sent since unsend rewound next_new: a BUSY, which a
   * switch gives plain INA only, sends groups back, and one that reached
   * RA-INA's claims sent a group still claimed or granted again, linking
   * it into the list of groups out twice (fuzz_ina_host: a cycle). */
  while (h->next_new < h->ngroups && h->state[h->next_new] != GS_UNSENT) {
    h->next_new++;
  }
  /* With claims, a window of claims runs ahead of the window of
   * contributions, so that the verdict's round trip is hidden. */
  bool claim = h->p.claim == DLCP_INA_CLAIM_ALWAYS ||
               (h->p.claim == DLCP_INA_CLAIM_AUTO && h->ring_share > 0.5);
  if (h->r.status == 0 && claim && h->next_new < h->ngroups &&
      h->next_new < h->ready && h->nclaim + h->gcount < h->wnd &&
      h->next_new - h->low < 2u * h->wnd) {
    return send_claim(h, act, buf, buflen, h->next_new++, false, now);
  }
  if (h->r.status == 0 && !claim && h->next_new < h->ngroups &&
      h->next_new < h->ready && may_send(h, h->next_new, false) &&
      h->next_new - h->low < h->wnd &&
      h->next_new - h->low < h->pool_groups) {
    return send_group(h, act, buf, buflen, h->next_new++, false, now);
  }
  return 0;
}

int dlcp_ina_poll(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now) {
  act->type = DLCP_INA_ACT_NONE;
  act->len = 0;
  /* Every datagram carries the low-water mark, which acknowledges every
   * result below it: when a contribution or claim is due and the pool has
   * room for it, the ACKs its mark covers ride in it.  In the steady state
   * every result opens the window for the next group, and the switch then
   * handles two datagrams per group and rank instead of three.  When the
   * pool is what limits the job (a partition, a share), the ACK goes first:
   * a group's aggregators are freed once every rank has acknowledged it,
   * and the ranks' results come at the same moment, so their small ACKs
   * all reach the switch before their contributions do, which then find
   * the group freed.  Riding in the contributions, the first of them to be
   * taken would find it still held, and be answered BUSY (SwitchML-style
   * partitions in the simulator: 1.7x slower).  The other ACKs no datagram
   * is due to cover (the operation's last results, results above a gap,
   * results the switch sent again) go out on their own too, and before any
   * other datagram, as results mostly come in batches and one mark covers
   * the ACKs queued behind it. */
  drop_covered_acks(h);
  if (h->r.status == 0 && h->acount > 0 && !head_ack_coverable(h)) {
    return send_ack(h, act, buf, buflen);
  }
  int rv = send_due(h, act, buf, buflen, now);
  if (rv != 0 || act->type != DLCP_INA_ACT_NONE) {
    return rv;
  }
  if (h->r.status == 0 && h->acount > 0) {
    return send_ack(h, act, buf, buflen); /* nothing due to carry it */
  }
  if (!h->reported && (h->r.status != 0 || h->ndone == h->ngroups)) {
    h->reported = true;
    h->r.done = true;
    act->type = DLCP_INA_ACT_DONE;
  }
  return h->r.status;
}

void dlcp_ina_release(dlcp_ina *h, uint32_t groups) {
  if (groups > h->ready) {
    h->ready = groups;
  }
}

void dlcp_ina_cap_low(dlcp_ina *h, uint32_t low) {
  h->capped = true;
  h->low_cap = low;
}

uint32_t dlcp_ina_low(const dlcp_ina *h) {
  return h->p.first_group + h->low;
}

dlcp_tstamp dlcp_ina_next_deadline(const dlcp_ina *h) {
  if (h->reported || h->head == NONE) {
    return DLCP_TSTAMP_NEVER;
  }
  return h->sent_at[h->head] + rto_now(h);
}

void dlcp_ina_get_result(const dlcp_ina *h, dlcp_ina_result *r) {
  *r = h->r;
  r->ngroups = h->ngroups;
  r->done_below = h->low;
  r->cwnd = outstanding_limit(h);
  r->cwnd_cuts = 0;
  for (uint32_t t = 0; h->p.cc && t < h->ntrees; t++) {
    r->cwnd_cuts += h->cc[t].cuts;
  }
}

/* ---- the ring part of RA-INA ----------------------------------------- */

uint64_t dlcp_ina_ring_elems(const dlcp_ina *h) {
  uint64_t n = 0;

  for (uint32_t g = 0; g < h->ngroups; g++) {
    if (h->state[g] == GS_RING) {
      n += group_len(h, g);
    }
  }
  return n;
}

void dlcp_ina_ring_pack(const dlcp_ina *h, void *dst) {
  unsigned char *d = dst;

  for (uint32_t g = 0; g < h->ngroups; g++) {
    if (h->state[g] == GS_RING) {
      size_t n = 4u * (size_t)group_len(h, g);

      memcpy(d, h->in + 4u * (size_t)g * h->group_elems, n);
      d += n;
    }
  }
}

void dlcp_ina_ring_unpack(dlcp_ina *h, const void *src) {
  const unsigned char *s = src;

  for (uint32_t g = 0; g < h->ngroups; g++) {
    if (h->state[g] == GS_RING) {
      uint32_t n = group_len(h, g);
      unsigned char *o = h->out + 4u * (size_t)g * h->group_elems;

      for (uint32_t i = 0; i < n; i++) {
        if (h->p.dtype == DLCP_INT32) {
          int32_t v;

          memcpy(&v, s + 4u * i, 4);
          if (h->p.op == DLCP_AVG) {
            v /= (int32_t)h->p.world;
          }
          memcpy(o + 4u * i, &v, 4);
        } else {
          float v;

          memcpy(&v, s + 4u * i, 4);
          if (h->p.op == DLCP_AVG) {
            v /= (float)h->p.world;
          }
          memcpy(o + 4u * i, &v, 4);
        }
      }
      s += 4u * (size_t)n;
    }
  }
}

dlcp_ssize dlcp_ina_ack_for(uint8_t *buf, size_t buflen, const uint8_t *res,
                            size_t res_len, uint32_t job, uint64_t token,
                            const uint32_t *low) {
  dlcp_agg_hdr a;
  const uint8_t *payload;
  int rv = dlcp_agg_decode(&a, &payload, res, res_len);

  if (rv != 0) {
    return rv;
  }
  if (a.job != job || a.token != token) {
    return DLCP_ERR_FOREIGN_JOB;
  }
  if (a.type != DLCP_AGG_RESULT) {
    return DLCP_ERR_BAD_TYPE;
  }
  a.type = DLCP_AGG_ACK;
  a.flags = 0;
  a.aux = 0;
  a.low = low != NULL ? *low : a.group + 1u;
  return dlcp_agg_hdr_encode(buf, buflen, &a);
}

/* ---- life cycle ------------------------------------------------------- */

void dlcp_ina_params_default(dlcp_ina_params *p) {
  memset(p, 0, sizeof(*p));
  p->world = 1;
  p->mode = DLCP_INA_WAIT;
  p->dtype = DLCP_FLOAT32;
  p->op = DLCP_SUM;
  p->block_elems = DLCP_AGG_DEFAULT_BLOCK_ELEMS;
  p->group_blocks = 4;
  p->window = 64;
  p->window_bytes = 128u * 1024u;
  p->rto_ns = 2000000;
  p->max_retx = 200;
  p->ready_groups = UINT32_MAX;
}

void dlcp_ina_del(dlcp_ina *h) {
  if (h == NULL) {
    return;
  }
  h->mem->free(h->exps, h->mem->user);
  h->mem->free(h->state, h->mem->user);
  h->mem->free(h->tries, h->mem->user);
  h->mem->free(h->unanswered, h->mem->user);
  h->mem->free(h->sent_back, h->mem->user);
  h->mem->free(h->sent_at, h->mem->user);
  h->mem->free(h->prev, h->mem->user);
  h->mem->free(h->next, h->mem->user);
  h->mem->free(h->acks, h->mem->user);
  h->mem->free(h->ack_again, h->mem->user);
  h->mem->free(h->granted, h->mem->user);
  h->mem->free(h, h->mem->user);
}

static int params_check(const dlcp_ina_params *p) {
  uint64_t ge = (uint64_t)p->block_elems * p->group_blocks;

  if (p->world == 0 || p->world > DLCP_AGG_MAX_WORLD || p->rank >= p->world ||
      (p->dtype != DLCP_FLOAT32 && p->dtype != DLCP_INT32) ||
      (p->op != DLCP_SUM && p->op != DLCP_AVG) ||
      (p->mode != DLCP_INA_WAIT && p->mode != DLCP_INA_RING_FALLBACK) ||
      p->block_elems == 0 || p->block_elems > DLCP_AGG_MAX_BLOCK_ELEMS ||
      p->group_blocks == 0 || p->group_blocks > DLCP_AGG_MAX_BLOCKS ||
      DLCP_AGG_HDR_LEN + 4u * ge > DLCP_AGG_DGRAM_MAX || p->window == 0 ||
      p->window > DLCP_INA_MAX_WINDOW || p->cc_trees > DLCP_INA_MAX_TREES ||
      p->rto_ns == 0 ||
      p->max_retx > UINT16_MAX - 1u || (p->count > 0 && p->recvbuf == NULL) ||
      (unsigned)p->claim > DLCP_INA_CLAIM_AUTO ||
      (p->claim != DLCP_INA_CLAIM_NEVER &&
       p->mode != DLCP_INA_RING_FALLBACK) ||
      p->scale_world > DLCP_INA_MAX_SCALE_WORLD ||
      p->inputs > (p->scale_world != 0 ? p->scale_world : p->world) ||
      (p->chain_place != 0 &&
       (p->mode != DLCP_INA_WAIT ||
        DLCP_AGG_CHAIN_WORLD(p->chain_place) > DLCP_AGG_MAX_WORLD ||
        DLCP_AGG_CHAIN_RANK(p->chain_place) >=
            DLCP_AGG_CHAIN_WORLD(p->chain_place))) ||
      (p->count + ge - 1u) / ge > UINT32_MAX - p->first_group ||
      (p->dtype == DLCP_FLOAT32 && p->count > 0 && p->exps == NULL)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

int dlcp_ina_new(dlcp_ina **ph, const dlcp_ina_params *p, const dlcp_mem *mem,
                 dlcp_tstamp now) {
  dlcp_ina *h;
  uint32_t ng;
  int rv = params_check(p);

  if (rv != 0) {
    return rv;
  }
  mem = mem != NULL ? mem : dlcp_mem_default();
  h = mem->calloc(1, sizeof(*h), mem->user);
  if (h == NULL) {
    return DLCP_ERR_NOMEM;
  }
  h->mem = mem;
  h->p = *p;
  h->rto = p->rto_ns;
  h->backoff = 1;
  h->pool_groups = UINT32_MAX;
  h->low_sent = p->first_group;
  h->ntrees = p->cc_trees > 1 ? p->cc_trees : 1u;
  for (uint32_t t = 0; p->cc && t < h->ntrees; t++) {
    dlcp_ina_cc_init(&h->cc[t], p->cc_init ? p->cc_init : 10u, p->window);
  }
  h->p.exps = NULL;
  h->group_elems = p->block_elems * p->group_blocks;
  h->pace_t0 = now;
  h->wnd = p->window;
  if (p->window_bytes > 0 && !p->cc) {
    uint64_t w = p->window_bytes / contrib_len(h);
    w = w > 0 ? w : 1;
    h->wnd_floor = w < p->window ? (uint32_t)w : p->window;
    h->wnd = h->wnd_floor;
  }
  ng = dlcp_ina_ngroups(p->count, p->block_elems, p->group_blocks);
  h->ngroups = ng;
  h->clog2 = ceil_log2(p->scale_world != 0 ? p->scale_world : p->world);
  h->ready = p->ready_groups;
  h->in = p->sendbuf != NULL ? p->sendbuf : p->recvbuf;
  h->out = p->recvbuf;
  h->acap = 2u * p->window + 16u;
  h->state = mem->calloc(ng + 1u, 1, mem->user);
  h->tries = mem->calloc(ng + 1u, sizeof(*h->tries), mem->user);
  h->unanswered = mem->calloc(ng + 1u, 1, mem->user);
  h->sent_back = mem->calloc(ng + 1u, 1, mem->user);
  h->sent_at = mem->calloc(ng + 1u, sizeof(*h->sent_at), mem->user);
  h->prev = mem->malloc((ng + 1u) * sizeof(*h->prev), mem->user);
  h->next = mem->malloc((ng + 1u) * sizeof(*h->next), mem->user);
  h->acks = mem->malloc(h->acap * sizeof(*h->acks), mem->user);
  h->ack_again = mem->malloc(h->acap, mem->user);
  h->granted = mem->malloc(p->window * sizeof(*h->granted), mem->user);
  if (p->dtype == DLCP_FLOAT32) {
    h->exps = mem->malloc((ng + 1u) * sizeof(*h->exps), mem->user);
  }
  if (h->state == NULL || h->tries == NULL || h->unanswered == NULL ||
      h->sent_back == NULL ||
      h->sent_at == NULL || h->prev == NULL || h->next == NULL ||
      h->acks == NULL || h->ack_again == NULL || h->granted == NULL ||
      (p->dtype == DLCP_FLOAT32 && h->exps == NULL)) {
    dlcp_ina_del(h);
    return DLCP_ERR_NOMEM;
  }
  if (h->exps != NULL && ng > 0) {
    memcpy(h->exps, p->exps, ng * sizeof(*h->exps));
  }
  memset(h->prev, 0xFF, (ng + 1u) * sizeof(*h->prev));
  memset(h->next, 0xFF, (ng + 1u) * sizeof(*h->next));
  h->head = h->tail = NONE;
  *ph = h;
  return 0;
}
