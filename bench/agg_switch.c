/*
 * bench-agg_switch: throughput of the aggregation switch.
 *
 *   bench-agg_switch core [SECONDS]
 *       the sans-I/O core alone on one thread: 4 workers' contributions
 *       (pre-encoded) in, 4 results encoded out, 4 ACKs in, per group, with
 *       fresh group numbers; 256 B and 1 KiB of gradient per datagram.
 *   bench-agg_switch udp HOST PORT [SECONDS] [WORKERS] [GSO]
 *       a load generator on one thread against a running dlcp-switch:
 *       WORKERS (default 4) sockets, each sending its contribution to a
 *       batch of 64 groups with sendmmsg, reading the 64 results with
 *       recvmmsg and acknowledging each at once; a group not answered
 *       within 20 ms is re-sent.  256 B and 1 KiB per datagram.  GSO > 1
 *       (default 1):
 *       contributions and ACKs go in runs of up to GSO datagrams per
 *       message (UDP_SEGMENT) and results are read with UDP_GRO, as
 *       dlcp-switch sends and reads them; on loopback a run reaches one
 *       switch thread whole, so use it against --threads 1.  BYTES (256
 *       or 1024) runs one size only.
 *
 * Prints, per size: groups/s, contributions/s (Mpps into the switch),
 * datagrams/s handled by the switch (contributions + results + ACKs), and
 * Gbit/s of gradient: contribution payload bits absorbed per second.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/agg.h"
#include "rt/net.h"
#include "wire/agg_wire.h"
#include "wire/bytes.h"

#define MAXW 16
#define BATCH 64

static double now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t make_contrib(uint8_t *buf, uint32_t group, uint32_t low,
                           uint32_t rank, uint32_t world, uint32_t nblocks,
                           uint64_t token) {
  dlcp_agg_hdr h;
  size_t n = (size_t)nblocks * 64u;

  memset(&h, 0, sizeof(h));
  h.type = DLCP_AGG_CONTRIB;
  h.job = 42u + nblocks;
  h.token = token;
  h.group = group;
  h.low = low;
  h.rank = (uint8_t)rank;
  h.world = (uint8_t)world;
  h.nblocks = (uint8_t)nblocks;
  h.elems = 64;
  (void)dlcp_agg_hdr_encode(buf, DLCP_AGG_DGRAM_MAX, &h);
  for (size_t i = 0; i < n; i++) {
    dlcp_put_u32(buf + DLCP_AGG_HDR_LEN + 4u * i, (uint32_t)(i * 7u + rank));
  }
  return DLCP_AGG_HDR_LEN + 4u * n;
}

static void report(const char *mode, uint32_t nblocks, uint32_t world,
                   double groups, double secs) {
  double contribs = groups * world;
  double bytes = contribs * nblocks * 256.0;

  printf("%-5s %5u B/datagram  %4u workers  %9.0f groups/s  %6.3f Mpps in  "
         "%6.3f Mpps handled  %6.2f Gbit/s of gradient\n",
         mode, nblocks * 256u, world, groups / secs, contribs / secs / 1e6,
         3.0 * contribs / secs / 1e6, bytes * 8.0 / secs / 1e9);
  fflush(stdout);
}

/* ---- core --------------------------------------------------------------- */

static int bench_core(double seconds) {
  const uint32_t world = 4;
  uint8_t *out = malloc(DLCP_AGG_DGRAM_MAX);

  if (out == NULL) {
    return 1;
  }
  for (uint32_t nblocks = 1; nblocks <= 4; nblocks *= 4) {
    dlcp_agg_config cfg;
    dlcp_agg *a;
    uint8_t pkt[4][DLCP_AGG_DGRAM_MAX / 16];
    size_t len[4];
    uint8_t ackb[DLCP_AGG_HDR_LEN];
    dlcp_agg_hdr ah;
    uint32_t g = 0;
    double t0, t;
    uint64_t sink = 0;

    dlcp_agg_config_default(&cfg);
    if (dlcp_agg_new(&a, &cfg, NULL, 0) != 0) {
      return 1;
    }
    for (uint32_t r = 0; r < world; r++) {
      len[r] = make_contrib(pkt[r], 0, 0, r, world, nblocks, 7);
    }
    memset(&ah, 0, sizeof(ah));
    ah.type = DLCP_AGG_ACK;
    ah.job = 42u + nblocks;
    ah.token = 7;
    ah.world = (uint8_t)world;
    ah.nblocks = (uint8_t)nblocks;
    ah.elems = 64;
    t0 = now_s();
    do {
      for (int k = 0; k < 1024; k++, g++) {
        dlcp_agg_send s;

        for (uint32_t r = 0; r < world; r++) {
          /* only the group number changes between groups */
          dlcp_put_u32(pkt[r] + 16, g);
          dlcp_put_u32(pkt[r] + 20, g);
          (void)dlcp_agg_on_packet(a, pkt[r], len[r], 0, r, g);
        }
        while (dlcp_agg_poll(a, &s, out, DLCP_AGG_DGRAM_MAX, g) == 1) {
          sink += out[DLCP_AGG_HDR_LEN];
        }
        ah.group = g;
        ah.low = g + 1u;
        for (uint32_t r = 0; r < world; r++) {
          ah.rank = (uint8_t)r;
          (void)dlcp_agg_hdr_encode(ackb, sizeof(ackb), &ah);
          (void)dlcp_agg_on_packet(a, ackb, sizeof(ackb), 0, r, g);
        }
      }
      t = now_s();
    } while (t - t0 < seconds);
    {
      dlcp_agg_stats st;

      dlcp_agg_get_stats(a, &st);
      if (st.freed != g || st.aggs_used != 0 || sink == 0) {
        fprintf(stderr, "bench-agg_switch: core: %llu of %u groups freed\n",
                (unsigned long long)st.freed, g);
        return 1;
      }
    }
    report("core", nblocks, world, g, t - t0);
    dlcp_agg_del(a);
  }
  free(out);
  return 0;
}

/* ---- udp ---------------------------------------------------------------- */

#define RSLOT 65536 /* a result, or with UDP_GRO a run of them */

typedef union gso_ctl {
  struct cmsghdr align;
  char buf[DLCP_NET_GSO_CTL];
} gso_ctl;

/* Sends iov[0..n) on connected socket |fd|: with |gso| > 1 as runs of up
 * to |gso| datagrams per UDP_SEGMENT message.  Errors are dropped
 * datagrams: the switch's answers tell. */
static void send_runs(int fd, struct iovec *iov, uint32_t n, uint32_t gso) {
  struct mmsghdr msg[BATCH];
  gso_ctl ctl[BATCH];
  uint32_t m = 0;

  for (uint32_t i = 0; i < n; m++) {
    size_t count = dlcp_net_gso_run(&iov[i], n - i < gso ? n - i : gso);

    dlcp_net_gso_message(&msg[m].msg_hdr, NULL, &iov[i], count, 0,
                         ctl[m].buf);
    i += (uint32_t)count;
  }
  (void)sendmmsg(fd, msg, m, 0);
}

static int bench_udp(const char *host, uint16_t port, double seconds,
                     uint32_t world, uint32_t gso, uint32_t only_bytes) {
  struct sockaddr_in sw;
  int fd[MAXW];
  static uint8_t buf[MAXW][BATCH][2048];
  static uint8_t rbuf[BATCH][RSLOT];
  static uint8_t abuf[BATCH * DLCP_NET_GSO_MAX][DLCP_AGG_HDR_LEN];
  struct iovec aiov[BATCH * DLCP_NET_GSO_MAX];
  struct mmsghdr msg[BATCH];
  struct iovec iov[BATCH];
  gso_ctl rctl[BATCH];
  uint64_t token = (uint64_t)time(NULL) * 2654435761u;

  memset(&sw, 0, sizeof(sw));
  sw.sin_family = AF_INET;
  sw.sin_port = htons(port);
  if (inet_pton(AF_INET, host, &sw.sin_addr) != 1) {
    fprintf(stderr, "bench-agg_switch: not an IPv4 address: %s\n", host);
    return 2;
  }
  for (uint32_t r = 0; r < world; r++) {
    int big = 8 << 20;
    struct timeval tv = {0, 20000};

    fd[r] = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd[r] < 0 || connect(fd[r], (struct sockaddr *)&sw, sizeof(sw)) != 0) {
      perror("bench-agg_switch: socket");
      return 1;
    }
    (void)setsockopt(fd[r], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    (void)setsockopt(fd[r], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (gso > 1) {
      int one = 1;

      (void)setsockopt(fd[r], SOL_UDP, UDP_GRO, &one, sizeof(one));
    }
  }
  for (uint32_t nblocks = 1; nblocks <= 4; nblocks *= 4) {
    if (only_bytes != 0 && only_bytes != 64u * nblocks * 4u) {
      continue;
    }
    uint32_t g0 = 0;
    double t0 = now_s(), t;
    uint64_t retx = 0;
    size_t len = 0;

    token++; /* a new job per size: a fresh verdict window */
    do {
      uint64_t got[MAXW];

      for (uint32_t r = 0; r < world; r++) {
        for (uint32_t k = 0; k < BATCH; k++) {
          len = make_contrib(buf[r][k], g0 + k, g0, r, world, nblocks, token);
        }
      }
      for (uint32_t r = 0; r < world; r++) {
        got[r] = 0;
      }
      for (int attempt = 0;; attempt++) {
        bool all = true;

        for (uint32_t r = 0; r < world; r++) {
          uint32_t n = 0;

          for (uint32_t k = 0; k < BATCH; k++) {
            if ((got[r] >> k & 1u) == 0) {
              iov[n].iov_base = buf[r][k];
              iov[n].iov_len = len;
              n++;
            }
          }
          if (n > 0) {
            retx += attempt > 0 ? n : 0;
            send_runs(fd[r], iov, n, gso);
          }
        }
        for (uint32_t r = 0; r < world; r++) {
          while (got[r] != UINT64_MAX) {
            int k;

            for (uint32_t i = 0; i < BATCH; i++) {
              iov[i].iov_base = rbuf[i];
              iov[i].iov_len = sizeof(rbuf[i]);
              memset(&msg[i], 0, sizeof(msg[i]));
              msg[i].msg_hdr.msg_iov = &iov[i];
              msg[i].msg_hdr.msg_iovlen = 1;
              msg[i].msg_hdr.msg_control = rctl[i].buf;
              msg[i].msg_hdr.msg_controllen = sizeof(rctl[i].buf);
            }
            k = recvmmsg(fd[r], msg, BATCH, MSG_WAITFORONE, NULL);
            if (k <= 0) {
              break; /* 20 ms without a result: re-send the missing */
            }
            {
              uint32_t na = 0;

              for (int j = 0; j < k; j++) {
                size_t mlen = msg[j].msg_len;
                size_t seg = dlcp_net_gro_segment(&msg[j].msg_hdr, mlen);
                for (size_t off = 0; off < mlen; off += seg) {
                  dlcp_agg_hdr h;
                  const uint8_t *p;
                  size_t dlen = mlen - off < seg ? mlen - off : seg;

                  if (dlcp_agg_decode(&h, &p, rbuf[j] + off, dlen) != 0) {
                    continue;
                  }
                  if (h.type == DLCP_AGG_NACK) {
                    fprintf(stderr, "bench-agg_switch: NACK %u for group %u\n",
                            h.aux, h.group);
                    return 1;
                  }
                  if (h.type != DLCP_AGG_RESULT || h.group - g0 >= BATCH) {
                    continue;
                  }
                  /* acknowledge at once, as a host does (duplicates too) */
                  got[r] |= UINT64_C(1) << (h.group - g0);
                  h.type = DLCP_AGG_ACK;
                  h.flags = 0;
                  h.aux = 0;
                  h.low = g0;
                  (void)dlcp_agg_hdr_encode(abuf[na], sizeof(abuf[na]), &h);
                  aiov[na].iov_base = abuf[na];
                  aiov[na].iov_len = DLCP_AGG_HDR_LEN;
                  na++;
                }
              }
              for (uint32_t i = 0; i < na; i += BATCH) {
                send_runs(fd[r], aiov + i, na - i < BATCH ? na - i : BATCH, gso);
              }
            }
          }
          all = all && got[r] == UINT64_MAX;
        }
        if (all) {
          break;
        }
        if (attempt > 100) {
          fprintf(stderr, "bench-agg_switch: no answer from %s:%u\n", host,
                  port);
          return 1;
        }
      }
      g0 += BATCH;
      t = now_s();
    } while (t - t0 < seconds);
    report("udp", nblocks, world, g0, t - t0);
    if (retx > 0) {
      printf("      (%llu contributions re-sent after 20 ms)\n",
             (unsigned long long)retx);
    }
  }
  for (uint32_t r = 0; r < world; r++) {
    close(fd[r]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "core") == 0) {
    return bench_core(argc > 2 ? atof(argv[2]) : 2.0);
  }
  if (argc >= 4 && strcmp(argv[1], "udp") == 0) {
    uint32_t w = argc > 5 ? (uint32_t)atoi(argv[5]) : 4;
    int gso = argc > 6 ? atoi(argv[6]) : 1;
    int bytes = argc > 7 ? atoi(argv[7]) : 0;

    if (w < 1 || w > MAXW) {
      fprintf(stderr, "bench-agg_switch: WORKERS must be 1..%d\n", MAXW);
      return 2;
    }
    if (gso < 1 || gso > DLCP_NET_GSO_MAX) {
      fprintf(stderr, "bench-agg_switch: GSO must be 1..%d\n",
              DLCP_NET_GSO_MAX);
      return 2;
    }
    if (bytes != 0 && bytes != 256 && bytes != 1024) {
      fprintf(stderr, "bench-agg_switch: BYTES must be 256 or 1024\n");
      return 2;
    }
    return bench_udp(argv[2], (uint16_t)atoi(argv[3]),
                     argc > 4 ? atof(argv[4]) : 2.0, w, (uint32_t)gso,
                     (uint32_t)bytes);
  }
  fprintf(stderr, "usage: bench-agg_switch core [SECONDS]\n"
                  "       bench-agg_switch udp HOST PORT [SECONDS] "
                  "[WORKERS] [GSO] [BYTES]\n");
  return 2;
}
