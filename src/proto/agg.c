/*
 * agg.c: the aggregation switch (model in agg.h).
 *
 * Data layout.  |sum| holds naggs * block_elems uint32 sums (two's
 * complement: additions wrap as int32 SUM is defined to, without undefined
 * behaviour).  |slot| has one record per aggregator; a claimed group of k
 * aggregators is described by the record of its first one (the head), the
 * others point at it only through the free bitmap being clear.  Groups are
 * found by (job slot, group index) through a chained hash table whose
 * chains run through the head records.  Free aggregators are the set bits
 * of |freemap|; a claim looks for k consecutive set bits, next-fit from a
 * roving cursor (SHARED) or inside the job's partition (STATIC).
 *
 * Timers.  Incomplete groups sit in a list ordered by last activity (the
 * lease), complete ones in another (the resend timeout): both are FIFOs
 * because every activity moves a group to its list's tail, so the deadline
 * is the earlier of the two heads.
 *
 * Output.  Answers wait in a ring of self-contained entries: a result
 * entry names its group by slot and generation, so a group freed or
 * reused before the entry is polled is skipped, not sent with someone
 * else's sums.
 *
 * Sections: helpers, jobs and verdicts, groups, packets in, timers, poll.
 */
#include "proto/agg.h"

#include <string.h>

#include "wire/bytes.h"

#define NONE UINT32_MAX

/* G_UP: complete here, its partial sum sent to the parent (a chain),
 * waiting for the final sum. */
enum { G_FREE = 0, G_COLLECTING, G_COMPLETE, G_UP };
enum { V_UNDECIDED = 0, V_INA = 1, V_RING = 2 };
enum { L_COLLECTING = 0, L_COMPLETE = 1 };

typedef struct agg_slot {
  uint64_t seen;  /* workers whose contribution is in the sum */
  uint64_t acked; /* workers that acknowledged the result */
  dlcp_tstamp touched;
  dlcp_tstamp grown; /* claimed, or a worker's contribution added */
  uint32_t job;   /* job slot */
  uint32_t group;
  uint32_t hnext; /* hash chain */
  uint32_t tprev, tnext; /* timer list */
  uint32_t gen;   /* bumped when the group is freed */
  uint32_t resends;
  uint8_t state, nblocks, world, ecn;
} agg_slot;

typedef struct agg_job {
  bool active;
  bool sharing; /* counted in jobs_sharing (see dlcp_agg_config.idle_ns) */
  uint8_t world;
  uint16_t place; /* its chain place at the parent (CONTRIB aux), or 0 */
  bool chained;    /* a final came from a parent: up_cap holds */
  uint16_t up_cap; /* the cap in the parent's last final */
  uint32_t id;
  uint64_t token;
  uint32_t base;  /* verdict window start: min of low[] */
  uint32_t held;  /* aggregators held */
  dlcp_tstamp touched;
  uint32_t low[DLCP_AGG_MAX_WORLD];
  uint64_t addr[DLCP_AGG_MAX_WORLD];
  uint8_t *verdict; /* window_groups 2-bit entries, indexed group % window */
} agg_job;

typedef struct agg_out {
  uint8_t type; /* RESULT or NACK; to the parent CONTRIB (the partial sum
                   of |slot|) or ACK */
  uint8_t rank, world, nblocks;
  uint16_t reason; /* NACK: dlcp_agg_nack; RESULT: 1 if a re-send */
  uint32_t job_id, group, slot, gen;
  uint32_t low;    /* NACK TOO_BIG: the aggregators the job can have */
  uint64_t token, addr;
  uint64_t seen;   /* NACK WAITING: the workers the group holds */
} agg_out;

struct dlcp_agg {
  const dlcp_mem *mem;
  dlcp_agg_config cfg;
  uint32_t naggs;
  uint32_t cursor;
  uint32_t last_job; /* job_find's first guess */
  uint32_t *sum;
  agg_slot *slot;
  uint64_t *freemap;
  uint32_t *bucket;
  uint32_t bmask;
  agg_job *job;
  uint8_t *verdicts;
  uint32_t thead[2], ttail[2];
  agg_out *out;
  uint32_t ohead, ocount;
  dlcp_duration resend_ns; /* now: cfg.resend_ns, backed off (below) */
  dlcp_agg_stats st;
};

/* Hosts slower to acknowledge than the re-send interval (twelve ranks and
 * this daemon on two loaded cores) get every result again and again, each
 * re-send is more load, and the loop feeds itself: three RA-INA jobs on
 * the testbed had 3.3 M results re-sent for 14,040 groups (docs/ina.md).
 * So an acknowledgement that shows a re-send was not needed (a worker
 * acknowledging twice, or a group already freed) doubles the interval,
 * up to this many times the configured one, and every group freed
 * without a re-send takes 1/16 of the excess back, as TCP's RTO backs
 * off and recovers.  One interval for all groups keeps the timer list a
 * FIFO. */
#define RESEND_BACKOFF_MAX 64u

static void resend_needless(dlcp_agg *a) {
  dlcp_duration cap = a->cfg.resend_ns * RESEND_BACKOFF_MAX;
  if (a->resend_ns < cap) {
    a->resend_ns = a->resend_ns * 2 < cap ? a->resend_ns * 2 : cap;
    a->st.resend_backoffs++;
  }
}

static void resend_sufficed(dlcp_agg *a) {
  a->resend_ns -= (a->resend_ns - a->cfg.resend_ns) / 16;
}

/* ---- helpers ---------------------------------------------------------- */

/* The payload is little-endian int32.  The wire helpers are plain loads
 * and stores on a little-endian host, so these loops vectorize. */
static void le_copy_in(uint32_t *restrict dst, const uint8_t *restrict src,
                       size_t n) {
  for (size_t i = 0; i < n; i++) {
    dst[i] = dlcp_get_u32(src + 4u * i);
  }
}

static void le_add_in(uint32_t *restrict dst, const uint8_t *restrict src,
                      size_t n) {
  for (size_t i = 0; i < n; i++) {
    dst[i] += dlcp_get_u32(src + 4u * i);
  }
}

static void le_copy_out(uint8_t *restrict dst, const uint32_t *restrict src,
                        size_t n) {
  for (size_t i = 0; i < n; i++) {
    dlcp_put_u32(dst + 4u * i, src[i]);
  }
}

static uint64_t all_workers(uint32_t world) {
  return world >= 64 ? UINT64_MAX : (UINT64_C(1) << world) - 1u;
}

static uint32_t hash_of(const dlcp_agg *a, uint32_t job, uint32_t group) {
  uint32_t h = group * 0x9E3779B1u ^ (job + 1u) * 0x85EBCA77u;

  return (h ^ (h >> 15)) & a->bmask;
}

static bool is_free(const dlcp_agg *a, uint32_t i) {
  return (a->freemap[i / 64u] >> (i % 64u)) & 1u;
}

static void mark(dlcp_agg *a, uint32_t first, uint32_t n, bool free_) {
  for (uint32_t i = first; i < first + n; i++) {
    uint64_t bit = UINT64_C(1) << (i % 64u);

    if (free_) {
      a->freemap[i / 64u] |= bit;
    } else {
      a->freemap[i / 64u] &= ~bit;
    }
  }
}

/* The first of |n| consecutive free aggregators in [start, end), or NONE.
 * Whole words are skipped when full or taken whole when free. */
static uint32_t scan_run(const dlcp_agg *a, uint32_t start, uint32_t end,
                         uint32_t n) {
  uint32_t run = 0;
  uint32_t i = start;

  while (i < end) {
    uint64_t w = a->freemap[i / 64u];

    if (i % 64u == 0 && i + 64u <= end && (w == 0 || w == UINT64_MAX)) {
      run = w == 0 ? 0 : run + 64u;
      i += 64u;
      if (run >= n) {
        return i - run;
      }
      continue;
    }
    run = is_free(a, i) ? run + 1u : 0;
    i++;
    if (run == n) {
      return i - n;
    }
  }
  return NONE;
}

static void list_unlink(dlcp_agg *a, int l, uint32_t s) {
  agg_slot *g = &a->slot[s];

  if (g->tprev != NONE) {
    a->slot[g->tprev].tnext = g->tnext;
  } else {
    a->thead[l] = g->tnext;
  }
  if (g->tnext != NONE) {
    a->slot[g->tnext].tprev = g->tprev;
  } else {
    a->ttail[l] = g->tprev;
  }
  g->tprev = g->tnext = NONE;
}

static void list_append(dlcp_agg *a, int l, uint32_t s) {
  agg_slot *g = &a->slot[s];

  g->tprev = a->ttail[l];
  g->tnext = NONE;
  if (a->ttail[l] != NONE) {
    a->slot[a->ttail[l]].tnext = s;
  } else {
    a->thead[l] = s;
  }
  a->ttail[l] = s;
}

static void queue_out(dlcp_agg *a, const agg_out *o) {
  if (a->ocount == a->cfg.out_queue) {
    a->st.queue_drops++;
    return;
  }
  a->out[(a->ohead + a->ocount) % a->cfg.out_queue] = *o;
  a->ocount++;
}

/* Queues a NACK answering the packet |h| from |addr|; |low| is the
 * header's low field (nonzero only for TOO_BIG and BUSY). */
static void queue_nack_low(dlcp_agg *a, const dlcp_agg_hdr *h, uint64_t addr,
                           uint16_t reason, uint32_t low) {
  agg_out o = {DLCP_AGG_NACK, h->rank, h->world, h->nblocks, reason,
               h->job, h->group, NONE, 0, low, h->token, addr, 0};

  queue_out(a, &o);
}

static void queue_nack(dlcp_agg *a, const dlcp_agg_hdr *h, uint64_t addr,
                       uint16_t reason) {
  queue_nack_low(a, h, addr, reason, 0);
}

/* Queues the result of the group at |s| for |rank| (|again|: a re-send). */
static void queue_result(dlcp_agg *a, uint32_t s, uint8_t rank, bool again) {
  const agg_slot *g = &a->slot[s];
  const agg_job *j = &a->job[g->job];
  agg_out o = {DLCP_AGG_RESULT, rank, g->world, g->nblocks, again,
               j->id, g->group, s, g->gen, 0, j->token, j->addr[rank], 0};

  queue_out(a, &o);
}

/* The tree group |group| belongs to. */
static uint32_t tree_of(const dlcp_agg *a, uint32_t group) {
  return group % a->cfg.ntrees;
}

/* Job |j|'s place at the parent of |group|'s tree: the configured one, else
 * the one its contributions named; 0 if that group is not sent up. */
static uint16_t up_place(const dlcp_agg *a, const agg_job *j,
                         uint32_t group) {
  uint32_t t = tree_of(a, group);

  if (!a->cfg.has_parent[t]) {
    return 0;
  }
  return a->cfg.parent_place[t] ? a->cfg.parent_place[t] : j->place;
}

/* Queues the partial sum of the complete group at |s| for the parent, as
 * the contribution of the job's chain place there. */
static void queue_up(dlcp_agg *a, uint32_t s, bool again) {
  const agg_slot *g = &a->slot[s];
  const agg_job *j = &a->job[g->job];
  uint16_t place = up_place(a, j, g->group);
  agg_out o = {DLCP_AGG_CONTRIB, DLCP_AGG_CHAIN_RANK(place),
               DLCP_AGG_CHAIN_WORLD(place), g->nblocks, again, j->id,
               g->group, s, g->gen, j->base, j->token,
               a->cfg.parent_addr[tree_of(a, g->group)], 0};

  queue_out(a, &o);
}

/* ---- jobs and verdicts ------------------------------------------------ */

static int verdict_get(const dlcp_agg *a, const agg_job *j, uint32_t group) {
  uint32_t i = group & (a->cfg.window_groups - 1u);

  return (j->verdict[i / 4u] >> (2u * (i % 4u))) & 3;
}

static void verdict_set(const dlcp_agg *a, agg_job *j, uint32_t group,
                        int v) {
  uint32_t i = group & (a->cfg.window_groups - 1u);
  uint8_t *b = &j->verdict[i / 4u];
  unsigned sh = 2u * (i % 4u);

  *b = (uint8_t)((*b & ~(3u << sh)) | ((unsigned)v << sh));
}

/* Raises |rank|'s low-water mark to |low| and slides the verdict window
 * to the lowest mark, forgetting the verdicts of groups it leaves. */
static void job_set_low(dlcp_agg *a, agg_job *j, uint8_t rank, uint32_t low) {
  uint32_t step = UINT32_MAX;

  /* Group numbers are compared as serial numbers (RFC 1982), so a job can
   * run through more than 2^32 groups. */
  if ((int32_t)(low - j->low[rank]) <= 0) {
    return;
  }
  j->low[rank] = low;
  for (uint32_t r = 0; r < j->world; r++) {
    uint32_t d = j->low[r] - j->base;

    step = d < step ? d : step;
  }
  for (uint32_t d = 0; d < step && d < a->cfg.window_groups; d++) {
    verdict_set(a, j, j->base + d, V_UNDECIDED);
  }
  j->base += step;
}

/* The job slot of |id|, or NONE; the last slot found is tried first, as
 * consecutive packets mostly belong to one job. */
static uint32_t job_find(dlcp_agg *a, uint32_t id) {
  if (a->job[a->last_job].active && a->job[a->last_job].id == id) {
    return a->last_job;
  }
  for (uint32_t i = 0; i < a->cfg.max_jobs; i++) {
    if (a->job[i].active && a->job[i].id == id) {
      a->last_job = i;
      return i;
    }
  }
  return NONE;
}

/* A free job slot for a new job (STATIC: one that owns a partition). */
static uint32_t job_start(dlcp_agg *a, const dlcp_agg_hdr *h,
                          dlcp_tstamp now) {
  uint32_t lim = a->cfg.policy == DLCP_AGG_STATIC ? a->cfg.static_parts
                                                  : a->cfg.max_jobs;

  for (uint32_t i = 0; i < lim; i++) {
    agg_job *j = &a->job[i];

    if (!j->active) {
      uint8_t *v = j->verdict;

      memset(j, 0, sizeof(*j));
      j->verdict = v;
      memset(v, 0, a->cfg.window_groups / 4u);
      j->active = true;
      j->id = h->job;
      j->token = h->token;
      j->world = h->world;
      j->touched = now;
      j->sharing = true;
      a->st.jobs_started++;
      a->st.jobs_active++;
      a->st.jobs_sharing++;
      return i;
    }
  }
  a->st.jobs_refused++;
  return NONE;
}

/* ---- groups ----------------------------------------------------------- */

/* The most consecutive aggregators a job can ever hold: the whole pool
 * (SHARED), or its partition (STATIC; all partitions are equal). */
static uint32_t job_pool(const dlcp_agg *a) {
  return a->cfg.policy == DLCP_AGG_STATIC ? a->naggs / a->cfg.static_parts
                                          : a->naggs;
}

/* |c| lowered to the cap in the last final of the job's parent switch,
 * if the job is chained here. */
static uint32_t below_parent_cap(const agg_job *j, uint32_t c) {
  return j->chained && j->up_cap < c ? j->up_cap : c;
}

/* The aggregators the job at |jslot| may hold: its partition (STATIC),
 * or those it holds and its share of the free ones (SHARED), lowered to
 * the cap its parent's last final carried in a chain (each switch on the
 * way down lowers it to its own). */
static uint32_t job_cap(const dlcp_agg *a, uint32_t jslot) {
  const agg_job *j = &a->job[jslot];
  uint32_t free_ = a->naggs - a->st.aggs_used;

  return below_parent_cap(
      j, a->cfg.policy == DLCP_AGG_STATIC
             ? job_pool(a)
             : j->held + free_ / (a->st.jobs_sharing ? a->st.jobs_sharing
                                                     : 1u));
}

/* The aggregators that are each job's own: its partition (STATIC), or
 * its fair share of the pool, the pool over the jobs sharing it (SHARED,
 * as PANAMA's cwnd_cap divides the packet memory by the jobs).  Not
 * job_cap's share of the free aggregators: when a BUSY is due none are
 * free, and a job that came first would be told to keep all it holds.
 * Sharing, not registered: a job that ended keeps its registration for
 * the lease (seconds), and counted that long it held every other job to
 * a share of a pool it no longer used. */
static uint32_t job_share(const dlcp_agg *a) {
  return a->cfg.policy == DLCP_AGG_STATIC
             ? job_pool(a)
             : a->naggs / (a->st.jobs_sharing ? a->st.jobs_sharing : 1u);
}

static uint32_t group_find(const dlcp_agg *a, uint32_t job, uint32_t group) {
  for (uint32_t s = a->bucket[hash_of(a, job, group)]; s != NONE;
       s = a->slot[s].hnext) {
    if (a->slot[s].job == job && a->slot[s].group == group) {
      return s;
    }
  }
  return NONE;
}

/* The first of |n| consecutive free aggregators the job at |jslot| may
 * claim (its partition, or the pool from the cursor on, then from its
 * start), or NONE. */
static uint32_t find_room(const dlcp_agg *a, uint32_t jslot, uint32_t n) {
  uint32_t s;

  if (a->cfg.policy == DLCP_AGG_STATIC) {
    uint32_t part = a->naggs / a->cfg.static_parts;

    return scan_run(a, jslot * part, (jslot + 1u) * part, n);
  }
  s = scan_run(a, a->cursor, a->naggs, n);
  if (s == NONE) {
    uint32_t end = a->cursor + n - 1u;

    s = scan_run(a, 0, end < a->naggs ? end : a->naggs, n);
  }
  return s;
}

/* Claims |h->nblocks| consecutive aggregators for the group, or returns
 * NONE. */
static uint32_t group_claim(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                            dlcp_tstamp now) {
  uint32_t n = h->nblocks;
  uint32_t s = find_room(a, jslot, n);
  agg_slot *g;
  uint32_t *b;

  if (s == NONE) {
    return NONE;
  }
  a->cursor = s + n < a->naggs ? s + n : 0;
  mark(a, s, n, false);
  g = &a->slot[s];
  g->seen = g->acked = 0;
  g->touched = g->grown = now;
  g->job = jslot;
  g->group = h->group;
  g->resends = 0;
  g->state = G_COLLECTING;
  g->nblocks = h->nblocks;
  g->world = h->world;
  g->ecn = 0;
  b = &a->bucket[hash_of(a, jslot, h->group)];
  g->hnext = *b;
  *b = s;
  list_append(a, L_COLLECTING, s);
  a->job[jslot].held += n;
  a->st.aggs_used += n;
  a->st.claims++;
  return s;
}

static void group_free(dlcp_agg *a, uint32_t s) {
  agg_slot *g = &a->slot[s];
  uint32_t *p = &a->bucket[hash_of(a, g->job, g->group)];

  while (*p != s) {
    p = &a->slot[*p].hnext;
  }
  *p = g->hnext;
  list_unlink(a, g->state == G_COLLECTING ? L_COLLECTING : L_COMPLETE, s);
  mark(a, s, g->nblocks, true);
  a->job[g->job].held -= g->nblocks;
  a->st.aggs_used -= g->nblocks;
  g->state = G_FREE;
  g->gen++;
}

/* Frees the incomplete group at |s|, its verdict undecided again, so that
 * the next contribution to it claims aggregators anew.  Nothing is lost:
 * no worker has its result, so each sends its contribution again (one
 * still out at its RTO, one a BUSY sent back when its window reaches
 * it); a contribution that found the verdict INA and no aggregators
 * would have been told GONE, which fails the operation. */
static void group_evict(dlcp_agg *a, uint32_t s) {
  agg_slot *g = &a->slot[s];
  agg_job *j = &a->job[g->job];

  if (g->group - j->base < a->cfg.window_groups) {
    verdict_set(a, j, g->group, V_UNDECIDED);
  }
  group_free(a, s);
}

/* Adds the contribution |payload| of |rank| into the group at |s|. */
static void group_add(dlcp_agg *a, uint32_t s, uint8_t rank,
                      const uint8_t *payload, uint8_t ecn, dlcp_tstamp now) {
  agg_slot *g = &a->slot[s];
  size_t n = (size_t)g->nblocks * a->cfg.block_elems;
  uint32_t *sum = a->sum + (size_t)s * a->cfg.block_elems;

  if (g->seen == 0) {
    le_copy_in(sum, payload, n);
  } else {
    le_add_in(sum, payload, n);
  }
  g->seen |= UINT64_C(1) << rank;
  g->ecn |= ecn;
  g->touched = g->grown = now;
  a->st.contrib++;
  a->st.contrib_bytes += 4u * n;
  list_unlink(a, L_COLLECTING, s);
  if (g->seen != all_workers(g->world)) {
    list_append(a, L_COLLECTING, s);
    return;
  }
  list_append(a, L_COMPLETE, s);
  if (up_place(a, &a->job[g->job], g->group) != 0) {
    g->state = G_UP;
    queue_up(a, s, false);
    return;
  }
  g->state = G_COMPLETE;
  for (uint32_t r = 0; r < g->world; r++) {
    queue_result(a, s, (uint8_t)r, false);
  }
}

/* |rank| has the result of the complete group at |s|; the group is freed
 * once every worker has it. */
static void group_acked(dlcp_agg *a, uint32_t s, uint8_t rank) {
  agg_slot *g = &a->slot[s];

  g->acked |= UINT64_C(1) << rank;
  if (g->acked == all_workers(g->world)) {
    if (g->resends == 0) {
      resend_sufficed(a);
    }
    group_free(a, s);
    a->st.freed++;
  }
}

/* Every group below a worker's low-water mark has its result there: a
 * mark that rose from |from| to |to| acknowledges the complete groups in
 * between.  So a lost ACK is made good by the worker's next datagram, and
 * one ACK serves the results that reached the worker together (ACKs were
 * a third of the datagrams a software switch handles per group).  Groups
 * are held only inside the verdict window, which starts at or below
 * |from|. */
static void acks_implied_by(dlcp_agg *a, uint32_t jslot, uint8_t rank,
                            uint32_t from, uint32_t to) {
  for (uint32_t d = 0; d < to - from && d < a->cfg.window_groups; d++) {
    uint32_t s = group_find(a, jslot, from + d);

    if (s != NONE && a->slot[s].state == G_COMPLETE &&
        (a->slot[s].acked & (UINT64_C(1) << rank)) == 0) {
      a->st.acks_implied++;
      group_acked(a, s, rank);
    }
  }
}

/* ---- packets in ------------------------------------------------------- */

/* An ACK from a rank whose mark was |mark| before it.  One of a group
 * below the mark, not of a result that came again (RETX), came after the
 * datagram that set the mark (reordered): only the others show a needless
 * re-send. */
static int on_ack(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                  uint32_t mark) {
  uint32_t s = group_find(a, jslot, h->group);
  bool reordered = (h->flags & DLCP_AGG_FLAG_RETX) == 0 &&
                   (int32_t)(h->group - mark) < 0;

  if (s == NONE || a->slot[s].state != G_COMPLETE) {
    a->st.stale_acks++;
    if (!reordered) {
      resend_needless(a);
    }
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if ((a->slot[s].acked & (UINT64_C(1) << h->rank)) && !reordered) {
    resend_needless(a);
  }
  a->st.acks++;
  group_acked(a, s, h->rank);
  return 0;
}

/* Whether plain INA's group |h| lies beyond the groups of its size the
 * job's share of the pool holds (job_share; at least one), counted from
 * the job's slowest worker's mark.  Such a group may not claim.
 * Otherwise faster workers, whose windows reach further, could fill the
 * pool with groups the slowest has not sent yet (its window sized to a
 * BUSY's share), while the group it needs is refused BUSY for ever.
 * With every claim inside that span, a partition that holds neither the
 * lowest group nor any below it has room for it; so does a shared pool
 * whose other jobs keep to their shares. */
static bool beyond_share(const dlcp_agg *a, const agg_job *j,
                         const dlcp_agg_hdr *h) {
  uint32_t span = job_share(a) / h->nblocks;

  return (h->flags & DLCP_AGG_FLAG_RING) == 0 &&
         h->group - j->base >= (span > 0 ? span : 1u);
}

/* The lowest group of job |j| that this instance holds (see
 * dlcp_agg_config.shards): the first at or above its base, the slowest
 * worker's mark, whose index's low byte is this shard's. */
static uint32_t lowest_held(const dlcp_agg *a, const agg_job *j) {
  uint32_t g = j->base;

  while (a->cfg.shards > 1 && (g & 255u) % a->cfg.shards != a->cfg.shard) {
    g++;
  }
  return g;
}

/* Whether the incomplete group at |s| may give its room to job |jslot|'s
 * lowest group: no contribution has been added to it for a re-send
 * interval (one that gains them is about to complete and free its room;
 * re-sent ones do not count: a worker whose window reaches the group
 * re-sends it while the others' windows, cut by BUSYs, may not reach it),
 * and it is the job's own or, with |others|, not another job's lowest
 * (which that job's workers all keep sending). */
static bool evictable(const dlcp_agg *a, uint32_t jslot, uint32_t s,
                      bool others, dlcp_tstamp now) {
  const agg_slot *g = &a->slot[s];

  return g->grown + a->cfg.resend_ns <= now &&
         (g->job == jslot ||
          (others && g->group != lowest_held(a, &a->job[g->job])));
}

/* Where |n| aggregators for job |jslot| would be free without the groups
 * evictable(|others|): marked free in the map for the search, and taken
 * again after.  NONE if nowhere. */
static uint32_t room_if_evicted(dlcp_agg *a, uint32_t jslot, uint32_t n,
                                bool others, dlcp_tstamp now) {
  uint32_t room;
  uint32_t s;

  for (s = a->thead[L_COLLECTING]; s != NONE; s = a->slot[s].tnext) {
    if (evictable(a, jslot, s, others, now)) {
      mark(a, s, a->slot[s].nblocks, true);
    }
  }
  room = find_room(a, jslot, n);
  for (s = a->thead[L_COLLECTING]; s != NONE; s = a->slot[s].tnext) {
    if (evictable(a, jslot, s, others, now)) {
      mark(a, s, a->slot[s].nblocks, false);
    }
  }
  return room;
}

/* Plain INA's group |h|, the job's lowest here (lowest_held), found no
 * room: claims it room by evicting the idle incomplete groups that lie in
 * the way (evictable), the job's own if they make room, else other jobs'
 * too, or returns NONE.  Otherwise one of them could hold the
 * lowest group out for good: a 32-block group claimed in the middle of a
 * 64-aggregator pool (beside an RA-INA group of 30 that then ended) left
 * 30 and 2 free, while every worker's window, cut to one group by the
 * BUSYs, held only the lowest group, so no one sent the contributions the
 * other one waited for; its lease ended it 10 s later, and the re-sent
 * contributions found it gone (agg_rt_test's test_overlap, about 1 run in
 * 200 under load).  Two jobs can hold each other's lowest groups out so.
 * With this, a lowest group waits only for complete groups, for groups
 * still gaining contributions and for other jobs' lowest groups. */
static uint32_t claim_evicting(dlcp_agg *a, uint32_t jslot,
                               const dlcp_agg_hdr *h, dlcp_tstamp now) {
  uint32_t n = h->nblocks;
  bool others = false;
  uint32_t room = room_if_evicted(a, jslot, n, false, now);
  uint32_t s, next;

  if (room == NONE) {
    others = true;
    room = room_if_evicted(a, jslot, n, true, now);
  }
  if (room == NONE) {
    return NONE;
  }
  for (s = a->thead[L_COLLECTING]; s != NONE; s = next) {
    next = a->slot[s].tnext;
    if (evictable(a, jslot, s, others, now) && s < room + n &&
        room < s + a->slot[s].nblocks) {
      group_evict(a, s);
      a->st.evicted++;
    }
  }
  return group_claim(a, jslot, h, now);
}

/* The group |h| addresses, claiming its aggregators if it is new and
 * has no verdict yet; or NONE with the NACK that answers |h| queued (gone,
 * ahead of the window, a ring verdict, busy, too big). */
static uint32_t group_lookup(dlcp_agg *a, uint32_t jslot,
                             const dlcp_agg_hdr *h, uint64_t addr,
                             dlcp_tstamp now) {
  agg_job *j = &a->job[jslot];
  uint32_t s;
  int v;

  if ((int32_t)(h->group - j->base) < 0) {
    a->st.nacked++;
    queue_nack(a, h, addr, DLCP_AGG_NACK_GONE);
    return NONE;
  }
  if (h->group - j->base >= a->cfg.window_groups) {
    a->st.nacked++;
    queue_nack(a, h, addr, DLCP_AGG_NACK_AHEAD);
    return NONE;
  }
  s = group_find(a, jslot, h->group);
  if (s != NONE) {
    return s;
  }
  v = verdict_get(a, j, h->group);
  if (v != V_UNDECIDED) {
    a->st.nacked++;
    queue_nack(a, h, addr,
               v == V_RING ? DLCP_AGG_NACK_RING : DLCP_AGG_NACK_GONE);
    return NONE;
  }
  s = h->nblocks <= job_pool(a) && !beyond_share(a, j, h)
          ? group_claim(a, jslot, h, now)
          : NONE;
  if (s == NONE && h->group == lowest_held(a, j) &&
      h->nblocks <= job_pool(a) &&
      (h->flags & DLCP_AGG_FLAG_RING) == 0) {
    s = claim_evicting(a, jslot, h, now);
  }
  if (s == NONE) {
    a->st.claim_failures++;
    a->st.nacked++;
    if ((h->flags & DLCP_AGG_FLAG_RING) != 0) {
      verdict_set(a, j, h->group, V_RING);
      a->st.ring_verdicts++;
      queue_nack(a, h, addr, DLCP_AGG_NACK_RING);
    } else if (h->nblocks > job_pool(a)) {
      /* No aggregator will ever free up enough room: waiting (BUSY)
       * would only end in the host's timeout. */
      a->st.too_big++;
      queue_nack_low(a, h, addr, DLCP_AGG_NACK_TOO_BIG, job_pool(a));
    } else {
      /* With the job's share, so that its hosts stop asking for more
       * groups than it can hold: a window three times a static partition
       * drew about 50 BUSY answers per group on the testbed. */
      queue_nack_low(a, h, addr, DLCP_AGG_NACK_BUSY,
                     below_parent_cap(j, job_share(a)));
    }
    return NONE;
  }
  verdict_set(a, j, h->group, V_INA);
  return s;
}

/* group_lookup for a packet that must agree with the group's size:
 * 0 with |*ps| the group or NONE (answered), or DLCP_ERR_INVALID_ARGUMENT
 * (counted malformed) if |h| gives the group another number of blocks. */
static int group_for(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                     uint64_t addr, dlcp_tstamp now, uint32_t *ps) {
  *ps = group_lookup(a, jslot, h, addr, now);
  if (*ps != NONE && a->slot[*ps].nblocks != h->nblocks) {
    a->st.malformed++;
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

static int on_contrib(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                      const uint8_t *payload, uint8_t ecn, uint64_t addr,
                      dlcp_tstamp now) {
  uint64_t bit = UINT64_C(1) << h->rank;
  uint32_t s;
  int rv = group_for(a, jslot, h, addr, now, &s);
  agg_slot *g;

  if (rv != 0 || s == NONE) {
    return rv;
  }
  g = &a->slot[s];
  if ((g->seen & bit) == 0) {
    group_add(a, s, h->rank, payload, ecn, now);
    return 0;
  }
  a->st.duplicates++;
  if (g->state == G_COMPLETE && (g->acked & bit) == 0) {
    queue_result(a, s, h->rank, true); /* its result was lost */
    return 0;
  }
  if (g->state == G_COLLECTING || g->state == G_UP) {
    /* The sender re-sent it because no result came: say whom the group
     * still waits for (no one here once its sum went up the chain: the
     * final is on its way, or the timer re-asks the parent), so that the
     * sender knows it holds the contribution and does not back off as if
     * the switch were gone.  A collecting group its workers still ask
     * about is not idle: the lease runs from the last of them, so the
     * hosts' timeout, which can name the missing ranks, ends it first. */
    agg_out o = {DLCP_AGG_NACK, h->rank, h->world, h->nblocks,
                 DLCP_AGG_NACK_WAITING, h->job, h->group, NONE, 0, 0,
                 h->token, addr, g->seen};
    if (g->state == G_COLLECTING) {
      g->touched = now;
      list_unlink(a, L_COLLECTING, s);
      list_append(a, L_COLLECTING, s);
    }
    queue_out(a, &o);
    return 0;
  }
  return DLCP_ERR_DUPLICATE;
}

/* A header-only CLAIM: the group's verdict before its payload.  A group
 * with aggregators is granted (the contribution follows); one its sender
 * already completed and lost the result of gets the result again. */
static int on_claim(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                    uint64_t addr, dlcp_tstamp now) {
  uint32_t s;
  int rv = group_for(a, jslot, h, addr, now, &s);
  agg_slot *g;

  if (rv != 0 || s == NONE) {
    return rv;
  }
  g = &a->slot[s];
  a->st.claims_granted++;
  if (g->state == G_COMPLETE) {
    if ((g->acked & (UINT64_C(1) << h->rank)) == 0) {
      queue_result(a, s, h->rank, true);
    }
    return 0;
  }
  agg_out o = {DLCP_AGG_GRANT, h->rank, h->world, h->nblocks, 0, h->job,
               h->group, NONE, 0, 0, h->token, addr, 0};
  queue_out(a, &o);
  return 0;
}

/* A RESULT from the parent: the final sum of a group sent up.  It becomes
 * the group's result here; every copy is acknowledged up, since the
 * parent re-sends until it hears an ACK. */
static int on_final(dlcp_agg *a, uint32_t jslot, const dlcp_agg_hdr *h,
                    const uint8_t *payload, dlcp_tstamp now) {
  agg_job *j = &a->job[jslot];
  uint32_t s = group_find(a, jslot, h->group);
  uint16_t place = up_place(a, j, h->group);
  agg_out ack = {DLCP_AGG_ACK, h->rank, h->world, h->nblocks, 0, j->id,
                 h->group, NONE, 0, j->base, j->token,
                 a->cfg.parent_addr[tree_of(a, h->group)], 0};

  if (place == 0 || h->rank != DLCP_AGG_CHAIN_RANK(place) ||
      h->world != DLCP_AGG_CHAIN_WORLD(place) ||
      (s != NONE && a->slot[s].nblocks != h->nblocks)) {
    a->st.malformed++;
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  a->st.finals++;
  if (s != NONE && a->slot[s].state == G_UP) {
    agg_slot *g = &a->slot[s];

    le_copy_in(a->sum + (size_t)s * a->cfg.block_elems, payload,
               (size_t)g->nblocks * a->cfg.block_elems);
    g->ecn |= h->flags & DLCP_AGG_FLAG_ECN_MASK;
    j->up_cap = h->aux;
    j->chained = true;
    g->state = G_COMPLETE;
    g->resends = 0;
    g->touched = now;
    list_unlink(a, L_COMPLETE, s);
    list_append(a, L_COMPLETE, s);
    for (uint32_t r = 0; r < g->world; r++) {
      queue_result(a, s, (uint8_t)r, false);
    }
  }
  queue_out(a, &ack);
  return 0;
}

/* A CONTRIB's chain place, checked against the switch (a parent in the
 * group's tree, the place it was given) and the job (one place). */
static bool place_ok(dlcp_agg *a, agg_job *j, const dlcp_agg_hdr *h) {
  uint16_t place = h->aux;
  uint32_t t = tree_of(a, h->group);

  if (place == 0) {
    return true; /* a child switch's, or a job not chained here */
  }
  if (!a->cfg.has_parent[t] ||
      (a->cfg.parent_place[t] != 0 && a->cfg.parent_place[t] != place) ||
      (j->place != 0 && j->place != place)) {
    return false;
  }
  j->place = place;
  return true;
}

int dlcp_agg_on_packet(dlcp_agg *a, const uint8_t *buf, size_t len,
                       uint8_t ecn, uint64_t addr, dlcp_tstamp now) {
  dlcp_agg_hdr h;
  const uint8_t *payload;
  uint32_t jslot;
  agg_job *j;
  int rv;

  a->st.packets++;
  rv = dlcp_agg_decode(&h, &payload, buf, len);
  bool from_parent = rv == 0 && a->cfg.has_parent[tree_of(a, h.group)] &&
                     addr == a->cfg.parent_addr[tree_of(a, h.group)];
  bool final = rv == 0 && h.type == DLCP_AGG_RESULT && from_parent;
  if (rv == 0 && h.type == DLCP_AGG_NACK && from_parent) {
    a->st.parent_nacks++;
    return 0;
  }
  if (rv == 0 && h.type != DLCP_AGG_CONTRIB && h.type != DLCP_AGG_ACK &&
      h.type != DLCP_AGG_CLAIM && !final) {
    rv = DLCP_ERR_BAD_TYPE;
  }
  if (rv != 0) {
    a->st.malformed++;
    return rv;
  }
  jslot = job_find(a, h.job);
  if (jslot != NONE && a->job[jslot].token != h.token) {
    a->st.foreign++;
    return DLCP_ERR_FOREIGN_JOB;
  }
  if (final) {
    if (jslot == NONE) {
      a->st.stale_acks++; /* the job expired here: nothing to answer */
      return DLCP_ERR_UNKNOWN_TRANSFER;
    }
    return on_final(a, jslot, &h, payload, now);
  }
  if (h.elems != a->cfg.block_elems ||
      (jslot != NONE && a->job[jslot].world != h.world)) {
    a->st.nacked++;
    queue_nack(a, &h, addr, DLCP_AGG_NACK_CONFIG);
    return 0;
  }
  if (jslot == NONE) {
    if (h.type == DLCP_AGG_ACK) {
      a->st.stale_acks++;
      return DLCP_ERR_UNKNOWN_TRANSFER;
    }
    jslot = job_start(a, &h, now);
    if (jslot == NONE) {
      a->st.nacked++;
      queue_nack(a, &h, addr, DLCP_AGG_NACK_NO_JOB);
      return 0;
    }
  }
  j = &a->job[jslot];
  if (h.type == DLCP_AGG_CONTRIB && !place_ok(a, j, &h)) {
    a->st.nacked++;
    queue_nack(a, &h, addr, DLCP_AGG_NACK_CONFIG);
    return 0;
  }
  j->touched = now;
  if (!j->sharing) {
    j->sharing = true;
    a->st.jobs_sharing++;
  }
  j->addr[h.rank] = addr;
  uint32_t prev_low = j->low[h.rank];
  job_set_low(a, j, h.rank, h.low);
  if (h.type == DLCP_AGG_ACK) {
    /* Its own group first: an ACK's mark lies above the group it
     * acknowledges, and that group freed by the mark would make the ACK
     * look stale, the sign of a needless re-send. */
    rv = on_ack(a, jslot, &h, prev_low);
    acks_implied_by(a, jslot, h.rank, prev_low, j->low[h.rank]);
    return rv;
  }
  acks_implied_by(a, jslot, h.rank, prev_low, j->low[h.rank]);
  if (h.type == DLCP_AGG_CLAIM) {
    return on_claim(a, jslot, &h, addr, now);
  }
  return on_contrib(a, jslot, &h, payload, (uint8_t)(ecn & 3u), addr, now);
}

/* ---- timers ----------------------------------------------------------- */

void dlcp_agg_on_timer(dlcp_agg *a, dlcp_tstamp now) {
  uint32_t s;

  while ((s = a->thead[L_COLLECTING]) != NONE &&
         a->slot[s].touched + a->cfg.lease_ns <= now) {
    group_evict(a, s);
    a->st.reclaimed++;
  }
  while ((s = a->thead[L_COMPLETE]) != NONE &&
         a->slot[s].touched + a->resend_ns <= now) {
    agg_slot *g = &a->slot[s];

    if (g->resends >= a->cfg.max_resends) {
      group_free(a, s);
      a->st.abandoned++;
      continue;
    }
    g->resends++;
    g->touched = now;
    list_unlink(a, L_COMPLETE, s);
    list_append(a, L_COMPLETE, s);
    if (g->state == G_UP) {
      queue_up(a, s, true); /* the partial sum or the final was lost */
      continue;
    }
    for (uint32_t r = 0; r < g->world; r++) {
      if ((g->acked & (UINT64_C(1) << r)) == 0) {
        queue_result(a, s, (uint8_t)r, true);
      }
    }
  }
  for (uint32_t i = 0; i < a->cfg.max_jobs; i++) {
    agg_job *j = &a->job[i];

    if (!j->active || j->held != 0) {
      continue;
    }
    if (j->sharing && j->touched + a->cfg.idle_ns <= now) {
      j->sharing = false;
      a->st.jobs_sharing--;
    }
    if (j->touched + a->cfg.lease_ns <= now) {
      j->active = false;
      a->st.jobs_expired++;
      a->st.jobs_active--;
    }
  }
}

dlcp_tstamp dlcp_agg_next_deadline(const dlcp_agg *a) {
  dlcp_tstamp t = DLCP_TSTAMP_NEVER;

  if (a->thead[L_COLLECTING] != NONE) {
    t = a->slot[a->thead[L_COLLECTING]].touched + a->cfg.lease_ns;
  }
  if (a->thead[L_COMPLETE] != NONE) {
    dlcp_tstamp c = a->slot[a->thead[L_COMPLETE]].touched + a->resend_ns;

    t = c < t ? c : t;
  }
  if (a->st.jobs_active > 0) {
    for (uint32_t i = 0; i < a->cfg.max_jobs; i++) {
      const agg_job *j = &a->job[i];

      dlcp_tstamp due = j->touched + (j->sharing ? a->cfg.idle_ns
                                                  : a->cfg.lease_ns);

      if (j->active && j->held == 0 && due < t) {
        t = due;
      }
    }
  }
  return t;
}

/* ---- actions out ------------------------------------------------------ */

/* PANAMA's cwnd_cap for the job at slot |jslot|: job_cap, saturating. */
static uint16_t cap_for(const dlcp_agg *a, uint32_t jslot) {
  uint32_t c = job_cap(a, jslot);

  return (uint16_t)(c > UINT16_MAX ? UINT16_MAX : c);
}

int dlcp_agg_poll(dlcp_agg *a, dlcp_agg_send *out, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now) {
  (void)now;
  while (a->ocount > 0) {
    const agg_out *o = &a->out[a->ohead];
    dlcp_agg_hdr h = {o->type, o->job_id, o->token, o->group, o->low, o->rank,
                      o->world, o->nblocks, 0,
                      (uint16_t)a->cfg.block_elems, o->reason};
    const agg_slot *g = NULL;
    size_t len;

    if (o->type == DLCP_AGG_RESULT || o->type == DLCP_AGG_CONTRIB) {
      g = &a->slot[o->slot];
      if (g->gen != o->gen ||
          g->state != (o->type == DLCP_AGG_RESULT ? G_COMPLETE : G_UP) ||
          (o->type == DLCP_AGG_RESULT &&
           (g->acked & (UINT64_C(1) << o->rank)) != 0)) {
        a->ohead = (a->ohead + 1u) % a->cfg.out_queue; /* no longer due */
        a->ocount--;
        continue;
      }
      if (o->type == DLCP_AGG_RESULT) {
        h.flags = g->ecn;
        h.aux = cap_for(a, g->job);
      } else {
        h.flags = o->reason ? DLCP_AGG_FLAG_RETX : 0;
        h.aux = 0; /* the parent knows its own place */
      }
    }
    len = DLCP_AGG_HDR_LEN + dlcp_agg_payload_len(&h);
    if (buflen < len) {
      return DLCP_ERR_BUFFER_TOO_SMALL;
    }
    if (dlcp_agg_hdr_encode(buf, buflen, &h) < 0) {
      return DLCP_ERR_INTERNAL;
    }
    if (g != NULL) {
      const uint32_t *sum = a->sum + (size_t)o->slot * a->cfg.block_elems;
      size_t n = (size_t)g->nblocks * a->cfg.block_elems;
      le_copy_out(buf + DLCP_AGG_HDR_LEN, sum, n);
      if (o->type == DLCP_AGG_RESULT) {
        a->st.results_sent++;
        a->st.resent += o->reason;
      } else {
        a->st.forwards++;
        a->st.forward_resends += o->reason;
      }
    } else if (o->type == DLCP_AGG_GRANT) {
      a->st.grants_sent++;
    } else if (o->type == DLCP_AGG_ACK) {
      a->st.acks_up++;
    } else {
      if (o->reason == DLCP_AGG_NACK_WAITING) {
        dlcp_put_u64(buf + DLCP_AGG_HDR_LEN, o->seen);
      }
      a->st.nacks_sent++;
    }
    out->addr = o->addr;
    out->len = len;
    /* A partial sum carries its contributions' congestion up in its IP
     * header, where the parent's OR reads it. */
    out->ecn = g == NULL ? 0
               : o->type == DLCP_AGG_CONTRIB && g->ecn == DLCP_AGG_ECN_CE
                   ? DLCP_AGG_ECN_CE
                   : DLCP_AGG_ECN_ECT0;
    a->ohead = (a->ohead + 1u) % a->cfg.out_queue;
    a->ocount--;
    return 1;
  }
  return 0;
}

uint16_t dlcp_agg_cap(const dlcp_agg *a, uint32_t job) {
  for (uint32_t i = 0; i < a->cfg.max_jobs; i++) {
    if (a->job[i].active && a->job[i].id == job) {
      return cap_for(a, i);
    }
  }
  return UINT16_MAX;
}

void dlcp_agg_get_stats(const dlcp_agg *a, dlcp_agg_stats *st) {
  *st = a->st;
}

/* ---- config and life cycle -------------------------------------------- */

void dlcp_agg_config_default(dlcp_agg_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->mem_bytes = 1u << 20;
  cfg->block_elems = DLCP_AGG_DEFAULT_BLOCK_ELEMS;
  cfg->max_jobs = 64;
  cfg->window_groups = 4096;
  cfg->policy = DLCP_AGG_SHARED;
  cfg->static_parts = 1;
  cfg->resend_ns = 5000000;
  cfg->max_resends = 1000;
  cfg->lease_ns = UINT64_C(10000000000);
  cfg->idle_ns = 1000000;
  cfg->out_queue = 4096;
  cfg->ntrees = 1;
}

static int config_check(const dlcp_agg_config *c) {
  uint64_t naggs;

  if (c->block_elems == 0 || c->block_elems > DLCP_AGG_MAX_BLOCK_ELEMS ||
      c->max_jobs == 0 || c->max_jobs > 65536 || c->window_groups < 64 ||
      (c->window_groups & (c->window_groups - 1u)) != 0 ||
      c->window_groups > (1u << 24) || c->out_queue == 0 ||
      c->out_queue > (1u << 24) || c->resend_ns == 0 || c->lease_ns == 0 ||
      c->idle_ns == 0 || c->idle_ns > c->lease_ns ||
      (c->policy != DLCP_AGG_SHARED && c->policy != DLCP_AGG_STATIC) ||
      (c->policy == DLCP_AGG_STATIC &&
       (c->static_parts == 0 || c->static_parts > c->max_jobs)) ||
      c->ntrees == 0 || c->ntrees > DLCP_AGG_MAX_TREES || c->shards > 256 ||
      (c->shards > 1 && c->shard >= c->shards)) {
    return DLCP_ERR_CONFIG;
  }
  for (uint32_t t = 0; t < DLCP_AGG_MAX_TREES; t++) {
    uint16_t p = c->parent_place[t];
    if (p != 0 &&
        (!c->has_parent[t] || t >= c->ntrees ||
         DLCP_AGG_CHAIN_WORLD(p) == 0 ||
         DLCP_AGG_CHAIN_WORLD(p) > DLCP_AGG_MAX_WORLD ||
         DLCP_AGG_CHAIN_RANK(p) >= DLCP_AGG_CHAIN_WORLD(p))) {
      return DLCP_ERR_CONFIG;
    }
  }
  naggs = c->mem_bytes / (4u * (uint64_t)c->block_elems);
  if (naggs == 0 || naggs >= (1u << 30) ||
      (c->policy == DLCP_AGG_STATIC && naggs < c->static_parts)) {
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

void dlcp_agg_del(dlcp_agg *a) {
  if (a == NULL) {
    return;
  }
  a->mem->free(a->sum, a->mem->user);
  a->mem->free(a->slot, a->mem->user);
  a->mem->free(a->freemap, a->mem->user);
  a->mem->free(a->bucket, a->mem->user);
  a->mem->free(a->job, a->mem->user);
  a->mem->free(a->verdicts, a->mem->user);
  a->mem->free(a->out, a->mem->user);
  a->mem->free(a, a->mem->user);
}

int dlcp_agg_new(dlcp_agg **pa, const dlcp_agg_config *cfg,
                 const dlcp_mem *mem, dlcp_tstamp now) {
  dlcp_agg *a;
  uint32_t nb = 1;
  size_t vbytes;
  int rv = config_check(cfg);

  (void)now;
  if (rv != 0) {
    return rv;
  }
  mem = mem != NULL ? mem : dlcp_mem_default();
  a = mem->calloc(1, sizeof(*a), mem->user);
  if (a == NULL) {
    return DLCP_ERR_NOMEM;
  }
  a->mem = mem;
  a->cfg = *cfg;
  a->resend_ns = cfg->resend_ns;
  a->naggs = (uint32_t)(cfg->mem_bytes / (4u * (uint64_t)cfg->block_elems));
  while (nb < a->naggs) {
    nb <<= 1;
  }
  a->bmask = nb - 1u;
  vbytes = (size_t)cfg->window_groups / 4u;
  a->sum = mem->malloc((size_t)a->naggs * cfg->block_elems * 4u, mem->user);
  a->slot = mem->calloc(a->naggs, sizeof(*a->slot), mem->user);
  a->freemap = mem->calloc((a->naggs + 63u) / 64u, 8u, mem->user);
  a->bucket = mem->malloc((size_t)nb * 4u, mem->user);
  a->job = mem->calloc(cfg->max_jobs, sizeof(*a->job), mem->user);
  a->verdicts = mem->calloc(cfg->max_jobs, vbytes, mem->user);
  a->out = mem->malloc((size_t)cfg->out_queue * sizeof(*a->out), mem->user);
  if (a->sum == NULL || a->slot == NULL || a->freemap == NULL ||
      a->bucket == NULL || a->job == NULL || a->verdicts == NULL ||
      a->out == NULL) {
    dlcp_agg_del(a);
    return DLCP_ERR_NOMEM;
  }
  memset(a->bucket, 0xFF, (size_t)nb * 4u);
  mark(a, 0, a->naggs, true);
  for (uint32_t i = 0; i < a->naggs; i++) {
    a->slot[i].tprev = a->slot[i].tnext = a->slot[i].hnext = NONE;
  }
  for (uint32_t i = 0; i < cfg->max_jobs; i++) {
    a->job[i].verdict = a->verdicts + (size_t)i * vbytes;
  }
  a->thead[0] = a->thead[1] = a->ttail[0] = a->ttail[1] = NONE;
  a->st.aggs_total = a->naggs;
  *pa = a;
  return 0;
}
