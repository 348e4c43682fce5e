/*
 * net.c: socket helpers.  The read/write loops wait with poll() on an
 * absolute CLOCK_MONOTONIC deadline, retrying after EINTR with the time
 * that is left, so a slow or silent peer turns into DLCP_ERR_TIMEOUT
 * instead of a hang, and a signal cannot stretch the wait.
 */
#include "rt/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <net/if.h>

#include "rt/clock.h"

int dlcp_net_resolve(dlcp_sockaddr *addr, const char *host, uint16_t port,
                     int socktype, dlcp_errbuf *eb) {
  struct addrinfo hints;
  struct addrinfo *res = NULL;
  struct addrinfo *it;
  struct addrinfo *pick = NULL;
  char portstr[8];
  int rv;

  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
  rv = getaddrinfo(host, portstr, &hints, &res);
  if (rv != 0) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG, "cannot resolve host '%s': %s",
                           host, gai_strerror(rv));
  }
  /* Prefer IPv4: "localhost" resolves to ::1 first on some systems while
   * the server may only listen on 127.0.0.1. */
  for (it = res; it != NULL; it = it->ai_next) {
    if (it->ai_family == AF_INET) {
      pick = it;
      break;
    }
    if (pick == NULL && it->ai_family == AF_INET6) {
      pick = it;
    }
  }
  if (pick == NULL || pick->ai_addrlen > sizeof(*addr)) {
    freeaddrinfo(res);
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "host '%s' has no IPv4 or IPv6 address", host);
  }
  memset(addr, 0, sizeof(*addr));
  memcpy(addr, pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  return 0;
}

int dlcp_sockaddr_parse(dlcp_sockaddr *a, const char *ip, uint16_t port) {
  memset(a, 0, sizeof(*a));
  if (inet_pton(AF_INET, ip, &a->in.sin_addr) == 1) {
    a->in.sin_family = AF_INET;
    a->in.sin_port = htons(port);
    return 0;
  }
  if (inet_pton(AF_INET6, ip, &a->in6.sin6_addr) == 1) {
    a->in6.sin6_family = AF_INET6;
    a->in6.sin6_port = htons(port);
    return 0;
  }
  return -1;
}

bool dlcp_sockaddr_is_loopback(const dlcp_sockaddr *a) {
  if (a->sa.sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
  }
  return (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
}

int dlcp_net_tclass_level(int family) {
  return family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
}

int dlcp_net_tclass_opt(int family) {
  return family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
}

int dlcp_net_recv_tclass_opt(int family) {
  return family == AF_INET6 ? IPV6_RECVTCLASS : IP_RECVTOS;
}

int dlcp_net_tclass_of(const struct cmsghdr *c) {
  /* IPv4 reports the byte itself, IPv6 an int. */
  if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
      c->cmsg_len >= CMSG_LEN(1)) {
    uint8_t tos;
    memcpy(&tos, CMSG_DATA(c), 1);
    return tos;
  }
  if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
      c->cmsg_len >= CMSG_LEN(sizeof(int))) {
    int tclass;
    memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
    return tclass & 0xff;
  }
  return -1;
}

int dlcp_net_ip_header_len(int family) {
  return family == AF_INET6 ? 40 : 20;
}

int dlcp_net_path_mtu(const dlcp_sockaddr *to, int fallback) {
  int family = to->sa.sa_family;
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int mtu = fallback;
  if (fd < 0) {
    return fallback;
  }
  socklen_t len = sizeof(mtu);
  if (connect(fd, &to->sa, dlcp_sockaddr_len(to)) != 0 ||
      getsockopt(fd, family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
                 family == AF_INET6 ? IPV6_MTU : IP_MTU, &mtu, &len) != 0) {
    mtu = fallback;
  }
  close(fd);
  return mtu;
}

const char *dlcp_net_addr_format(char *buf, size_t buflen,
                                 const struct sockaddr *sa) {
  char host[INET6_ADDRSTRLEN];
  if (buflen == 0) {
    return buf;
  }
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(buf, buflen, "%s:%u", host, (unsigned)ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 =
        (const struct sockaddr_in6 *)(const void *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(buf, buflen, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
  } else {
    snprintf(buf, buflen, "<address family %d>", (int)sa->sa_family);
  }
  return buf;
}

int dlcp_net_split_host_port(const char *s, char *host, size_t hostlen,
                             uint16_t *port) {
  const char *colon = strrchr(s, ':');
  const char *name = s;
  size_t namelen = colon != NULL ? (size_t)(colon - s) : 0;
  char *end;
  unsigned long p;

  if (namelen >= 2 && s[0] == '[' && s[namelen - 1] == ']') {
    name++;
    namelen -= 2;
  } else if (memchr(s, ':', namelen) != NULL) {
    return -1; /* an IPv6 address without brackets */
  }
  if (namelen == 0 || namelen >= hostlen) {
    return -1;
  }
  errno = 0;
  p = strtoul(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || colon[1] == '-' ||
      p == 0 || p > 65535) {
    return -1;
  }
  memcpy(host, name, namelen);
  host[namelen] = '\0';
  *port = (uint16_t)p;
  return 0;
}

uint16_t dlcp_net_addr_port(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
  }
  if (sa->sa_family == AF_INET6) {
    return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
  }
  return 0;
}

int dlcp_net_set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return -errno;
  }
  return 0;
}

/* wait_fd waits until |fd| is ready for |events| or |deadline| passes.
 * Returns 0 when ready (or in error state: the next syscall reports it),
 * DLCP_ERR_TIMEOUT, or -errno. */
static int wait_fd(int fd, short events, dlcp_tstamp deadline) {
  struct pollfd pfd;
  int n;
  for (;;) {
    pfd.fd = fd;
    pfd.events = events;
    pfd.revents = 0;
    n = poll(&pfd, 1, dlcp_rt_poll_timeout(deadline));
    if (n > 0) {
      return 0;
    }
    if (n == 0) {
      return DLCP_ERR_TIMEOUT;
    }
    if (errno != EINTR) {
      return -errno;
    }
  }
}

int dlcp_net_write_all(int fd, const void *buf, size_t len,
                       dlcp_tstamp deadline) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rv = wait_fd(fd, POLLOUT, deadline);
      if (rv != 0) {
        return rv;
      }
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) {
      return DLCP_ERR_PEER_CLOSED;
    }
    return -errno;
  }
  return 0;
}

int dlcp_net_read_all(int fd, void *buf, size_t len, dlcp_tstamp deadline) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) {
      return DLCP_ERR_PEER_CLOSED;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rv = wait_fd(fd, POLLIN, deadline);
      if (rv != 0) {
        return rv;
      }
      continue;
    }
    if (errno == ECONNRESET) {
      return DLCP_ERR_PEER_CLOSED;
    }
    return -errno;
  }
  return 0;
}

void dlcp_net_set_buffers(int fd, int rcv, int snd) {
  if (rcv > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) != 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
  }
  if (snd > 0 &&
      setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) != 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
  }
}

int dlcp_net_count_drops(int fd) {
  int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on)) == 0 ? 0
                                                                       : -errno;
}

/* cmsg_find copies the data of message |m|'s ancillary datum |level|,
 * |type| (at least |len| bytes) into |out| and returns true, or returns
 * false if |m| carries none. */
static bool cmsg_find(const struct msghdr *m, int level, int type, void *out,
                      size_t len) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL;
       c = CMSG_NXTHDR((struct msghdr *)(uintptr_t)m, c)) {
    if (c->cmsg_level == level && c->cmsg_type == type &&
        c->cmsg_len >= CMSG_LEN(len)) {
      memcpy(out, CMSG_DATA(c), len);
      return true;
    }
  }
  return false;
}

uint32_t dlcp_net_note_drops(dlcp_net_drops *d, const struct msghdr *m) {
  uint32_t count;
  if (!cmsg_find(m, SOL_SOCKET, SO_RXQ_OVFL, &count, sizeof(count))) {
    return 0;
  }
  uint32_t grew = count - d->last;
  d->total += grew;
  d->last = count;
  return grew;
}

uint8_t dlcp_net_ecn_of(const struct msghdr *m) {
  if (m->msg_flags & MSG_CTRUNC) {
    return 0;
  }
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL;
       c = CMSG_NXTHDR((struct msghdr *)(uintptr_t)m, c)) {
    int tclass = dlcp_net_tclass_of(c);
    if (tclass >= 0) {
      return (uint8_t)(tclass & 3);
    }
  }
  return 0;
}

bool dlcp_net_gso_refused(int err) {
  return err == EINVAL || err == ENOPROTOOPT || err == EIO || err == EMSGSIZE;
}

size_t dlcp_net_gso_run(const struct iovec *iov, size_t n) {
  size_t count = 1, seg = iov[0].iov_len, bytes = seg;
  while (count < n && count < DLCP_NET_GSO_MAX &&
         iov[count - 1].iov_len == seg && iov[count].iov_len <= seg &&
         bytes + iov[count].iov_len <= DLCP_NET_GSO_BYTES) {
    bytes += iov[count].iov_len;
    count++;
  }
  return count;
}

struct cmsghdr *dlcp_net_put_cmsg(struct cmsghdr *c, int level, int type,
                                  const void *data, size_t len) {
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(len);
  memcpy(CMSG_DATA(c), data, len);
  return (struct cmsghdr *)(void *)((char *)c + CMSG_SPACE(len));
}

void dlcp_net_gso_message(struct msghdr *m, const dlcp_sockaddr *name,
                          struct iovec *iov, size_t count, int tos, void *ctl) {
  memset(m, 0, sizeof(*m));
  m->msg_name = (void *)(uintptr_t)name;
  m->msg_namelen = name ? dlcp_sockaddr_len(name) : 0;
  int family = name ? name->sa.sa_family : AF_INET;
  m->msg_iov = iov;
  m->msg_iovlen = count;
  if (tos == 0 && count < 2) {
    return;
  }
  struct cmsghdr *c = ctl;
  if (tos != 0) {
    c = dlcp_net_put_cmsg(c, dlcp_net_tclass_level(family),
                          dlcp_net_tclass_opt(family), &tos, sizeof(tos));
  }
  if (count > 1) {
    uint16_t seg = (uint16_t)iov[0].iov_len;
    c = dlcp_net_put_cmsg(c, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
  }
  m->msg_control = ctl;
  m->msg_controllen = (size_t)((char *)c - (char *)ctl);
}

size_t dlcp_net_gro_segment(const struct msghdr *m, size_t len) {
  int size;
  if (cmsg_find(m, SOL_UDP, UDP_GRO, &size, sizeof(size))) {
    return size > 0 && (size_t)size < len ? (size_t)size : len;
  }
  return len;
}

/* The kernel's range of ephemeral ports (what connect() and bind to port 0
 * hand out), from procfs; the default range if it cannot be read. */
static void ephemeral_range(unsigned *lo, unsigned *hi) {
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  *lo = 32768;
  *hi = 60999;
  if (f != NULL) {
    unsigned a;
    unsigned b;
    if (fscanf(f, "%u %u", &a, &b) == 2 && a <= b && b <= 65535) {
      *lo = a;
      *hi = b;
    }
    fclose(f);
  }
}

/* try_bind binds a fresh TCP socket to |addr| at |port| (0: the kernel's
 * choice) and returns the port it got, or -errno. */
static int try_bind(const dlcp_sockaddr *addr, uint16_t port) {
  dlcp_sockaddr a = *addr;
  struct sockaddr_storage bound;
  socklen_t boundlen = sizeof(bound);
  int rv;
  int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -errno;
  }
  a.in.sin_port = htons(port); /* at one offset in both families */
  if (bind(fd, &a.sa, dlcp_sockaddr_len(&a)) != 0 ||
      getsockname(fd, (struct sockaddr *)&bound, &boundlen) != 0) {
    rv = -errno;
  } else {
    rv = dlcp_net_addr_port((struct sockaddr *)&bound);
  }
  close(fd);
  return rv;
}

int dlcp_net_free_port(const char *host, uint16_t *port, dlcp_errbuf *eb) {
  /* A port outside the ephemeral range cannot be taken by some other
   * socket's connect() between this check and the caller's bind, which is
   * what bind to port 0 alone risks on a busy host (a rank taking a second
   * to start leaves a wide window).  Only an explicit bind to the same
   * port can still collide. */
  enum { LOWEST = 10000, TRIES = 64 };
  dlcp_sockaddr addr;
  unsigned lo;
  unsigned hi;
  uint32_t r;
  int rv = dlcp_net_resolve(&addr, host, 0, SOCK_STREAM, eb);
  if (rv != 0) {
    return rv;
  }
  ephemeral_range(&lo, &hi);
  if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
    r = (uint32_t)getpid();
  }
  for (int i = 0; i < TRIES; i++) {
    /* The ports from LOWEST to 65535 outside [lo, hi]. */
    unsigned below = lo > LOWEST ? lo - LOWEST : 0;
    unsigned above = hi < 65535 ? 65535 - hi : 0;
    if (below + above == 0) {
      break;
    }
    r = r * 1664525u + 1013904223u;
    unsigned k = (r >> 8) % (below + above);
    rv = try_bind(&addr,
                  (uint16_t)(k < below ? LOWEST + k : hi + 1 + (k - below)));
    if (rv > 0) {
      *port = (uint16_t)rv;
      return 0;
    }
  }
  rv = try_bind(&addr, 0);
  if (rv < 0) {
    return dlcp_errbuf_set(eb, rv, "cannot find a free port on %s: %s", host,
                           strerror(-rv));
  }
  *port = (uint16_t)rv;
  return 0;
}

/* The name of the interface that holds the address |a|, into |name|
 * (IF_NAMESIZE bytes); false if none does. */
static bool interface_of(const dlcp_sockaddr *a, char *name) {
  struct ifaddrs *all;
  if (getifaddrs(&all) != 0) {
    return false;
  }
  bool found = false;
  for (struct ifaddrs *i = all; i && !found; i = i->ifa_next) {
    dlcp_sockaddr held;
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
                         i->ifa_addr->sa_family != AF_INET6)) {
      continue;
    }
    memcpy(&held, i->ifa_addr,
           i->ifa_addr->sa_family == AF_INET6 ? sizeof(held.in6)
                                              : sizeof(held.in));
    if (dlcp_sockaddr_same_host(&held, a)) {
      snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
      found = true;
    }
  }
  freeifaddrs(all);
  return found;
}

double dlcp_net_path_rate_gbps(const dlcp_sockaddr *to, double local_gbps,
                               double unknown_gbps) {
  if (dlcp_sockaddr_is_loopback(to)) {
    return local_gbps;
  }
  /* The route's source address names the interface: a connected UDP
   * socket sends nothing. */
  int fd = socket(to->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return unknown_gbps;
  }
  dlcp_sockaddr self;
  socklen_t len = sizeof(self);
  bool routed = connect(fd, &to->sa, dlcp_sockaddr_len(to)) == 0 &&
                getsockname(fd, &self.sa, &len) == 0;
  close(fd);
  if (!routed) {
    return unknown_gbps;
  }
  if (dlcp_sockaddr_same_host(&self, to)) {
    return local_gbps;
  }
  char name[IF_NAMESIZE];
  if (!interface_of(&self, name)) {
    return unknown_gbps;
  }
  if (strcmp(name, "lo") == 0) {
    return local_gbps;
  }
  char path[64 + IF_NAMESIZE];
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
  FILE *f = fopen(path, "re");
  long mbps = 0;
  if (f) {
    if (fscanf(f, "%ld", &mbps) != 1) {
      mbps = 0;
    }
    fclose(f);
  }
  return mbps > 0 ? (double)mbps / 1000.0 : unknown_gbps;
}
