/*
 * bench-mlt_core: the cost of the MLT core per packet, header path only.
 *
 * Sender: dlcp_mlt_poll producing DATA packets (scheduling, pacing, tagging
 * lookup, header encoding; the payload is referenced, never copied).
 * Receiver: dlcp_mlt_on_datagram placing DATA packets (decoding,
 * validation, transfer lookup, bitmap update) with 64-byte segments, so
 * the payload copy it includes is a single cache line; the same run with
 * 1456-byte segments is shown for reference.
 *
 * Each figure is the median of several runs of many packets; the machine's
 * noise shows in the spread printed beside it.  Usage:
 *   bench-mlt_core [--packets N] [--runs R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/mlt.h"
#include "wire/wire.h"

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void config(dlcp_mlt_config *cfg, uint32_t seg) {
  dlcp_mlt_config_default(cfg);
  cfg->segment_size = seg;
  cfg->line_rate_bps = 1000000000000000ull; /* never pace in the bench */
  cfg->min_rate_bps = 1000000;
  cfg->burst_pkts = 1u << 20;
}

/* Builds the receiver's START for a tensor of |len| bytes and feeds it to
 * |sender|, as if it had come over the control channel. */
static void feed_start(dlcp_mlt_conn *sender, uint32_t seg, uint64_t len) {
  uint8_t buf[256];
  dlcp_wire_start_entry e = {.tensor = 1, .xfer = 1, .size = len,
                             .loss_ppm = 0, .seg_size = seg};
  dlcp_ssize n = dlcp_wire_start_encode(buf, sizeof(buf), 1, &e, 1);
  if (n < 0 || dlcp_mlt_on_control(sender, buf, (size_t)n, 0) != 0) {
    fprintf(stderr, "bench: START rejected\n");
    exit(1);
  }
}

static double sender_run(uint32_t seg, uint64_t npkts, uint8_t *tensor) {
  dlcp_mlt_config cfg;
  config(&cfg, seg);
  dlcp_mlt_conn *c;
  if (dlcp_mlt_conn_new(&c, &cfg, NULL, 0) != 0) {
    exit(1);
  }
  uint64_t len = npkts * seg;
  feed_start(c, seg, len);
  dlcp_mlt_send s = {.tensor = 1, .buf = tensor, .len = len, .layer = 3,
                     .nlayers = 10};
  dlcp_mlt_post_send(c, &s, 0);
  uint8_t buf[DLCP_MLT_MIN_BUF];
  dlcp_mlt_action act;
  uint64_t sent = 0, now = 1000;
  volatile size_t sink = 0;
  uint64_t t0 = wall_ns();
  while (sent < npkts) {
    dlcp_mlt_poll(c, &act, buf, sizeof(buf), now);
    if (act.type == DLCP_MLT_ACT_DATAGRAM) {
      sink += act.len;
      sent++;
    }
    now += 1; /* virtual time barely moves: no timer fires */
  }
  uint64_t t1 = wall_ns();
  (void)sink;
  dlcp_mlt_conn_del(c);
  return (double)(t1 - t0) / (double)npkts;
}

/* A driver receives datagrams in batches into a small set of buffers that
 * stay in cache (recvmmsg into a ring).  The benchmark does the same: each
 * batch is copied from the pre-built packets into the ring untimed (the
 * kernel's work), then handed to the core timed. */
enum { BATCH = 64 };

static double receiver_run(uint32_t seg, uint64_t npkts, uint8_t *tensor,
                           const uint8_t *pkts, size_t pkt_len,
                           uint8_t *ring) {
  dlcp_mlt_config cfg;
  config(&cfg, seg);
  dlcp_mlt_conn *c;
  if (dlcp_mlt_conn_new(&c, &cfg, NULL, 0) != 0) {
    exit(1);
  }
  dlcp_mlt_recv r = {.tensor = 1, .buf = tensor, .len = npkts * seg};
  dlcp_mlt_post_recv(c, &r, 0); /* xfer id 1 */
  uint64_t timed = 0;
  for (uint64_t i = 0; i < npkts; i += BATCH) {
    uint64_t n = npkts - i < BATCH ? npkts - i : BATCH;
    memcpy(ring, pkts + i * pkt_len, n * pkt_len);
    uint64_t t0 = wall_ns();
    for (uint64_t k = 0; k < n; k++) {
      dlcp_mlt_on_datagram(c, ring + k * pkt_len, pkt_len, 1000 + i + k);
    }
    timed += wall_ns() - t0;
  }
  dlcp_mlt_conn_del(c);
  return (double)timed / (double)npkts;
}

/* The payload copy alone, same packets, same order, same batching: what
 * on_datagram costs beyond this is the header path. */
static double copy_run(uint32_t seg, uint64_t npkts, uint8_t *tensor,
                       const uint8_t *pkts, size_t pkt_len, uint8_t *ring) {
  uint64_t timed = 0;
  for (uint64_t i = 0; i < npkts; i += BATCH) {
    uint64_t n = npkts - i < BATCH ? npkts - i : BATCH;
    memcpy(ring, pkts + i * pkt_len, n * pkt_len);
    uint64_t t0 = wall_ns();
    for (uint64_t k = 0; k < n; k++) {
      const uint8_t *p = ring + k * pkt_len;
      uint64_t off = 0;
      for (int b = 7; b >= 0; b--) {
        off = (off << 8) | p[28 + b];
      }
      memcpy(tensor + off, p + DLCP_WIRE_DATA_HDR_LEN, seg);
    }
    timed += wall_ns() - t0;
  }
  return (double)timed / (double)npkts;
}

/* DATA packets for every segment.  Arrival is shuffled within windows of
 * |window| packets: per-packet multipath reorders packets locally, by the
 * spread of the paths' delays; window == npkts is a full shuffle, the
 * worst case for the receiver's caches. */
static uint8_t *make_packets(uint32_t seg, uint64_t npkts, uint64_t window,
                             size_t *pkt_len) {
  *pkt_len = DLCP_WIRE_DATA_HDR_LEN + seg;
  uint8_t *pkts = calloc(npkts, *pkt_len);
  uint64_t *order = malloc(npkts * sizeof(uint64_t));
  if (!pkts || !order) {
    exit(1);
  }
  for (uint64_t i = 0; i < npkts; i++) {
    order[i] = i;
  }
  uint64_t x = 88172645463325252ull;
  for (uint64_t base = 0; base < npkts; base += window) {
    uint64_t n = npkts - base < window ? npkts - base : window;
    for (uint64_t i = n - 1; i > 0; i--) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      uint64_t j = x % (i + 1), t = order[base + i];
      order[base + i] = order[base + j];
      order[base + j] = t;
    }
  }
  for (uint64_t i = 0; i < npkts; i++) {
    dlcp_wire_data d = {.job = 1, .xfer = 1, .tensor = 1,
                        .seq = (uint32_t)i, .offset = order[i] * seg,
                        .tx_ts = i, .payload_len = (uint16_t)seg};
    dlcp_wire_data_encode(pkts + i * *pkt_len, *pkt_len, &d);
  }
  free(order);
  return pkts;
}

static void report(const char *what, double *v, int runs) {
  qsort(v, (size_t)runs, sizeof(double), cmp_double);
  printf("%-52s %7.1f ns/packet  (min %.1f, max %.1f, %d runs)\n", what,
         v[runs / 2], v[0], v[runs - 1], runs);
}

int main(int argc, char **argv) {
  uint64_t npkts = 1000000;
  int runs = 7;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--packets") == 0 && i + 1 < argc) {
      npkts = strtoull(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--packets N] [--runs R]\n", argv[0]);
      return 2;
    }
  }
  if (npkts == 0 || runs < 1 || runs > 101) {
    fprintf(stderr, "bench: --packets must be > 0 and --runs 1..101\n");
    return 2;
  }
  double v[101], copy[101], net[101];
  const uint32_t segs[2] = {64, 1456};
  printf("MLT core cost per packet: median of %d runs of %llu packets\n",
         runs, (unsigned long long)npkts);
  for (int k = 0; k < 2; k++) {
    uint32_t seg = segs[k];
    uint8_t *tensor = malloc(npkts * seg);
    /* Touch the tensor once so page faults are not part of any run. */
    memset(tensor, 1, npkts * seg);
    char label[96];
    for (int r = 0; r < runs; r++) {
      v[r] = sender_run(seg, npkts, tensor);
    }
    snprintf(label, sizeof(label), "sender   poll -> DATA, %u B segments", seg);
    report(label, v, runs);
    const uint64_t windows[2] = {64, npkts};
    for (int w = 0; w < 2; w++) {
      size_t pkt_len;
      uint8_t *pkts = make_packets(seg, npkts, windows[w], &pkt_len);
      uint8_t *ring = malloc(BATCH * pkt_len);
      for (int r = 0; r < runs; r++) {
        copy[r] = copy_run(seg, npkts, tensor, pkts, pkt_len, ring);
        v[r] = receiver_run(seg, npkts, tensor, pkts, pkt_len, ring);
        net[r] = v[r] - copy[r];
      }
      const char *order = w == 0 ? "reordered within 64" : "fully shuffled";
      snprintf(label, sizeof(label), "receiver on_datagram, %u B, %s", seg,
               order);
      report(label, v, runs);
      report("  the payload copy alone", copy, runs);
      snprintf(label, sizeof(label), "receiver header path, %u B, %s", seg,
               order);
      report(label, net, runs);
      free(ring);
      free(pkts);
    }
    free(tensor);
  }
  return 0;
}
