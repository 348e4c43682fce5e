/*
 * bench-p2p_vs_tcp: point-to-point throughput and latency of dlcp against
 * a plain TCP socket between the same two processes, in the same run.
 *
 *   dlcp-run -n 2 build/bin/bench-p2p_vs_tcp [--size BYTES] [--runs N]
 *                                            [--pings N]
 *
 * Throughput: rank 0 sends |size| bytes to rank 1 (default 256 MiB); the
 * clock runs at rank 0 from the first byte handed over until it knows
 * every byte arrived (TCP: rank 1's one-byte acknowledgement after its
 * last read; dlcp: the send's completion, which waits for the receiver's
 * STOP).  Latency: 4 KiB ping-pong round trips.  Each figure is the median
 * of several runs; the ratio dlcp/TCP is printed last.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlcp/dlcp.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static uint64_t median(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_u64);
  return v[n / 2];
}

static void die(const char *what) {
  fprintf(stderr, "bench-p2p_vs_tcp: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void full_write(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      die("tcp write");
    }
    p += n;
    len -= (size_t)n;
  }
}

static void full_read(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      die("tcp read");
    }
    p += n;
    len -= (size_t)n;
  }
}

/* A dlcp transfer that must succeed. */
static void xfer(dlcp_comm *comm, dlcp_cq *cq, int send, uint32_t peer,
                 uint32_t id, void *buf, uint64_t len) {
  dlcp_tensor t = {.id = id, .data = buf, .bytes = len};
  int rv = send ? dlcp_post_send(comm, peer, &t, NULL, cq, id)
                : dlcp_post_recv(comm, peer, &t, 0.0, cq, id);
  dlcp_completion c;
  if (rv != 0 || dlcp_wait_cq(cq, &c, 60000) != 1 || c.status != 0) {
    fprintf(stderr, "bench-p2p_vs_tcp: dlcp transfer %u failed: %s\n", id,
            rv ? dlcp_strerror(rv) : c.error);
    exit(1);
  }
}

/* Rank 1 listens; the port reaches rank 0 over dlcp itself. */
static int tcp_pair(dlcp_comm *comm, dlcp_cq *cq, uint32_t rank) {
  uint16_t port = 0;
  int fd;
  if (rank == 1) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sin);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &len) != 0) {
      die("tcp listen");
    }
    port = ntohs(sin.sin_port);
    xfer(comm, cq, 1, 0, 900000, &port, sizeof(port));
    fd = accept(lfd, NULL, NULL);
    close(lfd);
  } else {
    xfer(comm, cq, 0, 1, 900000, &port, sizeof(port));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
      die("tcp connect");
    }
  }
  if (fd < 0) {
    die("tcp accept");
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int main(int argc, char **argv) {
  uint64_t size = 256u << 20;
  int runs = 5, pings = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--size")) {
      size = strtoull(argv[i + 1], NULL, 10);
    } else if (!strcmp(argv[i], "--runs")) {
      runs = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "--pings")) {
      pings = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "usage: %s [--size BYTES] [--runs N] [--pings N]\n",
              argv[0]);
      return 2;
    }
  }
  if (size == 0 || runs < 1 || runs > 99 || pings < 1) {
    fprintf(stderr, "bench-p2p_vs_tcp: --size > 0, --runs 1..99, --pings > 0\n");
    return 2;
  }
  char err[512];
  dlcp_comm *comm;
  if (dlcp_comm_create_from_env(&comm, err, sizeof(err)) != 0) {
    fprintf(stderr, "bench-p2p_vs_tcp: %s\n", err);
    return 1;
  }
  uint32_t rank = dlcp_comm_rank(comm);
  if (dlcp_comm_size(comm) != 2) {
    fprintf(stderr, "bench-p2p_vs_tcp: run with exactly 2 ranks\n");
    return 2;
  }
  dlcp_cq *cq;
  dlcp_cq_create(comm, &cq);
  int fd = tcp_pair(comm, cq, rank);
  uint8_t *buf = malloc(size);
  if (!buf) {
    die("malloc");
  }
  memset(buf, 0x3C, size);
  uint64_t tcp_ns[99], dlcp_ns[99];
  uint8_t token = 1;
  uint32_t id = 1;
  for (int r = 0; r < runs; r++) {
    /* TCP */
    if (rank == 0) {
      uint64_t t0 = now_ns();
      full_write(fd, buf, size);
      full_read(fd, &token, 1);
      tcp_ns[r] = now_ns() - t0;
    } else {
      full_read(fd, buf, size);
      full_write(fd, &token, 1);
    }
    /* dlcp: the receiver posts, then says "ready" over TCP, so the
     * sender's clock starts with the receive already in place. */
    if (rank == 1) {
      dlcp_tensor t = {.id = id, .data = buf, .bytes = size};
      dlcp_post_recv(comm, 0, &t, 0.0, cq, id);
      full_write(fd, &token, 1);
      dlcp_completion c;
      if (dlcp_wait_cq(cq, &c, 60000) != 1 || c.status != 0) {
        fprintf(stderr, "bench-p2p_vs_tcp: dlcp receive failed\n");
        return 1;
      }
    } else {
      full_read(fd, &token, 1);
      uint64_t t0 = now_ns();
      xfer(comm, cq, 1, 1, id, buf, size);
      dlcp_ns[r] = now_ns() - t0;
    }
    id++;
  }
  /* 4 KiB ping-pong. */
  enum { PING = 4096 };
  uint64_t *tcp_rtt = malloc((size_t)pings * sizeof(uint64_t));
  uint64_t *dlcp_rtt = malloc((size_t)pings * sizeof(uint64_t));
  uint8_t *ping = malloc(PING), *pong = malloc(PING);
  memset(ping, 7, PING);
  for (int i = 0; i < pings; i++) {
    if (rank == 0) {
      uint64_t t0 = now_ns();
      full_write(fd, ping, PING);
      full_read(fd, pong, PING);
      tcp_rtt[i] = now_ns() - t0;
    } else {
      full_read(fd, pong, PING);
      full_write(fd, pong, PING);
    }
  }
  for (int i = 0; i < pings; i++) {
    /* Ping is tensor |id| (0 -> 1), pong |id| + 1 (1 -> 0).  Both
     * receives are posted before a TCP token lines the ranks up, as a
     * pipelined application would have them, so the clock measures the
     * round trip and not the set-up. */
    uint32_t ping_id = id, pong_id = id + 1;
    dlcp_completion c;
    if (rank == 1) {
      dlcp_tensor pt = {.id = ping_id, .data = ping, .bytes = PING};
      dlcp_post_recv(comm, 0, &pt, 0.0, cq, ping_id);
      full_write(fd, &token, 1);
      if (dlcp_wait_cq(cq, &c, 60000) != 1 || c.status != 0) {
        fprintf(stderr, "bench-p2p_vs_tcp: ping lost\n");
        return 1;
      }
      dlcp_tensor back = {.id = pong_id, .data = ping, .bytes = PING};
      dlcp_post_send(comm, 0, &back, NULL, cq, pong_id);
      if (dlcp_wait_cq(cq, &c, 60000) != 1 || c.status != 0) {
        fprintf(stderr, "bench-p2p_vs_tcp: pong failed\n");
        return 1;
      }
    } else {
      dlcp_tensor rt = {.id = pong_id, .data = pong, .bytes = PING};
      dlcp_post_recv(comm, 1, &rt, 0.0, cq, pong_id);
      full_read(fd, &token, 1);
      uint64_t t0 = now_ns();
      dlcp_tensor pt = {.id = ping_id, .data = ping, .bytes = PING};
      dlcp_post_send(comm, 1, &pt, NULL, cq, ping_id);
      for (int got = 0; got < 2; got++) {
        if (dlcp_wait_cq(cq, &c, 60000) != 1 || c.status != 0) {
          fprintf(stderr, "bench-p2p_vs_tcp: ping failed\n");
          return 1;
        }
        if (c.user_data == pong_id) {
          dlcp_rtt[i] = now_ns() - t0;
        }
      }
    }
    id += 2;
  }
  if (rank == 0) {
    double tcp_gbps = (double)size * 8 / (double)median(tcp_ns, runs);
    double dlcp_gbps = (double)size * 8 / (double)median(dlcp_ns, runs);
    double tcp_us = (double)median(tcp_rtt, pings) / 1e3;
    double dlcp_us = (double)median(dlcp_rtt, pings) / 1e3;
    printf("%-28s %12s %12s %10s\n", "loopback, 2 processes", "TCP", "dlcp",
           "dlcp/TCP");
    printf("%-28s %9.2f Gb/s %7.2f Gb/s %9.2fx\n", "throughput (median)",
           tcp_gbps, dlcp_gbps, dlcp_gbps / tcp_gbps);
    printf("%-28s %10.1f us %10.1f us %9.2fx\n", "4 KiB round trip (median)",
           tcp_us, dlcp_us, dlcp_us / tcp_us);
    printf("(%llu-byte transfers, %d runs; %d ping-pongs)\n",
           (unsigned long long)size, runs, pings);
  }
  close(fd);
  free(ping);
  free(pong);
  free(tcp_rtt);
  free(dlcp_rtt);
  free(buf);
  dlcp_comm_destroy(comm);
  dlcp_cq_destroy(cq);
  return 0;
}
