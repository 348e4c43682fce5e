/*
 * stall.c: the inquiry that follows who waits on whom to the stalled rank
 * (stall.h).
 */
#include "rt/stall.h"

#include <stdio.h>
#include <string.h>

#include "rt/clock.h"
#include "rt/errbuf.h"

dlcp_duration dlcp_stall_budget_ns(uint32_t timeout_ms) {
  dlcp_duration quarter = (dlcp_duration)timeout_ms * DLCP_NS_PER_MS / 4u;
  dlcp_duration most = 500u * DLCP_NS_PER_MS;
  return quarter < most ? quarter : most;
}

dlcp_duration dlcp_stall_probe_ns(uint32_t timeout_ms) {
  return dlcp_stall_budget_ns(timeout_ms) / 5u * 4u;
}

dlcp_duration dlcp_stall_wait_ns(uint32_t timeout_ms) {
  return (dlcp_duration)timeout_ms * DLCP_NS_PER_MS -
         dlcp_stall_budget_ns(timeout_ms);
}

void dlcp_stall_init(dlcp_stall *st, uint32_t me, uint32_t world,
                     dlcp_duration probe_ns) {
  memset(st, 0, sizeof(*st));
  st->me = me;
  st->world = world;
  st->probe_ns = probe_ns;
  st->culprit = DLCP_STALL_NOBODY;
  st->deadline = DLCP_TSTAMP_NEVER;
  st->reprobe_at = DLCP_TSTAMP_NEVER;
}

/* ask records |rank| as asked and makes the probe's nonce. */
static uint32_t probe(dlcp_stall *st, uint32_t rank, dlcp_tstamp now,
                      uint32_t *nonce) {
  st->nonce++;
  st->deadline = now + st->probe_ns;
  st->reprobe_at = DLCP_TSTAMP_NEVER;
  *nonce = st->nonce;
  return rank;
}

static uint32_t ask(dlcp_stall *st, uint32_t rank, dlcp_tstamp now,
                    uint32_t *nonce) {
  st->chain[st->n++] = rank;
  st->asked_at = now;
  return probe(st, rank, now, nonce);
}

static void decide(dlcp_stall *st, dlcp_stall_verdict v, uint32_t culprit) {
  st->verdict = v;
  st->culprit = culprit;
  st->deadline = DLCP_TSTAMP_NEVER;
  st->reprobe_at = DLCP_TSTAMP_NEVER;
}

uint32_t dlcp_stall_begin(dlcp_stall *st, uint32_t peer, dlcp_tstamp now,
                          uint32_t *nonce) {
  if (st->active || peer >= st->world || peer == st->me) {
    return DLCP_STALL_NOBODY;
  }
  st->active = true;
  st->verdict = DLCP_STALL_PENDING;
  st->culprit = DLCP_STALL_NOBODY;
  st->n = 0;
  st->chain[st->n++] = st->me;
  return ask(st, peer, now, nonce);
}

static bool asked(const dlcp_stall *st, uint32_t rank) {
  for (uint32_t i = 0; i < st->n; i++) {
    if (st->chain[i] == rank) {
      return true;
    }
  }
  return false;
}

uint32_t dlcp_stall_on_answer(dlcp_stall *st, uint32_t from, uint32_t nonce,
                              uint32_t waits_on, dlcp_tstamp now,
                              uint32_t *next_nonce) {
  if (!st->active || st->verdict != DLCP_STALL_PENDING ||
      st->deadline == DLCP_TSTAMP_NEVER || nonce != st->nonce ||
      from != st->chain[st->n - 1]) {
    return DLCP_STALL_NOBODY; /* stale */
  }
  if (waits_on == DLCP_STALL_NOBODY || waits_on >= st->world) {
    if (now - st->asked_at < st->probe_ns) {
      /* Maybe between two operations: ask again a little later. */
      st->deadline = DLCP_TSTAMP_NEVER;
      st->reprobe_at = now + st->probe_ns / 8;
      return DLCP_STALL_NOBODY;
    }
    decide(st, DLCP_STALL_IDLE, from);
    return DLCP_STALL_NOBODY;
  }
  if (asked(st, waits_on) || st->n == DLCP_STALL_MAX_CHAIN) {
    /* A cycle (or a chain longer than we follow): nobody is stalled on
     * his own; the direct peer is the one this rank can name. */
    if (st->n < DLCP_STALL_MAX_CHAIN) {
      st->chain[st->n++] = waits_on;
    }
    decide(st, DLCP_STALL_CYCLE, st->chain[1]);
    return DLCP_STALL_NOBODY;
  }
  return ask(st, waits_on, now, next_nonce);
}

uint32_t dlcp_stall_on_time(dlcp_stall *st, dlcp_tstamp now,
                            uint32_t *nonce) {
  if (!st->active || st->verdict != DLCP_STALL_PENDING) {
    return DLCP_STALL_NOBODY;
  }
  if (now >= st->deadline) {
    decide(st, DLCP_STALL_SILENT, st->chain[st->n - 1]);
    return DLCP_STALL_NOBODY;
  }
  if (now >= st->reprobe_at) {
    return probe(st, st->chain[st->n - 1], now, nonce);
  }
  return DLCP_STALL_NOBODY;
}

dlcp_tstamp dlcp_stall_deadline(const dlcp_stall *st) {
  if (!st->active || st->verdict != DLCP_STALL_PENDING) {
    return DLCP_TSTAMP_NEVER;
  }
  return st->deadline < st->reprobe_at ? st->deadline : st->reprobe_at;
}

void dlcp_stall_describe(const dlcp_stall *st, char *buf, size_t len) {
  char chain[256];
  size_t used = 0;
  chain[0] = '\0';
  for (uint32_t i = 0; i < st->n && used + 8 < sizeof(chain); i++) {
    int k = snprintf(chain + used, sizeof(chain) - used, "%srank %u",
                     i ? " -> " : "", st->chain[i]);
    used += k > 0 ? (size_t)k : 0;
  }
  switch (st->verdict) {
  case DLCP_STALL_SILENT:
    dlcp_fmt(buf, len, "stopped responding (no answer to a probe within "
             "%llu ms); waits: %s", (unsigned long long)(st->probe_ns /
                                                         1000000u), chain);
    break;
  case DLCP_STALL_IDLE:
    dlcp_fmt(buf, len, "alive but not taking part (waits on nobody); "
             "waits: %s", chain);
    break;
  case DLCP_STALL_CYCLE:
    /* Each rank of the cycle answered its probe: none is stopped, so
     * what they send each other does not arrive (a path that delivers
     * nothing), or they are not in the same operation. */
    dlcp_fmt(buf, len, "no progress: alive ranks wait on each other in a "
             "cycle (their data lost on the way, or different "
             "operations); waits: %s", chain);
    break;
  case DLCP_STALL_PENDING:
    dlcp_fmt(buf, len, "no progress within the timeout (still asking: %s)",
             chain);
    break;
  }
}

uint64_t dlcp_stall_pack(uint32_t nonce, uint32_t waits_on) {
  return (uint64_t)nonce << 32 | waits_on;
}

void dlcp_stall_unpack(uint64_t value, uint32_t *nonce, uint32_t *waits_on) {
  *nonce = (uint32_t)(value >> 32);
  *waits_on = (uint32_t)value;
}
