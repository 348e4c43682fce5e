/*
 * example-mlt_lossy_transfer: one MLT tensor transfer between two real
 * protocol state machines through the seeded in-memory lossy network, in
 * virtual time.  Prints what the receiver got and what it cost the sender.
 *
 *   example-mlt_lossy_transfer [--size BYTES] [--loss F] [--p F]
 *                              [--reorder F] [--dup F] [--rate-gbps G]
 *                              [--seed N]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netsim.h"
#include "proto/mlt.h"

static int parse_double(const char *name, const char *s, double lo, double hi,
                        double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "%s: expected a number in [%g, %g], got '%s'\n", name,
            lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_u64(const char *name, const char *s, uint64_t lo,
                     uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "%s: expected an integer in [%llu, %llu], got '%s'\n",
            name, (unsigned long long)lo, (unsigned long long)hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  uint64_t size = 64u << 20, seed = 1;
  double loss = 0.01, p = 0.0, reorder = 0.0, dup = 0.0, gbps = 10.0;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rv = -1;
    if (!v) {
      fprintf(stderr, "%s: missing value (see the header of this file)\n", a);
      return 2;
    }
    if (!strcmp(a, "--size")) {
      rv = parse_u64(a, v, 0, 1ull << 32, &size);
    } else if (!strcmp(a, "--loss")) {
      rv = parse_double(a, v, 0.0, 0.9, &loss);
    } else if (!strcmp(a, "--p")) {
      rv = parse_double(a, v, 0.0, 0.999, &p);
    } else if (!strcmp(a, "--reorder")) {
      rv = parse_double(a, v, 0.0, 1.0, &reorder);
    } else if (!strcmp(a, "--dup")) {
      rv = parse_double(a, v, 0.0, 1.0, &dup);
    } else if (!strcmp(a, "--rate-gbps")) {
      rv = parse_double(a, v, 0.001, 1000.0, &gbps);
    } else if (!strcmp(a, "--seed")) {
      rv = parse_u64(a, v, 0, UINT64_MAX, &seed);
    } else {
      fprintf(stderr, "unknown option '%s'\n", a);
    }
    if (rv != 0) {
      return 2;
    }
  }

  dlcp_mlt_config cfg;
  dlcp_mlt_config_default(&cfg);
  cfg.seed = seed;
  cfg.line_rate_bps = (uint64_t)(gbps * 1e9);
  if (cfg.min_rate_bps > cfg.line_rate_bps) {
    cfg.min_rate_bps = cfg.line_rate_bps;
  }
  netsim_link link = {.loss = loss, .dup = dup, .reorder = reorder,
                      .reorder_ns = 30000, .delay_ns = 10000,
                      .rate_bps = cfg.line_rate_bps, .ctrl_delay_ns = 12000};
  netsim *ns = netsim_new(&cfg, &cfg, &link, &link, seed);
  uint8_t *src = malloc(size ? size : 1), *dst = malloc(size ? size : 1);
  if (!ns || !src || !dst) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (uint64_t i = 0; i < size; i++) {
    src[i] = (uint8_t)(i * 2654435761u >> 13);
  }
  dlcp_mlt_recv r = {.tensor = 1, .buf = dst, .len = size, .loss_bound = p,
                     .user_data = 1};
  dlcp_mlt_send s = {.tensor = 1, .buf = src, .len = size, .user_data = 2};
  if (dlcp_mlt_post_recv(netsim_conn(ns, 1), &r, 0) != 0 ||
      dlcp_mlt_post_send(netsim_conn(ns, 0), &s, 0) != 0 ||
      netsim_run(ns, 2, 3600ull * 1000000000ull) != 2) {
    fprintf(stderr, "transfer did not complete\n");
    return 1;
  }
  const dlcp_mlt_completion *rc = &netsim_find(ns, 1, 1)->c;
  const dlcp_mlt_completion *sc = &netsim_find(ns, 0, 2)->c;
  /* Exact where delivered, zero where reported missing. */
  uint64_t wrong = 0, pos = 0;
  for (size_t i = 0; i <= rc->nmissing; i++) {
    uint64_t end = i < rc->nmissing ? rc->missing[i].offset : size;
    for (uint64_t b = pos; b < end; b++) {
      wrong += src[b] != dst[b];
    }
    if (i < rc->nmissing) {
      for (uint64_t b = end; b < end + rc->missing[i].len; b++) {
        wrong += dst[b] != 0;
      }
      pos = end + rc->missing[i].len;
    }
  }
  uint64_t nsegs = (size + cfg.segment_size - 1) / cfg.segment_size;
  double secs = (double)rc->end_ns / 1e9;
  printf("size %llu B  loss %.1f%%  p %.2f  | status %s  delivered %.4f  "
         "missing ranges %zu  wrong bytes %llu  | segments %llu  sent %llu "
         "(retx %llu, rounds %u)  dup rx %llu  | %.3f ms virtual, "
         "goodput %.2f Gbps\n",
         (unsigned long long)size, loss * 100, p,
         rc->status ? dlcp_strerror(rc->status) : "ok",
         rc->delivered_fraction, rc->nmissing, (unsigned long long)wrong,
         (unsigned long long)nsegs, (unsigned long long)sc->packets,
         (unsigned long long)sc->retransmissions, sc->rounds,
         (unsigned long long)rc->duplicates, secs * 1e3,
         secs > 0 ? (double)rc->delivered_bytes * 8 / secs / 1e9 : 0.0);
  int failed = rc->status != 0 || sc->status != 0 || wrong != 0 ||
               rc->delivered_fraction < 1.0 - p;
  free(src);
  free(dst);
  netsim_del(ns);
  return failed;
}
