/*
 * dlcp-p2p: point-to-point MLT transfers between ranks launched by
 * dlcp-run (or any torchrun-style launcher).  Even rank r sends to rank
 * r + 1; every transfer is checked byte by byte against the pattern the
 * sender used.  Prints one line per transfer from the receiver.
 *
 *   dlcp-run -n 2 dlcp-p2p [--size BYTES] [--iters N] [--p LOSS_BOUND]
 *
 * Exit status is non-zero if a transfer failed or a delivered byte was
 * wrong.  Fault injection comes from DLCP_FAULT_* (docs/runtime.md).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcp/dlcp.h"

static uint8_t pattern(uint64_t i, uint32_t iter) {
  return (uint8_t)((i * 2654435761u >> 11) + iter * 37u);
}

static int parse_u64(const char *name, const char *s, uint64_t lo,
                     uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') {
    mult = 1024;
    end++;
  } else if (*end == 'M' || *end == 'm') {
    mult = 1024 * 1024;
    end++;
  } else if (*end == 'G' || *end == 'g') {
    mult = 1024ull * 1024 * 1024;
    end++;
  }
  if (errno || end == s || *end || s[0] == '-' || v * mult < lo ||
      v * mult > hi) {
    fprintf(stderr, "dlcp-p2p: %s: expected a number in [%llu, %llu] "
            "(K/M/G suffixes allowed), got '%s'\n", name,
            (unsigned long long)lo, (unsigned long long)hi, s);
    return -1;
  }
  *out = v * mult;
  return 0;
}

static void help(void) {
  printf("usage: dlcp-p2p [--size BYTES] [--iters N] [--p LOSS_BOUND]\n"
         "\n"
         "Point-to-point MLT transfers between the ranks of a job: even rank "
         "r sends\n"
         "to rank r + 1, which checks every byte and prints one line per "
         "transfer.\n"
         "  dlcp-run -n 2 dlcp-p2p --size 64M\n"
         "\n"
         "  --size BYTES      bytes per transfer, K/M/G suffixes, up to 16G "
         "(default 16M)\n"
         "  --iters N         transfers per pair, 1..1000000 (default 3)\n"
         "  --p LOSS_BOUND    fraction of the data the receiver may give up, "
         "[0, 1)\n"
         "                    (default 0: every byte)\n"
         "  -h, --help        show this help\n"
         "\n"
         "Exits non-zero if a transfer failed or a delivered byte was wrong. "
         "The job\n"
         "and fault injection come from the environment (RANK, WORLD_SIZE, "
         "MASTER_ADDR,\n"
         "MASTER_PORT, DLCP_*, DLCP_FAULT_*: docs/runtime.md).\n");
}

int main(int argc, char **argv) {
  uint64_t size = 16u << 20, iters = 3;
  double p = 0.0;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      help();
      return 0;
    }
    if (!v) {
      fprintf(stderr, "dlcp-p2p: %s needs a value (see dlcp-p2p --help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--size")) {
      if (parse_u64(a, v, 0, 1ull << 34, &size)) {
        return 2;
      }
    } else if (!strcmp(a, "--iters")) {
      if (parse_u64(a, v, 1, 1000000, &iters)) {
        return 2;
      }
    } else if (!strcmp(a, "--p")) {
      char *end;
      p = strtod(v, &end);
      if (*end || !(p >= 0.0 && p < 1.0)) {
        fprintf(stderr, "dlcp-p2p: --p: expected a loss bound in [0, 1), "
                "got '%s'\n", v);
        return 2;
      }
    } else {
      fprintf(stderr, "dlcp-p2p: unknown option '%s' (see dlcp-p2p --help)\n",
              a);
      return 2;
    }
  }

  char err[512];
  dlcp_comm *comm;
  int rv = dlcp_comm_create_from_env(&comm, err, sizeof(err));
  if (rv != 0) {
    fprintf(stderr, "dlcp-p2p: %s\n", err);
    return 1;
  }
  uint32_t rank = dlcp_comm_rank(comm), world = dlcp_comm_size(comm);
  dlcp_cq *cq;
  dlcp_cq_create(comm, &cq);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    fprintf(stderr, "dlcp-p2p: cannot allocate %llu bytes\n",
            (unsigned long long)size);
    return 1;
  }
  int failed = 0;
  bool sender = rank % 2 == 0;
  uint32_t partner = sender ? rank + 1 : rank - 1;
  if (partner >= world) {
    printf("no partner for rank %u; idle\n", rank);
    iters = 0;
  }
  for (uint32_t it = 0; it < iters && !failed; it++) {
    dlcp_tensor t = {.id = it, .data = buf, .bytes = size};
    if (sender) {
      for (uint64_t i = 0; i < size; i++) {
        buf[i] = pattern(i, it);
      }
      rv = dlcp_post_send(comm, partner, &t, NULL, cq, it);
    } else {
      memset(buf, 0xA5, size);
      rv = dlcp_post_recv(comm, partner, &t, p, cq, it);
    }
    if (rv != 0) {
      fprintf(stderr, "dlcp-p2p: post: %s\n", dlcp_strerror(rv));
      failed = 1;
      break;
    }
    dlcp_completion c;
    rv = dlcp_wait_cq(cq, &c, -1);
    if (rv != 1 || c.status != 0) {
      fprintf(stderr, "dlcp-p2p: transfer %u failed: %s\n", it,
              rv != 1 ? dlcp_strerror(rv) : c.error);
      failed = 1;
      break;
    }
    if (sender) {
      continue;
    }
    uint64_t wrong = 0, pos = 0;
    for (size_t m = 0; m <= c.nmissing; m++) {
      uint64_t end = m < c.nmissing ? c.missing[m].offset : size;
      for (uint64_t i = pos; i < end; i++) {
        wrong += buf[i] != pattern(i, it);
      }
      if (m < c.nmissing) {
        for (uint64_t i = end; i < end + c.missing[m].len; i++) {
          wrong += buf[i] != 0;
        }
        pos = end + c.missing[m].len;
      }
    }
    double secs = (double)c.elapsed_ns / 1e9;
    printf("recv %u: %llu B in %.3f ms (%.2f Gbps)  delivered %.4f  missing "
           "ranges %zu  wrong bytes %llu\n",
           it, (unsigned long long)size, secs * 1e3,
           secs > 0 ? (double)size * 8 / secs / 1e9 : 0.0,
           c.delivered_fraction, c.nmissing, (unsigned long long)wrong);
    if (wrong != 0 || c.delivered_fraction < 1.0 - p) {
      failed = 1;
    }
  }
  if (sender && !failed && iters > 0) {
    dlcp_comm_stats st;
    dlcp_comm_get_stats(comm, &st);
    printf("sent %llu datagrams, %llu retransmissions, fault: %llu dropped, "
           "%llu duplicated, %llu delayed; rate %.2f Gbps, srtt %.1f us\n",
           (unsigned long long)st.datagrams_sent,
           (unsigned long long)st.retransmissions,
           (unsigned long long)st.fault_dropped,
           (unsigned long long)st.fault_duplicated,
           (unsigned long long)st.fault_delayed, st.min_rate_gbps,
           (double)st.max_srtt_ns / 1e3);
    printf("%llu send windows timed out; %llu datagrams dropped on a full "
           "ring\n",
           (unsigned long long)st.window_timeouts,
           (unsigned long long)st.shm_full);
  }
  dlcp_comm_destroy(comm);
  dlcp_cq_destroy(cq);
  free(buf);
  return failed;
}
