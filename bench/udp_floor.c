/*
 * bench-udp_floor: what the kernel's UDP path alone costs per datagram on
 * this machine, and so the most gradient an aggregation switch over kernel
 * sockets (dlcp-switch) could absorb per core, whatever its own work.
 *
 *   build/bin/bench-udp_floor [--bytes B] [--count N] [--batch K] [--gso G]
 *
 * A child process sends |count| datagrams of |bytes| bytes to a socket of
 * the parent on loopback with sendmmsg() in batches of |batch| (pausing
 * 20 us between batches so the receiver keeps up); the parent reads them
 * with recvmmsg() in batches of the same size.  Each side's CPU time
 * (user + system, getrusage) over its datagrams is the floor per datagram
 * of that direction; on loopback the sender's also carries the receive
 * path's softirq work.  Per contribution the switch receives the
 * contribution and its ACK and sends one result, so its CPU per
 * contribution is at least 2 receives + 1 send, and the ceiling printed is
 * its gradient (the datagram less the 32-byte INA header) * 8 / that.  Datagrams lost to a full socket buffer are reported.
 *
 * --gso G measures the kernel's segmentation offloads instead: each message
 * the sender passes carries G datagrams as one buffer with UDP_SEGMENT (the
 * kernel cuts it into datagrams of |bytes|, or on loopback passes it on
 * whole), and the receiver asks for UDP_GRO, so a recvmmsg slot may hold
 * several datagrams of one sender (counted from the segment size the
 * kernel reports).  The figures stay per datagram.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 256
#define MAX_BYTES 65507

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

typedef struct opts {
  long bytes, count, batch, gso;
} opts;

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static int parse(int argc, char **argv, opts *o) {
  o->bytes = 1024 + 32; /* 1 KiB of gradient and the INA header */
  o->count = 1000000;
  o->batch = 64;
  o->gso = 1;
  for (int i = 1; i < argc; i++) {
    long *dst = strcmp(argv[i], "--bytes") == 0   ? &o->bytes
                : strcmp(argv[i], "--count") == 0 ? &o->count
                : strcmp(argv[i], "--batch") == 0 ? &o->batch
                : strcmp(argv[i], "--gso") == 0   ? &o->gso
                                                  : NULL;
    char *end;
    if (dst == NULL || i + 1 >= argc) {
      fprintf(stderr,
              "usage: %s [--bytes B] [--count N] [--batch K] [--gso G]\n",
              argv[0]);
      return -1;
    }
    *dst = strtol(argv[++i], &end, 10);
    if (*end != '\0' || *dst <= 0) {
      fprintf(stderr, "%s: %s: expected a positive number\n", argv[i - 1],
              argv[i]);
      return -1;
    }
  }
  if (o->bytes > MAX_BYTES || o->batch > MAX_BATCH ||
      o->bytes * o->gso > MAX_BYTES || o->gso > 64) {
    fprintf(stderr, "--bytes at most %d, --batch at most %d, --gso at most "
            "64 and --bytes x --gso at most %d\n", MAX_BYTES, MAX_BATCH,
            MAX_BYTES);
    return -1;
  }
  return 0;
}

/* With --gso: every message of |m| carries o->gso datagrams as one
 * UDP_SEGMENT send (|ctl|: one control buffer per message). */
static void set_segments(const opts *o, struct mmsghdr *m, char (*ctl)[64]) {
  for (long i = 0; i < o->batch; i++) {
    struct msghdr *h = &m[i].msg_hdr;
    h->msg_iov->iov_len = (size_t)(o->bytes * o->gso);
    h->msg_control = ctl[i];
    h->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
    struct cmsghdr *c = CMSG_FIRSTHDR(h);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = (uint16_t)o->bytes;
    memcpy(CMSG_DATA(c), &seg, sizeof(seg));
  }
}

/* The datagrams message |h| (|len| bytes) holds: the GRO segment size the
 * kernel reported cuts it, else one. */
static long datagrams_in(struct msghdr *h, unsigned len) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL;
       c = CMSG_NXTHDR(h, c)) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int seg;
      memcpy(&seg, CMSG_DATA(c), sizeof(seg));
      return seg > 0 ? ((long)len + seg - 1) / seg : 1;
    }
  }
  return 1;
}

/* The child: sends o->count datagrams to |to| and prints its CPU per
 * datagram as "send NS" (its stdout is a pipe to the parent). */
static int sender(const opts *o, const struct sockaddr_in *to,
                  struct mmsghdr *m) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const struct timespec pause = {0, 20000};
  long sent = 0;
  if (s < 0 || connect(s, (const struct sockaddr *)to, sizeof(*to)) != 0) {
    perror("bench-udp_floor: sender socket");
    return 1;
  }
  static char ctl[MAX_BATCH][64];
  if (o->gso > 1) {
    set_segments(o, m, ctl);
  }
  double c0 = cpu_seconds();
  while (sent < o->count) {
    long left = (o->count - sent + o->gso - 1) / o->gso;
    int k = sendmmsg(s, m, (unsigned)(left < o->batch ? left : o->batch), 0);
    if (k < 0 && errno != EINTR && errno != ENOBUFS) {
      perror("bench-udp_floor: sendmmsg");
      return 1;
    }
    sent += k > 0 ? k * o->gso : 0;
    nanosleep(&pause, NULL);
  }
  printf("send %.0f\n", (cpu_seconds() - c0) / (double)sent * 1e9);
  return fflush(stdout) == 0 ? 0 : 1; /* the child leaves by _exit */
}

int main(int argc, char **argv) {
  opts o;
  static char bufs[MAX_BATCH][MAX_BYTES];
  static char rctl[MAX_BATCH][64];
  static struct mmsghdr m[MAX_BATCH];
  static struct iovec io[MAX_BATCH];
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  int big = 16 << 20;
  int out[2];

  if (parse(argc, argv, &o) != 0) {
    return 2;
  }
  for (long i = 0; i < o.batch; i++) {
    io[i].iov_base = bufs[i];
    io[i].iov_len = (size_t)o.bytes;
    m[i].msg_hdr.msg_iov = &io[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  int r = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct timeval idle = {1, 0};
  if (r < 0 || setsockopt(r, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)) != 0 ||
      setsockopt(r, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle)) != 0 ||
      bind(r, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      getsockname(r, (struct sockaddr *)&a, &alen) != 0 || pipe(out) != 0) {
    perror("bench-udp_floor: receiver socket");
    return 1;
  }
  int one = 1;
  if (o.gso > 1 && setsockopt(r, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
    perror("bench-udp_floor: UDP_GRO");
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench-udp_floor: fork");
    return 1;
  }
  if (pid == 0) {
    close(out[0]);
    if (dup2(out[1], STDOUT_FILENO) < 0) {
      _exit(1);
    }
    _exit(sender(&o, &a, m));
  }
  close(out[1]);
  /* Read until the sender is done and nothing came for a second. */
  double c0 = cpu_seconds();
  long got = 0;
  long calls = 0;
  for (;;) {
    for (long i = 0; i < o.batch; i++) {
      io[i].iov_len = MAX_BYTES;
      m[i].msg_hdr.msg_control = rctl[i];
      m[i].msg_hdr.msg_controllen = sizeof(rctl[i]);
    }
    int k = recvmmsg(r, m, (unsigned)o.batch, 0, NULL);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      break;
    }
    for (int i = 0; i < k; i++) {
      got += datagrams_in(&m[i].msg_hdr, m[i].msg_len);
    }
    calls++;
  }
  double recv_ns = got > 0 ? (cpu_seconds() - c0) / (double)got * 1e9 : 0;
  char line[64] = {0};
  ssize_t n = read(out[0], line, sizeof(line) - 1);
  int st = 0;
  waitpid(pid, &st, 0);
  double send_ns = 0;
  if (n <= 0 || sscanf(line, "send %lf", &send_ns) != 1 || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0 || got == 0) {
    fprintf(stderr, "bench-udp_floor: the sender failed\n");
    return 1;
  }
  double per_contrib = 2 * recv_ns + send_ns;
  printf("%ld datagrams of %ld B in batches of %ld%s: %ld received (%ld "
         "lost to a full buffer)\n",
         o.count, o.bytes, o.batch, o.gso > 1 ? " with GSO/GRO" : "", got,
         o.count - got);
  printf("CPU per datagram: receive %.0f ns (%.1f datagrams a recvmmsg), "
         "send %.0f ns (incl. loopback delivery)\n",
         recv_ns, (double)got / (double)(calls ? calls : 1), send_ns);
  long gradient = o.bytes > 32 ? o.bytes - 32 : 0;
  printf("kernel floor per contribution (2 receives + 1 send): %.0f ns; "
         "ceiling %.2f Gbit/s of gradient per core at %ld B a datagram\n",
         per_contrib, (double)gradient * 8 / per_contrib, gradient);
  return 0;
}
