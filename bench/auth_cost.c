/*
 * bench-auth_cost: what authenticating a datagram costs the CPU: sealing
 * (sender) and checking (receiver) a trailer on datagrams of 1 KiB, 8 KiB
 * and 64 KiB of payload plus MLT's 44-byte header, as two iovecs like the
 * datagram path gathers them.  Prints ns per datagram for each side and
 * the MAC's throughput; the share of a transfer's time follows from the
 * path's own cost per datagram (docs/runtime.md, "Authenticated jobs").
 *
 *   bench-auth_cost [ITERATIONS]   (default 200000 per size)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt/auth.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  static const size_t sizes[] = {1024, 8192, 65463};
  static uint8_t payload[65536];
  uint8_t hdr[44];
  uint8_t tr[DLCP_AUTH_TRAILER_LEN];
  dlcp_auth a;
  long iters = argc > 1 ? atol(argv[1]) : 200000;
  uint64_t stream = dlcp_auth_stream(DLCP_AUTH_DATAGRAM, 1, 2);
  uint64_t sink = 0;
  if (iters <= 0 || dlcp_auth_init(&a, "bench secret, 16+ bytes", 23, 7)) {
    fprintf(stderr, "usage: bench-auth_cost [ITERATIONS > 0]\n");
    return 2;
  }
  memset(payload, 0x5A, sizeof(payload));
  memset(hdr, 0x11, sizeof(hdr));
  printf("# payload_bytes seal_ns check_ns mac_GBps (%ld datagrams each)\n",
         iters);
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {payload, sizes[s]}};
    double t0 = now_ns(), t1, t2;
    for (long i = 1; i <= iters; i++) {
      dlcp_auth_seal(&a, stream, (uint64_t)i, iov, 2, tr);
      sink += tr[9];
    }
    t1 = now_ns();
    for (long i = 1; i <= iters; i++) {
      sink += dlcp_auth_check(&a, stream, iov, 2, tr);
    }
    t2 = now_ns();
    printf("%zu %.0f %.0f %.2f\n", sizes[s], (t1 - t0) / (double)iters,
           (t2 - t1) / (double)iters,
           (double)(sizes[s] + sizeof(hdr)) * (double)iters / (t1 - t0));
  }
  return sink == 42 ? 1 : 0; /* keeps the loops from being optimised out */
}
