/*
 * fuzz_agg_peers.c: dlcp-switch's peer cookies (src/rt/agg_peers.h) under
 * a fuzzer-chosen program.  The first byte sizes the table (1..32
 * senders, rounded up to a power of two); then each operation is a byte
 * whose low two bits say what it is:
 *
 *   0 x     intern IPv6 sender x (one of 256: fd00::x, port 3x, interface
 *           x % 3), pinned if bit 2 of the operation byte is set
 *   1 ....  intern an IPv4 sender: 4 address bytes, 2 port bytes
 *   2 x     resolve the cookie sender x was last given
 *   3 8B    resolve an arbitrary cookie
 *
 * Invariants (abort on violation): a cookie resolves to the sender it was
 * given for or to nothing, never to another; interning a sender that is
 * in the table gives its cookie again; a freshly given cookie resolves;
 * IPv4 senders take no room; pinned senders are never evicted (while at
 * most half the table is pinned); the evictions are exactly the new IPv6
 * senders beyond the table's size; an arbitrary cookie resolves only to
 * its own IPv4 encoding or to a sender's current cookie.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/agg_peers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { SENDERS = 256 };

/* Sender x, made once. */
static dlcp_sockaddr sender(uint32_t x) {
  static dlcp_sockaddr made[SENDERS];
  static bool ready;

  if (!ready) {
    for (uint32_t y = 0; y < SENDERS; y++) {
      char ip[32];

      snprintf(ip, sizeof(ip), "fd00::%x", y);
      if (dlcp_sockaddr_parse(&made[y], ip, (uint16_t)(3 * y)) != 0) {
        abort();
      }
      made[y].in6.sin6_scope_id = y % 3;
    }
    ready = true;
  }
  return made[x];
}

/* The sender |c| names (SENDERS for an IPv4 one), -1 for none. */
static int resolve(const dlcp_agg_peers *p, uint64_t c) {
  dlcp_sockaddr a;

  if (!dlcp_agg_peers_addr(p, c, &a)) {
    return -1;
  }
  if (a.sa.sa_family == AF_INET) {
    return SENDERS;
  }
  /* fd00::x names sender x; anything else no one was given a cookie for */
  uint32_t x = (uint32_t)a.in6.sin6_addr.s6_addr[14] << 8 |
               a.in6.sin6_addr.s6_addr[15];
  dlcp_sockaddr s = sender(x < SENDERS ? x : 0);
  if (x >= SENDERS || !dlcp_sockaddr_equal(&a, &s) ||
      a.in6.sin6_scope_id != s.in6.sin6_scope_id) {
    abort();
  }
  return (int)x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_agg_peers *p;
  uint64_t cookie[SENDERS];
  bool given[SENDERS] = {false}, pinned[SENDERS] = {false};
  uint32_t cap = 2, npinned = 0;
  uint64_t fresh = 0;
  size_t i = 1;

  if (size < 1) {
    return 0;
  }
  while (cap < (uint32_t)(data[0] % 32) + 1) {
    cap *= 2;
  }
  if (dlcp_agg_peers_new(&p, (uint32_t)(data[0] % 32) + 1) != 0) {
    abort();
  }
  while (i < size) {
    uint8_t op = data[i++];

    switch (op & 3) {
    case 0:
      if (i < size) {
        uint32_t x = data[i++];
        dlcp_sockaddr a = sender(x);
        bool pin = (op & 4) != 0;
        bool present = given[x] && resolve(p, cookie[x]) == (int)x;
        uint64_t c = dlcp_agg_peers_cookie(p, &a, pin);
        if (present ? c != cookie[x] : given[x] && c == cookie[x]) {
          abort(); /* its cookie again while in the table, a new one after */
        }
        if (resolve(p, c) != (int)x) {
          abort();
        }
        fresh += !present;
        if (pin && !pinned[x] && npinned < cap / 2) {
          pinned[x] = true;
          npinned++;
        }
        cookie[x] = c;
        given[x] = true;
      }
      break;
    case 1:
      if (i + 6 <= size) {
        dlcp_sockaddr a;
        memset(&a, 0, sizeof(a));
        a.in.sin_family = AF_INET;
        memcpy(&a.in.sin_addr, data + i, 4);
        memcpy(&a.in.sin_port, data + i + 4, 2);
        i += 6;
        dlcp_sockaddr back;
        uint64_t c = dlcp_agg_peers_cookie(p, &a, (op & 4) != 0);
        if (!dlcp_agg_peers_addr(p, c, &back) ||
            !dlcp_sockaddr_equal(&back, &a)) {
          abort();
        }
      }
      break;
    case 2:
      if (i < size) {
        uint32_t x = data[i++];
        int r = given[x] ? resolve(p, cookie[x]) : -1;
        if ((r != -1 && r != (int)x) || (pinned[x] && r != (int)x)) {
          abort();
        }
      }
      break;
    default:
      if (i + 8 <= size) {
        uint64_t c;
        memcpy(&c, data + i, 8);
        i += 8;
        int r = resolve(p, c);
        if (r == SENDERS && c >> 48 != 0) {
          abort(); /* only the low 48 bits carry an IPv4 sender */
        }
        if (r >= 0 && r < SENDERS && cookie[r] != c) {
          abort(); /* a stale or forged cookie named a sender */
        }
      }
      break;
    }
    uint64_t evicted = dlcp_agg_peers_evicted(p);
    if (evicted != (fresh > cap ? fresh - cap : 0)) {
      abort();
    }
  }
  for (uint32_t x = 0; x < SENDERS; x++) {
    if (pinned[x] && resolve(p, cookie[x]) != (int)x) {
      abort();
    }
  }
  dlcp_agg_peers_del(p);
  return 0;
}
