/*
 * dlcp-switch: the software aggregation switch daemon (UDP).  It runs the
 * sans-I/O core src/proto/agg, one instance per worker thread.
 *
 *   dlcp-switch [--bind ADDR] [--port N] [--threads T] [--mem BYTES]
 *               [--block-elems N] [--policy shared|static]
 *               [--static-parts N] [--max-jobs N] [--resend-us N]
 *               [--lease-s N] [--idle-us N] [--batch N] [--stats-s N]
 *               [--parent ADDR:PORT]... [--gso 0|1]
 *
 * Sharding.  Every thread owns its own socket, bound with SO_REUSEPORT to
 * the same address, and its own aggregator pool (--mem divided by T).  A
 * classic BPF program attached to the reuseport group picks the socket by
 * the low byte of the packet's group index (byte 16 of the UDP payload)
 * modulo T, so all packets of one group (contributions and ACKs) reach the
 * thread that holds its aggregators, and threads never share state.  No
 * other process shares the port (see port_shared).
 *
 * The loop of a thread: wait (poll) until a datagram arrives or the core's
 * deadline passes, read a batch with recvmmsg (the ECN codepoint of each
 * from IP_RECVTOS), hand each to the core, fire its timers, and send what
 * it produced in batches with sendmmsg, each result with the OR-ed ECN
 * codepoint set through an IP_TOS control message.  Every packet is
 * validated by the core; nothing from the network is trusted.
 *
 * Segmentation offloads (--gso 1, the default).  The kernel's cost per
 * datagram bounds a software switch long before aggregation does
 * (docs/ina.md: 5.8 us of system time per contribution against 0.4 us of
 * aggregation).  So the batch's results are grouped by destination (a
 * group's completion answers every worker in turn) and each run to one
 * worker goes as one UDP_SEGMENT message the kernel cuts into datagrams;
 * and the sockets set UDP_GRO, so runs a host sent the same way arrive
 * as one buffer, split here by the segment size the kernel reports.  If
 * the kernel refuses UDP_SEGMENT, the thread falls back to one datagram
 * a message.  (On loopback a run is steered to a thread as a whole, by its
 * first datagram, and so is a run the receiving host's GRO merged from one
 * sender's datagrams, whatever their groups.)
 *
 * A datagram that reaches a thread other than its group's (the rest of a
 * run steered by its first, see above) is handed to that thread through a
 * queue and an eventfd, with its sender's address and codepoint, so every
 * group is aggregated in one pool whatever the path merged on the way: a
 * thread's core does not know which groups are its own, and two threads
 * each holding part of a group's contributions would both wait for the
 * rest until the hosts re-sent them one by one.
 *
 * Chains (CINA) and trees (MTINA, PANAMA's tree per spine).  With --parent,
 * the switch is a link of a chain (or a leaf of a tree) of switches: the
 * jobs whose contributions name a chain place send each group complete
 * here to ADDR:PORT as one contribution and take the final sum it returns
 * (src/proto/agg.h, "Chains").  Given T times, the switch is a leaf of T
 * trees, group g going up tree g mod T to the T-th parent given, as the
 * hosts deal them (DLCP_INA_TREES).  A parent answers the address this
 * switch sends from, so --parent needs
 * --bind: the address the parent can reach (its rack's host-facing address
 * on the testbed).  The parent's answers about a group come back to the thread
 * that holds it here, as every datagram is steered by its group number.
 *
 * Prints "dlcp-switch: listening on ADDR:PORT ..." on stdout once every
 * socket is bound (scripts wait for it; --port 0 picks a free port), the
 * counters every --stats-s seconds (0 = only at exit) on stderr, and exits
 * cleanly with the final counters on SIGINT or SIGTERM.
 *
 * IP versions.  The switch speaks the version of --bind (0.0.0.0 by
 * default; :: or an IPv6 address for IPv6, the socket IPv6-only), and its
 * parents must be of the same version: run one switch per version.  The
 * core names a peer by a cookie (src/rt/agg_peers.h): an IPv4 address
 * and port are the cookie, an IPv6 one is interned in each thread's table
 * of bounded size.
 */
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto/agg.h"
#include "rt/agg_peers.h"
#include "rt/net.h"

#define MAX_THREADS 64
#define MAX_BATCH 256
/* Ancillary data of one message: IP_TOS, UDP_SEGMENT or UDP_GRO, and
 * the socket's drop count. */
#define CTL_SPACE (DLCP_NET_GSO_CTL + DLCP_NET_DROPS_CTL)
/* A receive slot with UDP_GRO: a run of datagrams the kernel kept
 * together, up to the largest UDP payload. */
#define GRO_SLOT 65536u
/* Destinations (address and ECN codepoint) a send batch is grouped by;
 * the datagrams of any further ones go out in the core's order. */
#define MAX_DESTS 32
/* Addresses a thread remembers as too narrow for its GSO runs; a further
 * one has its runs refused and sent apart batch by batch. */
#define MAX_APART 64

typedef struct opts {
  dlcp_sockaddr bind_addr; /* its port is unused: see |port| */
  uint16_t port;
  uint32_t threads;
  uint32_t batch;
  uint32_t stats_s;
  bool gso; /* UDP_SEGMENT sends and UDP_GRO receives */
  dlcp_agg_config cfg; /* parent_addr: each thread's cookies of |parents| */
  dlcp_sockaddr parents[DLCP_AGG_MAX_TREES];
  uint32_t nparents;
} opts;

/* Datagrams handed to a thread and not yet taken; beyond this many the
 * next are dropped (and counted): the hosts re-send them. */
#define HANDOFF_MAX 4096u

/* A datagram handed from the thread that read it to its group's. */
typedef struct handed {
  struct handed *next;
  dlcp_sockaddr from;
  uint8_t ecn;
  size_t len;
  uint8_t data[];
} handed;

typedef struct worker {
  pthread_t tid;
  uint32_t index;
  int fd;
  const opts *o;
  struct worker *all; /* every thread, to hand datagrams to */
  dlcp_agg *agg;
  dlcp_agg_peers *peers; /* the core's cookies of this thread's peers */
  uint64_t stale;        /* answers to a sender evicted from |peers| */
  pthread_mutex_t lock;
  dlcp_agg_stats published; /* under lock */
  uint64_t published_evicted, published_stale; /* under lock */
  uint64_t published_unsent;                   /* under lock */
  uint64_t published_rx_dropped;               /* under lock */
  bool gso;                 /* the kernel has not refused UDP_SEGMENT */
  /* Address cookies whose GSO runs the kernel refused as longer than the
   * path's MTU: their results go datagram by datagram from then on. */
  uint64_t apart[MAX_APART];
  uint32_t napart;
  uint64_t unsent;    /* datagrams the kernel refused for their address */
  bool said_unsent;   /* a refusal has been said on stderr */
  /* Datagrams the kernel dropped at this thread's socket, its buffer
   * full: lost at the switch's host, the thread not reading fast
   * enough. */
  dlcp_net_drops rx_drops;
  int error;
  uint32_t reported; /* invalid datagrams reported on stderr */
  /* Datagrams other threads read for this one's groups: a queue under
   * qlock, and an eventfd that wakes the thread when it fills from
   * empty. */
  int wake_fd;
  pthread_mutex_t qlock;
  handed *qhead, *qtail;
  uint32_t qlen;
  uint64_t handed_in, handoff_drops; /* under qlock */
} worker;

/* Set by a signal, read by every worker thread: an atomic (lock-free,
 * so safe in a handler), where volatile sig_atomic_t orders nothing
 * between threads. */
static atomic_int stopping;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a lock-free flag for the handler");

static void on_signal(int sig) {
  (void)sig;
  atomic_store(&stopping, 1);
}

static dlcp_tstamp now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (dlcp_tstamp)ts.tv_sec * 1000000000u + (dlcp_tstamp)ts.tv_nsec;
}

/* ---- options ------------------------------------------------------------ */

static int parse_u64(const char *name, const char *s, uint64_t lo,
                     uint64_t hi, uint64_t *out) {
  char *end;
  unsigned long long v;
  uint64_t mult = 1;

  errno = 0;
  v = strtoull(s, &end, 10);
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
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' ||
      v * mult < lo || v * mult > hi) {
    fprintf(stderr,
            "dlcp-switch: %s: expected a number in [%llu, %llu] (K/M/G "
            "suffixes allowed), got '%s'\n",
            name, (unsigned long long)lo, (unsigned long long)hi, s);
    return -1;
  }
  *out = v * mult;
  return 0;
}

/* Parses --parent's "A.B.C.D:PORT" or "[IPV6]:PORT" into |sa|; 0, or -1
 * with the reason on stderr. */
static int parse_parent(const char *v, dlcp_sockaddr *sa) {
  char ip[INET6_ADDRSTRLEN];
  uint16_t port;

  if (dlcp_net_split_host_port(v, ip, sizeof(ip), &port) != 0) {
    fprintf(stderr,
            "dlcp-switch: --parent: expected ADDR:PORT or [IPV6]:PORT (a "
            "port from 1 to 65535), got '%s'\n",
            v);
    return -1;
  }
  if (dlcp_sockaddr_parse(sa, ip, port) != 0) {
    fprintf(stderr,
            "dlcp-switch: --parent: not an IPv4 or IPv6 address: "
            "'%s'\n",
            ip);
    return -1;
  }
  return 0;
}

static const char kSynopsis[] =
    "usage: dlcp-switch [--bind ADDR] [--port N] [--threads T] "
    "[--mem BYTES]\n"
    "                   [--block-elems N] [--policy shared|static] "
    "[--static-parts N]\n"
    "                   [--max-jobs N] [--resend-us N] [--lease-s N] "
    "[--idle-us N]\n"
    "                   [--batch N] [--stats-s N] [--parent ADDR:PORT]... "
    "[--gso 0|1]\n";

static void help(void) {
  printf("%s"
         "\n"
         "The software aggregation switch (docs/ina.md): workers' "
         "contributions in,\n"
         "each group's sum back to every worker of the job.\n"
         "\n"
         "  --bind ADDR          IPv4 (default 0.0.0.0) or IPv6 (::) address "
         "to listen on\n"
         "  --port N             UDP port, 0 for a free one (default 7070)\n"
         "  --threads T          worker threads, each with its socket and "
         "its share of\n"
         "                       the pool, 1..%u (default 1)\n"
         "  --mem BYTES          aggregator pool, all threads (default 1 "
         "MiB)\n"
         "  --block-elems N      int32 sums per aggregator, 1..%u (default "
         "%u)\n"
         "  --policy P           shared: jobs share the pool by demand "
         "(default);\n"
         "                       static: fixed equal partitions\n"
         "  --static-parts N     partitions of the static policy (default: "
         "max-jobs, at\n"
         "                       most 4)\n"
         "  --max-jobs N         jobs at once, 1..65536 (default 64)\n"
         "  --resend-us N        a complete group's result is sent again to "
         "workers that\n"
         "                       have not acknowledged it after this long "
         "(default 5000)\n"
         "  --lease-s N          an idle incomplete group or job is "
         "reclaimed after this\n"
         "                       long (default 10)\n"
         "  --idle-us N          a job without aggregators silent this long "
         "leaves the\n"
         "                       pool's shares (default 1000)\n"
         "  --batch N            datagrams per system call, 1..%u (default "
         "64)\n"
         "  --stats-s N          print the counters on stderr every N s "
         "(default 0:\n"
         "                       only at exit)\n"
         "  --parent ADDR:PORT   the next switch of a chain, or the root of "
         "a tree (once\n"
         "                       per tree); needs --bind; IPv6 as "
         "[ADDR]:PORT\n"
         "  --gso 0|1            segmentation offloads for results (default "
         "1)\n"
         "  -h, --help           show this help\n"
         "\n"
         "Prints \"dlcp-switch: listening on ADDR:PORT ...\" once bound; "
         "exits on\n"
         "SIGINT or SIGTERM with its final counters.\n",
         kSynopsis, MAX_THREADS, DLCP_AGG_MAX_BLOCK_ELEMS,
         DLCP_AGG_DEFAULT_BLOCK_ELEMS, MAX_BATCH);
}

static int parse_args(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  (void)dlcp_sockaddr_parse(&o->bind_addr, "0.0.0.0", 0);
  o->port = 7070;
  o->threads = 1;
  o->batch = 64;
  o->gso = true;
  dlcp_agg_config_default(&o->cfg);
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t x = 0;
    int rv = 0;

    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      help();
      exit(0);
    }
    if (v == NULL) {
      fprintf(stderr, "dlcp-switch: %s needs a value\n", a);
      return -1;
    }
    if (strcmp(a, "--bind") == 0) {
      if (dlcp_sockaddr_parse(&o->bind_addr, v, 0) != 0) {
        fprintf(stderr,
                "dlcp-switch: --bind: not an IPv4 or IPv6 address: "
                "'%s'\n",
                v);
        return -1;
      }
    } else if (strcmp(a, "--port") == 0) {
      rv = parse_u64(a, v, 0, 65535, &x);
      o->port = (uint16_t)x;
    } else if (strcmp(a, "--threads") == 0) {
      rv = parse_u64(a, v, 1, MAX_THREADS, &x);
      o->threads = (uint32_t)x;
    } else if (strcmp(a, "--batch") == 0) {
      rv = parse_u64(a, v, 1, MAX_BATCH, &x);
      o->batch = (uint32_t)x;
    } else if (strcmp(a, "--gso") == 0) {
      rv = parse_u64(a, v, 0, 1, &x);
      o->gso = x == 1;
    } else if (strcmp(a, "--stats-s") == 0) {
      rv = parse_u64(a, v, 0, 86400, &x);
      o->stats_s = (uint32_t)x;
    } else if (strcmp(a, "--mem") == 0) {
      rv = parse_u64(a, v, 1024, UINT64_C(1) << 36, &x);
      o->cfg.mem_bytes = x;
    } else if (strcmp(a, "--block-elems") == 0) {
      rv = parse_u64(a, v, 1, DLCP_AGG_MAX_BLOCK_ELEMS, &x);
      o->cfg.block_elems = (uint32_t)x;
    } else if (strcmp(a, "--max-jobs") == 0) {
      rv = parse_u64(a, v, 1, 65536, &x);
      o->cfg.max_jobs = (uint32_t)x;
    } else if (strcmp(a, "--static-parts") == 0) {
      rv = parse_u64(a, v, 1, 65536, &x);
      o->cfg.static_parts = (uint32_t)x;
    } else if (strcmp(a, "--resend-us") == 0) {
      rv = parse_u64(a, v, 1, 10000000, &x);
      o->cfg.resend_ns = x * 1000u;
    } else if (strcmp(a, "--lease-s") == 0) {
      rv = parse_u64(a, v, 1, 86400, &x);
      o->cfg.lease_ns = x * 1000000000u;
    } else if (strcmp(a, "--idle-us") == 0) {
      rv = parse_u64(a, v, 1, 86400000000u, &x);
      o->cfg.idle_ns = x * 1000u;
    } else if (strcmp(a, "--parent") == 0) {
      if (o->nparents == DLCP_AGG_MAX_TREES) {
        fprintf(stderr, "dlcp-switch: --parent: at most %u (one per "
                        "tree)\n", DLCP_AGG_MAX_TREES);
        return -1;
      }
      rv = parse_parent(v, &o->parents[o->nparents]);
      o->cfg.has_parent[o->nparents++] = true;
    } else if (strcmp(a, "--policy") == 0) {
      if (strcmp(v, "shared") == 0) {
        o->cfg.policy = DLCP_AGG_SHARED;
      } else if (strcmp(v, "static") == 0) {
        o->cfg.policy = DLCP_AGG_STATIC;
      } else {
        fprintf(stderr, "dlcp-switch: --policy: expected shared or static, "
                        "got '%s'\n", v);
        return -1;
      }
    } else {
      fprintf(stderr,
              "dlcp-switch: unknown option '%s' (see dlcp-switch "
              "--help)\n%s",
              a, kSynopsis);
      return -1;
    }
    if (rv != 0) {
      return -1;
    }
  }
  if (o->cfg.policy == DLCP_AGG_STATIC && o->cfg.static_parts == 1 &&
      o->cfg.max_jobs > 1) {
    o->cfg.static_parts = o->cfg.max_jobs < 4 ? o->cfg.max_jobs : 4;
  }
  o->cfg.ntrees = o->nparents > 1 ? o->nparents : 1;
  dlcp_sockaddr any, self = o->bind_addr;
  (void)dlcp_sockaddr_parse(
      &any, self.sa.sa_family == AF_INET6 ? "::" : "0.0.0.0", 0);
  if (o->nparents > 0 && dlcp_sockaddr_same_host(&o->bind_addr, &any)) {
    /* The parent answers the address our datagrams leave from, which the
     * kernel picks per route when we are bound to every address. */
    fprintf(stderr, "dlcp-switch: --parent needs --bind ADDR, the address "
                    "the parent reaches this switch at\n");
    return -1;
  }
  self.in.sin_port = htons(o->port);
  for (uint32_t t = 0; t < o->nparents; t++) {
    char buf[DLCP_NET_ADDRSTR_LEN];

    dlcp_net_addr_format(buf, sizeof(buf), &o->parents[t].sa);
    if (o->parents[t].sa.sa_family != self.sa.sa_family) {
      fprintf(stderr,
              "dlcp-switch: --parent %s: not of --bind's IP "
              "version (a switch speaks one: run one per version)\n",
              buf);
      return -1;
    }
    if (o->port != 0 && dlcp_sockaddr_equal(&o->parents[t], &self)) {
      /* Its partial sums would come back to it as a worker's. */
      fprintf(stderr, "dlcp-switch: --parent %s is this switch\n", buf);
      return -1;
    }
  }
  o->cfg.mem_bytes /= o->threads;
  return 0;
}

/* ---- sockets ------------------------------------------------------------ */

/* The payload byte the threads' sockets are chosen by: the group index's
 * low byte (agg_wire.h). */
#define STEER_BYTE 16u

/* Steers each datagram to socket (payload byte 16, the group's low byte)
 * mod T; short datagrams abort the program, which the kernel treats as
 * socket 0, where the core drops them as malformed. */
static int attach_steering(int fd, uint32_t threads) {
  struct sock_filter code[] = {
      {BPF_LD | BPF_B | BPF_ABS, 0, 0, STEER_BYTE},
      {BPF_ALU | BPF_MOD | BPF_K, 0, 0, threads},
      {BPF_RET | BPF_A, 0, 0, 0},
  };
  struct sock_fprog prog = {3, code};

  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                    sizeof(prog));
}

static int open_socket(const opts *o, uint16_t port, uint32_t index) {
  dlcp_sockaddr sa = o->bind_addr;
  int family = sa.sa.sa_family;
  int one = 1;
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (fd < 0) {
    perror("dlcp-switch: socket");
    return -1;
  }
  sa.in.sin_port = htons(port);
  dlcp_net_set_buffers(fd, 8 << 20, 8 << 20);
  (void)dlcp_net_count_drops(fd); /* reported as rx_dropped */
  if ((o->threads > 1 &&
       setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
      (family == AF_INET6 &&
       setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
      setsockopt(fd, dlcp_net_tclass_level(family),
                 dlcp_net_recv_tclass_opt(family), &one, sizeof(one)) != 0 ||
      (o->gso && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0)) {
    perror("dlcp-switch: setsockopt");
    close(fd);
    return -1;
  }
  if (bind(fd, &sa.sa, dlcp_sockaddr_len(&sa)) != 0) {
    char name[DLCP_NET_ADDRSTR_LEN];

    fprintf(stderr, "dlcp-switch: bind %s: %s\n",
            dlcp_net_addr_format(name, sizeof(name), &sa.sa), strerror(errno));
    close(fd);
    return -1;
  }
  if (index == 0 && o->threads > 1 && attach_steering(fd, o->threads) != 0) {
    perror("dlcp-switch: SO_ATTACH_REUSEPORT_CBPF");
    close(fd);
    return -1;
  }
  return fd;
}

/* |o|'s address with |port|, printed into |buf|. */
static const char *bind_name(const opts *o, uint16_t port, char *buf,
                             size_t len) {
  dlcp_sockaddr a = o->bind_addr;

  a.in.sin_port = htons(port);
  return dlcp_net_addr_format(buf, len, &a.sa);
}

/* The hexadecimal form /proc/net/udp{,6} gives |a|'s address in: each
 * 32-bit word of it as the host reads it. */
static void proc_hex(const dlcp_sockaddr *a, char *out, size_t len) {
  const uint8_t *b = a->sa.sa_family == AF_INET6
                         ? a->in6.sin6_addr.s6_addr
                         : (const uint8_t *)&a->in.sin_addr.s_addr;
  size_t words = a->sa.sa_family == AF_INET6 ? 4 : 1;

  out[0] = '\0';
  for (size_t i = 0; i < words; i++) {
    uint32_t w;

    memcpy(&w, b + 4 * i, sizeof(w));
    snprintf(out + 8 * i, len - 8 * i, "%08X", w);
  }
}

/* Whether a UDP socket other than the |n| of |fds| is bound to |port| on
 * |addr| (or where either address is the wildcard) in this network
 * namespace (/proc/net/udp, /proc/net/udp6 for IPv6, names each socket's
 * inode).  The threads' sockets share their port through SO_REUSEPORT,
 * which lets any socket of the same user with that option join them: the
 * kernel's choice for port 0 does not avoid such a port (of 1,000 sockets
 * bound so, 12 to 16 shared one with another), and a second switch given
 * the same --port would start too.  The kernel would then split the
 * datagrams between the two processes, so that a job's ranks reached
 * different switches and each refused the others' configuration.  Only
 * the switch's own family's table needs a look: the kernel groups
 * SO_REUSEPORT sockets of one family only, an IPv4 datagram prefers an
 * IPv4 socket to a dual-stack one (a dual-stack [::] socket beside two of
 * 0.0.0.0 on one port got none of 200 datagrams), and an IPv6 switch's
 * sockets are IPv6-only.  Returns 1, 0, or -1 if the table cannot be
 * read. */
static int port_shared(const dlcp_sockaddr *addr, uint16_t port, const int *fds,
                       uint32_t n) {
  bool v6 = addr->sa.sa_family == AF_INET6;
  FILE *f = fopen(v6 ? "/proc/net/udp6" : "/proc/net/udp", "r");
  char line[512], mine[33], any[33];
  int shared = 0;
  unsigned long ours[MAX_THREADS];

  proc_hex(addr, mine, sizeof(mine));
  memset(any, '0', strlen(mine));
  any[strlen(mine)] = '\0';
  for (uint32_t i = 0; i < n; i++) {
    struct stat st;

    ours[i] = fstat(fds[i], &st) == 0 ? (unsigned long)st.st_ino : 0;
  }

  if (f == NULL || fgets(line, sizeof(line), f) == NULL) { /* the header */
    if (f != NULL) {
      fclose(f);
    }
    return -1;
  }
  while (shared == 0 && fgets(line, sizeof(line), f) != NULL) {
    char laddr[33];
    unsigned int lport;
    unsigned long inode;
    bool own = false;

    /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
    if (sscanf(line,
               " %*u: %32[0-9A-F]:%4X %*[0-9A-F]:%*X %*X %*X:%*X %*X:%*X "
               "%*X %*u %*u %lu",
               laddr, &lport, &inode) != 3 ||
        lport != port ||
        (strcmp(laddr, mine) != 0 && strcmp(laddr, any) != 0 &&
         strcmp(mine, any) != 0)) {
      continue;
    }
    for (uint32_t i = 0; i < n; i++) {
      own |= ours[i] != 0 && ours[i] == inode; /* 0: fstat failed */
    }
    shared = !own;
  }
  fclose(f);
  return shared;
}

/* Binds every thread's socket to one port, |o|'s or, for 0, one the
 * kernel picks that no other process shares (see port_shared).  Returns
 * the port, or 0 with the reason on stderr. */
static uint16_t open_sockets(const opts *o, worker *ws) {
  int fds[MAX_THREADS];
  char name[DLCP_NET_ADDRSTR_LEN];

  for (int attempt = 0; attempt < 16; attempt++) {
    uint16_t port = o->port;
    uint32_t n = 0;
    int shared = 0;

    for (; n < o->threads; n++) {
      fds[n] = open_socket(o, port, n);
      if (fds[n] < 0) {
        break;
      }
      if (n == 0) {
        dlcp_sockaddr bound;
        socklen_t blen = sizeof(bound);

        getsockname(fds[0], &bound.sa, &blen);
        port = ntohs(bound.in.sin_port);
      }
    }
    if (n == o->threads && o->threads > 1) {
      shared = port_shared(&o->bind_addr, port, fds, n);
      if (shared < 0) {
        perror(o->bind_addr.sa.sa_family == AF_INET6
                   ? "dlcp-switch: /proc/net/udp6"
                   : "dlcp-switch: /proc/net/udp");
      } else if (shared > 0 && o->port != 0) {
        fprintf(stderr,
                "dlcp-switch: %s is bound by another process's socket "
                "too (SO_REUSEPORT would split the datagrams between "
                "them): choose another --port\n",
                bind_name(o, port, name, sizeof(name)));
      }
    }
    if (n == o->threads && shared == 0) {
      for (uint32_t i = 0; i < n; i++) {
        ws[i].fd = fds[i];
      }
      return port;
    }
    while (n > 0) {
      close(fds[--n]);
    }
    if (shared <= 0 || o->port != 0) {
      return 0;
    }
  }
  dlcp_net_addr_format(name, sizeof(name), &o->bind_addr.sa);
  fprintf(stderr,
          "dlcp-switch: every port the kernel gave %.*s in 16 tries was "
          "bound by another process's socket too\n",
          (int)(strrchr(name, ':') - name), name);
  return 0;
}

/* ---- worker threads ----------------------------------------------------- */

typedef struct batch {
  struct mmsghdr msg[MAX_BATCH];
  struct iovec iov[MAX_BATCH];
  dlcp_sockaddr addr[MAX_BATCH];
  uint64_t dest[MAX_BATCH]; /* send: address cookie << 2 | ECN codepoint */
  union {
    struct cmsghdr align;
    unsigned char buf[CTL_SPACE];
  } ctl[MAX_BATCH];
  struct iovec giov[MAX_BATCH]; /* send: the datagrams, grouped */
  uint32_t origin[MAX_BATCH];   /* send: giov[k] is datagram origin[k] */
  uint32_t first[MAX_BATCH];    /* send: message m's first datagram */
  uint32_t n;
  uint8_t *buf; /* n slots of slot bytes */
  size_t slot;
} batch;

/* Orders the queued datagrams by destination and codepoint (first come
 * first, each destination's in the core's order) into giov and origin: a
 * group's completion answers every worker, so a batch alternates
 * destinations, and only runs to one of them can go as one GSO message. */
static void group_by_dest(batch *out) {
  uint64_t key[MAX_DESTS];
  uint32_t head[MAX_DESTS], tail[MAX_DESTS], next[MAX_BATCH];
  uint32_t nkeys = 0, k = 0;

  for (uint32_t i = 0; i < out->n; i++) {
    uint32_t d = 0;

    while (d < nkeys && key[d] != out->dest[i]) {
      d++;
    }
    if (d == nkeys) {
      if (nkeys < MAX_DESTS) {
        key[nkeys] = out->dest[i];
        head[nkeys] = UINT32_MAX;
        d = nkeys++;
      } else {
        d = MAX_DESTS - 1; /* shares the last list: runs still split */
      }
    }
    next[i] = UINT32_MAX;
    if (head[d] == UINT32_MAX) {
      head[d] = i;
    } else {
      next[tail[d]] = i;
    }
    tail[d] = i;
  }
  for (uint32_t d = 0; d < nkeys; d++) {
    for (uint32_t i = head[d]; i != UINT32_MAX; i = next[i]) {
      out->origin[k] = i;
      out->giov[k++] = out->iov[i];
    }
  }
}

/* The address cookie of a batch destination (address cookie << 2 | ECN
 * codepoint). */
static uint64_t dest_addr(uint64_t dest) {
  return dest >> 2;
}

/* Whether results to address cookie |addr| go datagram by datagram: a
 * GSO run to it was refused for the path's MTU. */
static bool sent_apart(const worker *w, uint64_t addr) {
  for (uint32_t i = 0; i < w->napart; i++) {
    if (w->apart[i] == addr) {
      return true;
    }
  }
  return false;
}

/* Builds the batch's messages into msg: with GSO, each run of datagrams to
 * one destination with one codepoint and one length (the last may be
 * shorter) as one message the kernel cuts into them (UDP_SEGMENT), else
 * one message a datagram.  Returns the number of messages. */
static uint32_t build_messages(const worker *w, batch *out) {
  uint32_t m = 0;

  group_by_dest(out);
  for (uint32_t k = 0; k < out->n; m++) {
    uint32_t first = out->origin[k], same = 1, count = 1;

    while (k + same < out->n &&
           out->dest[out->origin[k + same]] == out->dest[first]) {
      same++;
    }
    if (w->gso && !sent_apart(w, dest_addr(out->dest[first]))) {
      count = (uint32_t)dlcp_net_gso_run(&out->giov[k], same);
    }
    dlcp_net_gso_message(&out->msg[m].msg_hdr, &out->addr[first],
                         &out->giov[k], count, (int)(out->dest[first] & 3u),
                         out->ctl[m].buf);
    out->first[m] = first;
    k += count;
  }
  return m;
}

/* Message |m| of |out| was refused with |err| for its destination alone:
 * a run longer than the path's MTU allows as GSO segments (a worker whose
 * MTU towards the switch exceeds the switch's towards it: the kernel
 * fragments such datagrams, one by one), no route to it, a firewall.
 * The run goes datagram by datagram if its size was the reason, and so
 * do the address's later results (no refused send a batch); what
 * still does not go is counted (its worker re-sends, or times out naming
 * the switch).  The first refusal is said on stderr, naming the address. */
static void refused(worker *w, batch *out, uint32_t m, int err) {
  const struct msghdr *msg = &out->msg[m].msg_hdr;
  uint32_t first = out->first[m];
  size_t sent = 0;
  bool apart = err == EMSGSIZE && msg->msg_iovlen > 1;

  if (apart) {
    if (w->napart < MAX_APART) {
      w->apart[w->napart++] = dest_addr(out->dest[first]);
    }
    for (size_t i = 0; i < msg->msg_iovlen; i++) {
      struct msghdr one;
      union {
        struct cmsghdr align;
        unsigned char buf[DLCP_NET_GSO_CTL];
      } ctl;

      dlcp_net_gso_message(&one, &out->addr[first], &msg->msg_iov[i], 1,
                           (int)(out->dest[first] & 3u), ctl.buf);
      sent += sendmsg(w->fd, &one, 0) >= 0;
    }
  }
  w->unsent += msg->msg_iovlen - sent;
  if (!w->said_unsent) {
    char to[DLCP_NET_ADDRSTR_LEN];

    dlcp_net_addr_format(to, sizeof(to), &out->addr[first].sa);
    if (apart) {
      fprintf(stderr,
              "dlcp-switch: thread %u: a run of %zu-byte results to "
              "%s is longer than the path's MTU allows (%s): results to it "
              "go datagram by datagram, as IP fragments\n",
              w->index, msg->msg_iov[0].iov_len, to, strerror(err));
    } else {
      fprintf(stderr, "dlcp-switch: thread %u: %s refused %zu datagram(s) "
              "(%s): what cannot go to an address is dropped and counted "
              "(unsent), the rest of each batch goes\n", w->index, to,
              msg->msg_iovlen, strerror(err));
    }
    w->said_unsent = true;
  }
}

static int flush(worker *w, batch *out) {
  uint32_t done = 0, m = build_messages(w, out);

  while (done < m) {
    int k = sendmmsg(w->fd, out->msg + done, m - done, 0);

    if (k < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (w->gso && errno != EMSGSIZE && dlcp_net_gso_refused(errno)) {
        /* the device or kernel cannot segment: one datagram a message
         * from now on (what went out already is not sent again); a run
         * too long for one destination's MTU is that destination's
         * alone (refused) */
        fprintf(stderr, "dlcp-switch: thread %u: UDP_SEGMENT refused (%s); "
                "sending datagrams one by one (the rest of this batch is "
                "dropped: hosts and core re-send)\n", w->index,
                strerror(errno));
        w->gso = false;
        break;
      }
      if (errno == EAGAIN || errno == ENOBUFS || errno == ECONNREFUSED) {
        break; /* dropped: the hosts retransmit, the core re-sends */
      }
      if (errno == EBADF || errno == EFAULT || errno == ENOTSOCK ||
          errno == ENOMEM) {
        perror("dlcp-switch: sendmmsg");
        return -1;
      }
      refused(w, out, done, errno);
      done++;
      continue;
    }
    done += (uint32_t)k;
  }
  out->n = 0;
  return 0;
}

/* Drains the core's output into |out|, flushing whenever it fills. */
static int drain(worker *w, batch *out, dlcp_tstamp now) {
  for (;;) {
    uint32_t i = out->n;
    uint8_t *b = out->buf + (size_t)i * out->slot;
    dlcp_agg_send s;
    int rv = dlcp_agg_poll(w->agg, &s, b, DLCP_AGG_DGRAM_MAX, now);

    if (rv != 1) {
      return rv == 0 ? 0 : -1;
    }
    if (!dlcp_agg_peers_addr(w->peers, s.addr, &out->addr[i])) {
      w->stale++; /* its sender was evicted: it re-sends */
      continue;
    }
    out->dest[i] = s.addr << 2 | (s.ecn & 3u);
    out->iov[i].iov_base = b;
    out->iov[i].iov_len = s.len;
    if (++out->n == w->o->batch && flush(w, out) != 0) {
      return -1;
    }
  }
}

/* Hands one received datagram to the core, naming the first few senders
 * of invalid ones (not the ordinary duplicates and stale ACKs of a lossy
 * network). */
static void on_datagram(worker *w, const uint8_t *d, size_t len, uint8_t ecn,
                        const dlcp_sockaddr *from, dlcp_tstamp now) {
  int rv = dlcp_agg_on_packet(
      w->agg, d, len, ecn, dlcp_agg_peers_cookie(w->peers, from, false), now);

  if (rv != 0 && rv != DLCP_ERR_DUPLICATE && rv != DLCP_ERR_UNKNOWN_TRANSFER &&
      w->reported < 10) {
    char name[DLCP_NET_ADDRSTR_LEN];

    w->reported++;
    fprintf(stderr,
            "dlcp-switch: dropped a %zu-byte datagram from %s: "
            "%s%s\n",
            len, dlcp_net_addr_format(name, sizeof(name), &from->sa),
            dlcp_strerror(rv),
            w->reported == 10 ? " (no more such reports)" : "");
  }
}

/* The thread whose socket the reuseport program picks for datagram |d|:
 * (the group's low byte, payload byte 16) mod T, socket 0 for one too
 * short to have it. */
static uint32_t owner_of(const worker *w, const uint8_t *d, size_t len) {
  return len > STEER_BYTE ? d[STEER_BYTE] % w->o->threads : 0;
}

/* Queues a copy of datagram |d| for thread |to| and wakes it if its queue
 * was empty.  Out of memory or room, the datagram is dropped (counted):
 * its sender re-sends it. */
static void hand_off(worker *to, const uint8_t *d, size_t len, uint8_t ecn,
                     const dlcp_sockaddr *from) {
  handed *h = malloc(sizeof(*h) + len);
  bool wake = false;

  pthread_mutex_lock(&to->qlock);
  if (h == NULL || to->qlen >= HANDOFF_MAX) {
    to->handoff_drops++;
    pthread_mutex_unlock(&to->qlock);
    free(h);
    return;
  }
  h->next = NULL;
  h->from = *from;
  h->ecn = ecn;
  h->len = len;
  memcpy(h->data, d, len);
  if (to->qtail != NULL) {
    to->qtail->next = h;
  } else {
    to->qhead = h;
    wake = true;
  }
  to->qtail = h;
  to->qlen++;
  to->handed_in++;
  pthread_mutex_unlock(&to->qlock);
  if (wake) {
    uint64_t one = 1;

    (void)!write(to->wake_fd, &one, sizeof(one));
  }
}

/* Hands the datagrams other threads queued for this one to the core; its
 * eventfd was readable (a queue that filled from empty). */
static void take_handed(worker *w, dlcp_tstamp now) {
  uint64_t count;
  handed *h;

  (void)!read(w->wake_fd, &count, sizeof(count));
  pthread_mutex_lock(&w->qlock);
  h = w->qhead;
  w->qhead = w->qtail = NULL;
  w->qlen = 0;
  pthread_mutex_unlock(&w->qlock);
  while (h != NULL) {
    handed *next = h->next;

    on_datagram(w, h->data, h->len, h->ecn, &h->from, now);
    free(h);
    h = next;
  }
}

static void publish(worker *w) {
  pthread_mutex_lock(&w->lock);
  dlcp_agg_get_stats(w->agg, &w->published);
  w->published_evicted = dlcp_agg_peers_evicted(w->peers);
  w->published_stale = w->stale;
  w->published_unsent = w->unsent;
  w->published_rx_dropped = w->rx_drops.total;
  pthread_mutex_unlock(&w->lock);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  batch *in = calloc(1, sizeof(*in)), *out = calloc(1, sizeof(*out));
  dlcp_tstamp last_pub = 0;
  uint32_t nb = w->o->batch;

  if (in != NULL && out != NULL) {
    in->slot = w->o->gso ? GRO_SLOT : DLCP_AGG_DGRAM_MAX;
    out->slot = DLCP_AGG_DGRAM_MAX;
    in->buf = malloc((size_t)nb * in->slot);
    out->buf = malloc((size_t)nb * out->slot);
  }
  if (in == NULL || out == NULL || in->buf == NULL || out->buf == NULL) {
    fprintf(stderr, "dlcp-switch: thread %u: out of memory\n", w->index);
    w->error = 1;
    goto done;
  }
  while (!atomic_load(&stopping)) {
    dlcp_tstamp now = now_ns();
    dlcp_tstamp dl = dlcp_agg_next_deadline(w->agg);
    int timeout_ms = 100;
    struct pollfd pfd[2] = {{w->fd, POLLIN, 0}, {w->wake_fd, POLLIN, 0}};
    int k;

    if (dl != DLCP_TSTAMP_NEVER) {
      dlcp_tstamp wait = dl > now ? dl - now : 0;

      timeout_ms = wait / 1000000u < 100u ? (int)((wait + 999999u) / 1000000u)
                                          : 100;
    }
    if (poll(pfd, 2, timeout_ms) < 0 && errno != EINTR) {
      perror("dlcp-switch: poll");
      w->error = 1;
      break;
    }
    for (uint32_t i = 0; i < nb; i++) {
      in->iov[i].iov_base = in->buf + (size_t)i * in->slot;
      in->iov[i].iov_len = in->slot;
      memset(&in->msg[i], 0, sizeof(in->msg[i]));
      in->msg[i].msg_hdr.msg_name = &in->addr[i];
      in->msg[i].msg_hdr.msg_namelen = sizeof(in->addr[i]);
      in->msg[i].msg_hdr.msg_iov = &in->iov[i];
      in->msg[i].msg_hdr.msg_iovlen = 1;
      in->msg[i].msg_hdr.msg_control = in->ctl[i].buf;
      in->msg[i].msg_hdr.msg_controllen = CTL_SPACE;
    }
    k = recvmmsg(w->fd, in->msg, nb, MSG_DONTWAIT, NULL);
    if (k < 0 && errno != EAGAIN && errno != EINTR) {
      perror("dlcp-switch: recvmmsg");
      w->error = 1;
      break;
    }
    now = now_ns();
    if (k > 0) {
      (void)dlcp_net_note_drops(&w->rx_drops, &in->msg[k - 1].msg_hdr);
    }
    if (pfd[1].revents & POLLIN) {
      take_handed(w, now); /* no system call a round when nothing came */
    }
    for (int i = 0; i < k; i++) {
      /* With UDP_GRO a message may hold a run of datagrams of one size
       * from one sender (the last may be shorter), all with one TOS. */
      const uint8_t *d = in->buf + (size_t)i * in->slot;
      size_t len = in->msg[i].msg_len;
      size_t seg = dlcp_net_gro_segment(&in->msg[i].msg_hdr, len);
      uint8_t ecn = dlcp_net_ecn_of(&in->msg[i].msg_hdr);

      size_t off = 0;
      do {
        size_t n = len - off < seg ? len - off : seg;
        uint32_t to = owner_of(w, d + off, n);

        if (to == w->index) {
          on_datagram(w, d + off, n, ecn, &in->addr[i], now);
        } else {
          hand_off(&w->all[to], d + off, n, ecn, &in->addr[i]);
        }
        off += n;
      } while (off < len);
    }
    dlcp_agg_on_timer(w->agg, now);
    if (drain(w, out, now) != 0 || flush(w, out) != 0) {
      w->error = 1;
      break;
    }
    if (now - last_pub > 100000000u) {
      publish(w);
      last_pub = now;
    }
  }
  publish(w);
done:
  if (in != NULL) {
    free(in->buf);
  }
  if (out != NULL) {
    free(out->buf);
  }
  free(in);
  free(out);
  return NULL;
}

/* ---- main --------------------------------------------------------------- */

static void print_stats(worker *ws, uint32_t n, const char *when) {
  dlcp_agg_stats t;
  uint64_t handed_in = 0, handoff_drops = 0, evicted = 0, stale = 0;
  uint64_t unsent = 0, rx_dropped = 0;

  memset(&t, 0, sizeof(t));
  for (uint32_t i = 0; i < n; i++) {
    dlcp_agg_stats s;

    pthread_mutex_lock(&ws[i].qlock);
    handed_in += ws[i].handed_in;
    handoff_drops += ws[i].handoff_drops;
    pthread_mutex_unlock(&ws[i].qlock);

    pthread_mutex_lock(&ws[i].lock);
    s = ws[i].published;
    evicted += ws[i].published_evicted;
    stale += ws[i].published_stale;
    unsent += ws[i].published_unsent;
    rx_dropped += ws[i].published_rx_dropped;
    pthread_mutex_unlock(&ws[i].lock);
    t.packets += s.packets;
    t.contrib += s.contrib;
    t.contrib_bytes += s.contrib_bytes;
    t.duplicates += s.duplicates;
    t.acks += s.acks;
    t.nacked += s.nacked;
    t.malformed += s.malformed;
    t.foreign += s.foreign;
    t.stale_acks += s.stale_acks;
    t.claims_granted += s.claims_granted;
    t.claims += s.claims;
    t.claim_failures += s.claim_failures;
    t.ring_verdicts += s.ring_verdicts;
    t.too_big += s.too_big;
    t.results_sent += s.results_sent;
    t.resent += s.resent;
    t.resend_backoffs += s.resend_backoffs;
    t.nacks_sent += s.nacks_sent;
    t.grants_sent += s.grants_sent;
    t.finals += s.finals;
    t.parent_nacks += s.parent_nacks;
    t.forwards += s.forwards;
    t.forward_resends += s.forward_resends;
    t.acks_up += s.acks_up;
    t.acks_implied += s.acks_implied;
    t.freed += s.freed;
    t.reclaimed += s.reclaimed;
    t.evicted += s.evicted;
    t.abandoned += s.abandoned;
    t.queue_drops += s.queue_drops;
    t.aggs_used += s.aggs_used;
    t.aggs_total += s.aggs_total;
  }
  fprintf(stderr,
          "dlcp-switch: %s: packets %llu contrib %llu dup %llu acks %llu "
          "nacked %llu malformed %llu foreign %llu stale_acks %llu "
          "claims_granted %llu | claims "
          "%llu claim_failures %llu ring_verdicts %llu too_big %llu results "
          "%llu resent %llu backoffs %llu acks_implied %llu freed %llu "
          "reclaimed %llu evicted %llu "
          "abandoned %llu queue_drops %llu | chain: forwards %llu "
          "(re-sent %llu) finals %llu acks_up %llu parent_nacks %llu | "
          "aggregators %u/%u in use | handed %llu handoff_drops %llu | "
          "peers_evicted %llu stale_answers %llu unsent %llu rx_dropped "
          "%llu\n",
          when, (unsigned long long)t.packets, (unsigned long long)t.contrib,
          (unsigned long long)t.duplicates, (unsigned long long)t.acks,
          (unsigned long long)t.nacked, (unsigned long long)t.malformed,
          (unsigned long long)t.foreign, (unsigned long long)t.stale_acks,
          (unsigned long long)t.claims_granted, (unsigned long long)t.claims,
          (unsigned long long)t.claim_failures,
          (unsigned long long)t.ring_verdicts, (unsigned long long)t.too_big,
          (unsigned long long)t.results_sent, (unsigned long long)t.resent,
          (unsigned long long)t.resend_backoffs,
          (unsigned long long)t.acks_implied, (unsigned long long)t.freed,
          (unsigned long long)t.reclaimed, (unsigned long long)t.evicted,
          (unsigned long long)t.abandoned, (unsigned long long)t.queue_drops,
          (unsigned long long)t.forwards, (unsigned long long)t.forward_resends,
          (unsigned long long)t.finals, (unsigned long long)t.acks_up,
          (unsigned long long)t.parent_nacks, t.aggs_used, t.aggs_total,
          (unsigned long long)handed_in, (unsigned long long)handoff_drops,
          (unsigned long long)evicted, (unsigned long long)stale,
          (unsigned long long)unsent, (unsigned long long)rx_dropped);
  {
    /* CPU time of the whole process: the per-core cost, independent of
     * how much of the machine the scheduler gave us */
    struct rusage ru;
    double cpu;

    getrusage(RUSAGE_SELF, &ru);
    cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
          (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    fprintf(stderr,
            "dlcp-switch: %s: cpu %.3f s, gradient %.3f Gbit, %.2f Gbit/s "
            "of gradient per CPU second, %.3f M datagrams per CPU second\n",
            when, cpu, (double)t.contrib_bytes * 8e-9,
            cpu > 0 ? (double)t.contrib_bytes * 8e-9 / cpu : 0.0,
            cpu > 0 ? (double)(t.packets + t.results_sent + t.nacks_sent) *
                          1e-6 / cpu
                    : 0.0);
  }
}

int main(int argc, char **argv) {
  opts o;
  worker *ws;
  struct sigaction sa;
  uint16_t port;
  int status = 0;
  uint32_t started = 0;

  if (parse_args(argc, argv, &o) != 0) {
    return 2;
  }
  ws = calloc(o.threads, sizeof(*ws));
  if (ws == NULL) {
    fprintf(stderr, "dlcp-switch: out of memory\n");
    return 1;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  for (uint32_t i = 0; i < o.threads; i++) {
    ws[i].fd = -1;
    ws[i].wake_fd = -1;
    pthread_mutex_init(&ws[i].lock, NULL);
    pthread_mutex_init(&ws[i].qlock, NULL);
  }
  port = open_sockets(&o, ws);
  if (port == 0) {
    status = 1;
    goto out;
  }
  for (uint32_t i = 0; i < o.threads; i++) {
    int rv;

    ws[i].index = i;
    ws[i].o = &o;
    ws[i].all = ws;
    ws[i].gso = o.gso;
    ws[i].wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ws[i].wake_fd < 0) {
      perror("dlcp-switch: eventfd");
      status = 1;
      goto out;
    }
    rv = dlcp_agg_peers_new(&ws[i].peers, DLCP_AGG_PEERS_DEFAULT_CAP);
    if (rv != 0) {
      fprintf(stderr, "dlcp-switch: peer table: %s\n", dlcp_strerror(rv));
      status = 1;
      goto out;
    }
    dlcp_agg_config cfg = o.cfg;
    cfg.shards = o.threads; /* the groups the steering brings it */
    cfg.shard = i;
    for (uint32_t t = 0; t < o.nparents; t++) {
      cfg.parent_addr[t] =
          dlcp_agg_peers_cookie(ws[i].peers, &o.parents[t], true);
    }
    rv = dlcp_agg_new(&ws[i].agg, &cfg, NULL, now_ns());
    if (rv != 0) {
      fprintf(stderr,
              "dlcp-switch: %s: check --mem (at least one block of "
              "--block-elems per thread), --static-parts <= --max-jobs, "
              "--idle-us <= --lease-s\n",
              dlcp_strerror(rv));
      status = 2;
      goto out;
    }
  }
  char name[DLCP_NET_ADDRSTR_LEN];
  printf("dlcp-switch: listening on %s (%u threads, %u aggregators of "
         "%u int32 each per thread, policy %s)\n",
         bind_name(&o, port, name, sizeof(name)), o.threads,
         (unsigned)(o.cfg.mem_bytes / (4u * o.cfg.block_elems)),
         o.cfg.block_elems,
         o.cfg.policy == DLCP_AGG_SHARED ? "shared" : "static");
  fflush(stdout);
  for (; started < o.threads; started++) {
    if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) !=
        0) {
      fprintf(stderr, "dlcp-switch: pthread_create failed\n");
      atomic_store(&stopping, 1);
      status = 1;
      break;
    }
  }
  {
    dlcp_tstamp last = now_ns();

    while (!atomic_load(&stopping)) {
      struct timespec ts = {0, 100000000};

      nanosleep(&ts, NULL);
      if (o.stats_s > 0 && now_ns() - last >= o.stats_s * 1000000000ull) {
        last = now_ns();
        print_stats(ws, o.threads, "stats");
      }
    }
  }
  for (uint32_t i = 0; i < started; i++) {
    pthread_join(ws[i].tid, NULL);
    status |= ws[i].error;
  }
  print_stats(ws, o.threads, "exit");
out:
  for (uint32_t i = 0; i < o.threads; i++) {
    if (ws[i].fd >= 0) {
      close(ws[i].fd);
    }
    if (ws[i].wake_fd >= 0) {
      close(ws[i].wake_fd);
    }
    while (ws[i].qhead != NULL) {
      handed *next = ws[i].qhead->next;

      free(ws[i].qhead);
      ws[i].qhead = next;
    }
    dlcp_agg_del(ws[i].agg);
    dlcp_agg_peers_del(ws[i].peers);
    pthread_mutex_destroy(&ws[i].lock);
    pthread_mutex_destroy(&ws[i].qlock);
  }
  free(ws);
  return status;
}
