/*
 * flight.c: the flight recorder (flight.h): a fixed ring of operation
 * records, the dump that writes it as text, and the report that reads
 * every rank's dump back and follows who waits on whom.
 */
#include "rt/flight.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/errbuf.h"

typedef struct fl_peer {
  uint32_t peer;
  uint64_t send_done, send_total;
  uint64_t recv_done, recv_total;
} fl_peer;

typedef struct fl_op {
  bool used;
  bool ended;
  uint64_t seq;
  const char *kind;
  const char *algo;
  uint64_t bytes;
  dlcp_tstamp start, end;
  int status;
  char why[192];
  uint32_t posted, completed;
  fl_peer peers[DLCP_FLIGHT_PEERS];
  uint32_t npeers;
  uint32_t untracked; /* transfers with peers beyond DLCP_FLIGHT_PEERS */
  uint32_t waiting_on;
  dlcp_tstamp waiting_since;
} fl_op;

struct dlcp_flight {
  uint32_t rank, world;
  char addr[64];
  fl_op ops[DLCP_FLIGHT_OPS];
};

dlcp_flight *dlcp_flight_new(uint32_t rank, uint32_t world, const char *addr) {
  dlcp_flight *fr = calloc(1, sizeof(*fr));
  if (fr == NULL) {
    return NULL;
  }
  fr->rank = rank;
  fr->world = world;
  dlcp_copy_str(fr->addr, sizeof(fr->addr), addr != NULL ? addr : "?");
  return fr;
}

void dlcp_flight_free(dlcp_flight *fr) { free(fr); }

static fl_op *find(dlcp_flight *fr, uint64_t seq) {
  fl_op *o = &fr->ops[seq % DLCP_FLIGHT_OPS];
  return o->used && o->seq == seq ? o : NULL;
}

void dlcp_flight_begin(dlcp_flight *fr, uint64_t seq, const char *kind,
                       const char *algo, uint64_t bytes, dlcp_tstamp now) {
  fl_op *o = &fr->ops[seq % DLCP_FLIGHT_OPS];
  memset(o, 0, sizeof(*o));
  o->used = true;
  o->seq = seq;
  o->kind = kind;
  o->algo = algo;
  o->bytes = bytes;
  o->start = now;
  o->waiting_on = DLCP_FLIGHT_NONE;
}

void dlcp_flight_transfer(dlcp_flight *fr, uint64_t seq, uint32_t peer,
                          bool is_send, bool posted, uint64_t done,
                          uint64_t total) {
  fl_op *o = find(fr, seq);
  fl_peer *p = NULL;
  if (o == NULL) {
    return;
  }
  if (posted) {
    o->posted++;
  } else {
    o->completed++;
  }
  for (uint32_t i = 0; i < o->npeers; i++) {
    if (o->peers[i].peer == peer) {
      p = &o->peers[i];
    }
  }
  if (p == NULL) {
    if (o->npeers == DLCP_FLIGHT_PEERS) {
      o->untracked++;
      return;
    }
    p = &o->peers[o->npeers++];
    p->peer = peer;
  }
  if (posted) {
    *(is_send ? &p->send_total : &p->recv_total) += total;
  } else {
    *(is_send ? &p->send_done : &p->recv_done) += done;
  }
}

void dlcp_flight_waiting(dlcp_flight *fr, uint64_t seq, uint32_t peer,
                         dlcp_tstamp since) {
  fl_op *o = find(fr, seq);
  if (o != NULL) {
    o->waiting_on = peer;
    o->waiting_since = since;
  }
}

void dlcp_flight_end(dlcp_flight *fr, uint64_t seq, int status,
                     const char *why, dlcp_tstamp now) {
  fl_op *o = find(fr, seq);
  if (o == NULL) {
    return;
  }
  o->ended = true;
  o->end = now;
  o->status = status;
  o->waiting_on = DLCP_FLIGHT_NONE;
  dlcp_copy_str(o->why, sizeof(o->why), why != NULL ? why : "");
}

bool dlcp_flight_lookup(const dlcp_flight *fr, uint64_t seq,
                        const char **kind, const char **algo) {
  const fl_op *o = &fr->ops[seq % DLCP_FLIGHT_OPS];
  if (!o->used || o->seq != seq) {
    return false;
  }
  *kind = o->kind;
  *algo = o->algo;
  return true;
}

/* latest returns the record begun last, or NULL. */
static const fl_op *latest(const dlcp_flight *fr) {
  const fl_op *best = NULL;
  for (uint32_t i = 0; i < DLCP_FLIGHT_OPS; i++) {
    const fl_op *o = &fr->ops[i];
    if (o->used && (best == NULL || o->seq > best->seq)) {
      best = o;
    }
  }
  return best;
}

/* blocked returns the newest unfinished record that waits on somebody,
 * or NULL.  Not simply the newest record: an operation may start others
 * and wait on them, and those may have ended (an INA all-reduce's
 * agreements) while it waits. */
static const fl_op *blocked(const dlcp_flight *fr) {
  const fl_op *best = NULL;
  for (uint32_t i = 0; i < DLCP_FLIGHT_OPS; i++) {
    const fl_op *o = &fr->ops[i];
    if (o->used && !o->ended && o->waiting_on != DLCP_FLIGHT_NONE &&
        (best == NULL || o->seq > best->seq)) {
      best = o;
    }
  }
  return best;
}

uint32_t dlcp_flight_blocked_on(const dlcp_flight *fr, dlcp_tstamp *since) {
  const fl_op *o = blocked(fr);
  if (o == NULL) {
    return DLCP_FLIGHT_NONE;
  }
  *since = o->waiting_since;
  return o->waiting_on;
}

static uint64_t ms_between(dlcp_tstamp a, dlcp_tstamp b) {
  return b > a ? (b - a) / 1000000u : 0;
}

static void dump_op(const fl_op *o, FILE *f, dlcp_tstamp now) {
  fprintf(f, "  op %" PRIu64 " %s %s %" PRIu64 " B: ", o->seq, o->kind,
          o->algo, o->bytes);
  if (!o->ended) {
    fprintf(f, "running for %" PRIu64 " ms", ms_between(o->start, now));
  } else if (o->status == 0) {
    fprintf(f, "ok in %" PRIu64 " ms", ms_between(o->start, o->end));
  } else {
    fprintf(f, "failed after %" PRIu64 " ms (%s)",
            ms_between(o->start, o->end), o->why);
  }
  fprintf(f, ", %u of %u transfers done", o->completed, o->posted);
  if (!o->ended && o->waiting_on == DLCP_FLIGHT_SWITCH) {
    fprintf(f, ", waiting on the aggregation switch for %" PRIu64 " ms",
            ms_between(o->waiting_since, now));
  } else if (!o->ended && o->waiting_on != DLCP_FLIGHT_NONE) {
    fprintf(f, ", waiting on rank %u for %" PRIu64 " ms", o->waiting_on,
            ms_between(o->waiting_since, now));
  }
  for (uint32_t i = 0; i < o->npeers; i++) {
    const fl_peer *p = &o->peers[i];
    fprintf(f, "%s rank %u:", i == 0 ? ";" : ",", p->peer);
    if (p->send_total > 0) {
      fprintf(f, " send %" PRIu64 "/%" PRIu64, p->send_done, p->send_total);
    }
    if (p->recv_total > 0) {
      fprintf(f, " recv %" PRIu64 "/%" PRIu64, p->recv_done, p->recv_total);
    }
  }
  if (o->untracked > 0) {
    fprintf(f, "; %u transfers with further peers", o->untracked);
  }
  fputc('\n', f);
}

void dlcp_flight_dump(const dlcp_flight *fr, FILE *f, const char *reason,
                      dlcp_tstamp now) {
  const fl_op *o = latest(fr);
  const fl_op *b = blocked(fr);
  fprintf(f, "dlcp flight recorder: rank %u of %u (%s): %s\n", fr->rank,
          fr->world, fr->addr, reason);
  if (b != NULL && b->waiting_on == DLCP_FLIGHT_SWITCH) {
    fprintf(f, "waiting: rank %u on switch since %" PRIu64 " ms, op %" PRIu64
            "\n", fr->rank, ms_between(b->waiting_since, now), b->seq);
  } else if (b != NULL) {
    fprintf(f, "waiting: rank %u on %u since %" PRIu64 " ms, op %" PRIu64
            "\n", fr->rank, b->waiting_on, ms_between(b->waiting_since, now),
            b->seq);
  }
  if (o == NULL) {
    fprintf(f, "  no collective operation yet\n");
    return;
  }
  /* Newest first (sequence numbers need not be contiguous: a rank's
   * record starts where the ring happens to be). */
  for (uint64_t below = UINT64_MAX;;) {
    const fl_op *next = NULL;
    for (uint32_t i = 0; i < DLCP_FLIGHT_OPS; i++) {
      const fl_op *r = &fr->ops[i];
      if (r->used && r->seq < below && (next == NULL || r->seq > next->seq)) {
        next = r;
      }
    }
    if (next == NULL) {
      break;
    }
    dump_op(next, f, now);
    below = next->seq;
  }
  fflush(f);
}

int dlcp_flight_write(const dlcp_flight *fr, const char *dir,
                      const char *reason, dlcp_tstamp now) {
  char path[4096];
  char tmp[4096 + 8];
  FILE *f;
  int rv = 0;
  char *text = NULL;
  size_t len = 0;
  /* One write, so the dumps of ranks sharing a terminal do not mix. */
  f = open_memstream(&text, &len);
  if (f != NULL) {
    dlcp_flight_dump(fr, f, reason, now);
    fclose(f);
    (void)!write(STDERR_FILENO, text, len);
    free(text);
  }
  if (dir == NULL || dir[0] == '\0') {
    return 0;
  }
  dlcp_flight_path(path, sizeof(path), dir, fr->rank);
  dlcp_fmt(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "w");
  if (f == NULL) {
    return -errno;
  }
  dlcp_flight_dump(fr, f, reason, now);
  if (ferror(f)) {
    rv = -EIO;
  }
  if (fclose(f) != 0 && rv == 0) {
    rv = -errno;
  }
  if (rv == 0 && rename(tmp, path) != 0) {
    rv = -errno;
  }
  if (rv != 0) {
    (void)remove(tmp);
  }
  return rv;
}

uint32_t dlcp_flight_follow(const uint32_t *waits_on, uint32_t world,
                            uint32_t from) {
  uint32_t cur = from;
  for (uint32_t steps = 0; steps <= world; steps++) {
    uint32_t next = waits_on[cur];
    if (next == DLCP_FLIGHT_SWITCH) {
      return next;
    }
    if (next == DLCP_FLIGHT_NONE || next >= world) {
      return cur;
    }
    cur = next;
  }
  return DLCP_FLIGHT_NONE; /* more steps than ranks: a cycle */
}

void dlcp_flight_path(char *buf, size_t len, const char *dir, uint32_t rank) {
  dlcp_fmt(buf, len, "%s/flight.rank%u.txt", dir, rank);
}

/* read_wait finds the "waiting:" line of rank |r|'s dump; returns whether
 * the dump exists. */
static bool read_wait(const char *dir, uint32_t r, uint32_t world,
                      uint32_t *on, uint64_t *ms) {
  char path[4096];
  char line[512];
  FILE *f;
  dlcp_flight_path(path, sizeof(path), dir, r);
  f = fopen(path, "r");
  *on = DLCP_FLIGHT_NONE;
  if (f == NULL) {
    return false;
  }
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned rank, peer;
    unsigned long long since;
    if (sscanf(line, "waiting: rank %u on %u since %llu ms", &rank, &peer,
               &since) == 3 &&
        rank == r && peer < world && peer != r) {
      *on = peer;
      *ms = since;
    } else if (sscanf(line, "waiting: rank %u on switch since %llu ms",
                      &rank, &since) == 2 &&
               rank == r) {
      *on = DLCP_FLIGHT_SWITCH;
      *ms = since;
    }
  }
  fclose(f);
  return true;
}

uint32_t dlcp_flight_report(const char *dir, uint32_t world, FILE *out) {
  uint32_t *on = calloc(world, sizeof(*on));
  bool *present = calloc(world, sizeof(*present));
  uint32_t culprit = DLCP_FLIGHT_NONE;
  bool agree = true;
  uint32_t waiting = 0;
  if (on == NULL || present == NULL) {
    free(on);
    free(present);
    return DLCP_FLIGHT_NONE;
  }
  fprintf(out, "dlcp-run: flight recorder (%s):", dir);
  for (uint32_t r = 0; r < world; r++) {
    uint64_t ms = 0;
    present[r] = read_wait(dir, r, world, &on[r], &ms);
    if (!present[r]) {
      fprintf(out, "%s rank %u left no record", r ? ";" : "", r);
    } else if (on[r] == DLCP_FLIGHT_SWITCH) {
      fprintf(out, "%s rank %u waited on the aggregation switch for %" PRIu64
              " ms", r ? ";" : "", r, ms);
    } else if (on[r] != DLCP_FLIGHT_NONE) {
      fprintf(out, "%s rank %u waited on %u for %" PRIu64 " ms", r ? ";" : "",
              r, on[r], ms);
    } else {
      fprintf(out, "%s rank %u was not waiting", r ? ";" : "", r);
    }
  }
  fputc('\n', out);
  for (uint32_t r = 0; r < world; r++) {
    uint32_t end;
    if (on[r] == DLCP_FLIGHT_NONE) {
      continue;
    }
    waiting++;
    end = dlcp_flight_follow(on, world, r);
    if (end == DLCP_FLIGHT_NONE || (culprit != DLCP_FLIGHT_NONE &&
                                    end != culprit)) {
      agree = false;
    }
    culprit = end;
  }
  if (waiting == 0) {
    fprintf(out, "dlcp-run: flight recorder: no rank was waiting on "
            "another\n");
    culprit = DLCP_FLIGHT_NONE;
  } else if (agree && culprit == DLCP_FLIGHT_SWITCH) {
    fprintf(out, "dlcp-run: flight recorder: every waiting rank waits, "
            "directly or through others, on the aggregation switch (it "
            "stopped answering, or its path is cut)\n");
  } else if (!agree || culprit == DLCP_FLIGHT_NONE) {
    fprintf(out, "dlcp-run: flight recorder: the waits do not lead to one "
            "rank (a cycle, or several stalled ranks)\n");
    culprit = DLCP_FLIGHT_NONE;
  } else {
    fprintf(out, "dlcp-run: flight recorder: every waiting rank waits, "
            "directly or through others, on rank %u, which %s\n", culprit,
            present[culprit] ? "was not itself waiting on anybody"
                             : "left no record (stopped, frozen or killed "
                               "before it could write one)");
  }
  free(on);
  free(present);
  return culprit;
}
