/*
 * join.c: joining the job.  Each rank opens its UDP paths and a TCP
 * listener, publishes "ip tcp_port k udp_port... [machine ID] [shm pid
 * fd nonce netns]" through rank 0's rendezvous store (rendezvous.h),
 * reads everyone else's, counts the ranks on this machine, maps the
 * shared-memory segments of the ranks on this host and in this network
 * namespace,
 * exchanges topology labels, then builds the mesh of control connections
 * (mesh.h), and finally creates one MLT connection per peer with the
 * segment size of its path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/mlt.h"
#include "proto/mlt_tune.h"
#include "rt/clock.h"
#include "rt/comm_internal.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "rt/mesh.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "rt/shm.h"
#include "rt/stall.h"
#include "rt/tcp.h"
#include "rt/udp.h"
#include "wire/wire.h"

/* A machine's id: its kernel's boot id, the same in every network
 * namespace and container on it, as their CPUs are. */
#define DLCP_MACHINE_ID_LEN 36

/* Ranks to a CPU from which this machine's ranks acknowledge control
 * messages at once (dlcp_rt_make_conns): 16 ranks on 2 CPUs gained
 * nothing from it, 32 did. */
#define DLCP_RT_CROWDED_RANKS_PER_CPU 16

/* Where a host's ranks outnumber its CPUs each has a turn on its core
 * about once in (ranks per CPU) turns, so a peer's silence for
 * DLCP_SPIN_US means it is late only if that many times longer: a waiter
 * spins (yielding) that much longer before it sleeps in epoll, and a
 * peer's message then needs no doorbell and no wake-up.  2-core VM, 8 B
 * all-reduce, DLCP_SPIN_US alternated (2026-12-03, median ms): 64 ranks
 * 1 ms 6.9-7.4, 20 ms 5.6-5.8, 100 ms 5.3-5.4; 128 ranks 1 ms 53-59,
 * 64 ms 45-48 (p90 78-88 -> 52-61).  Bounded, as a spinning rank does
 * take turns from the others. */
#define DLCP_RT_MAX_SPIN_SCALE 64u

static uint32_t spin_scale(uint64_t ranks, long cpus) {
  if (cpus <= 0 || (long)ranks <= cpus) {
    return 1;
  }
  long scale = ((long)ranks + cpus - 1) / cpus;
  return scale < (long)DLCP_RT_MAX_SPIN_SCALE ? (uint32_t)scale
                                              : DLCP_RT_MAX_SPIN_SCALE;
}

typedef struct addr_record {
  char ip[INET6_ADDRSTRLEN];
  uint16_t tcp_port;
  uint32_t k;
  uint16_t udp_port[DLCP_ENV_MAX_PATHS];
  char machine[DLCP_MACHINE_ID_LEN + 1]; /* "": not published */
  pid_t shm_pid; /* 0: no shared-memory segment */
  int shm_fd;
  uint64_t shm_nonce;
  uint64_t shm_netns; /* the rank's network namespace (its inode) */
} addr_record;

/* The address this host uses to reach |host|: connect a UDP socket (no
 * packet is sent) and read its local name. */
static int local_ip_towards(const char *host, char *out, size_t outlen,
                            dlcp_errbuf *eb) {
  dlcp_sockaddr a;
  int rv = dlcp_net_resolve(&a, host, 9, SOCK_DGRAM, eb);
  if (rv != 0) {
    return rv;
  }
  int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  dlcp_sockaddr sin;
  socklen_t len = sizeof(sin);
  if (fd < 0 || connect(fd, &a.sa, dlcp_sockaddr_len(&a)) != 0 ||
      getsockname(fd, &sin.sa, &len) != 0) {
    int e = errno;
    if (fd >= 0) {
      close(fd);
    }
    return dlcp_errbuf_set(eb, -e, "no route to %s: %s", host, strerror(e));
  }
  close(fd);
  if (sin.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &sin.in6.sin6_addr, out, (socklen_t)outlen);
  } else {
    inet_ntop(AF_INET, &sin.in.sin_addr, out, (socklen_t)outlen);
  }
  return 0;
}

/* Payload bytes per datagram towards |to|: the path MTU less the IP,
 * UDP and MLT headers and |trailer| bytes of the runtime's own, clamped
 * to what the wire format allows. */
#define SEGMENT_ALIGN 8u /* the largest dtype's size */

static uint32_t segment_for(const dlcp_sockaddr *to, uint32_t trailer) {
  int mtu = dlcp_net_path_mtu(to, 1500);
  long seg = (long)mtu - dlcp_net_ip_header_len(to->sa.sa_family) - 8 -
             (long)DLCP_WIRE_DATA_HDR_LEN - (long)trailer;
  if (seg > (long)(DLCP_WIRE_MAX_SEG - trailer)) {
    seg = DLCP_WIRE_MAX_SEG - trailer;
  }
  if (seg < (long)DLCP_WIRE_MIN_SEG) {
    seg = DLCP_WIRE_MIN_SEG;
  }
  /* Whole elements of every dtype in a segment: received bytes can be
   * reduced as they arrive (dlcp_coll_params.reduce_on_arrival). */
  return (uint32_t)(seg - seg % SEGMENT_ALIGN);
}

static bool machine_id_valid(const char *id) {
  size_t len = strlen(id);
  for (size_t i = 0; i < len; i++) {
    char ch = id[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? ch != '-' : !((ch >= '0' && ch <= '9') ||
                             (ch >= 'a' && ch <= 'f'))) {
      return false;
    }
  }
  return len == DLCP_MACHINE_ID_LEN;
}

/* Reads this machine's id into |out|; "" if the kernel does not say. */
static void read_machine_id(char out[DLCP_MACHINE_ID_LEN + 1]) {
  out[0] = '\0';
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (!f) {
    return;
  }
  if (fscanf(f, "%36s", out) != 1 || !machine_id_valid(out)) {
    out[0] = '\0';
  }
  fclose(f);
}

/* This job's ranks on the machine of rank |me|, |me| included.  A rank
 * that published no machine id may be anywhere: it counts as here, and
 * so does every rank if |me| has no id. */
static uint32_t ranks_here(const addr_record *recs, uint32_t n, uint32_t me) {
  uint32_t here = 0;
  for (uint32_t r = 0; r < n; r++) {
    here += recs[me].machine[0] == '\0' || recs[r].machine[0] == '\0' ||
            strcmp(recs[r].machine, recs[me].machine) == 0;
  }
  return here;
}

static int parse_record(addr_record *r, const char *text, uint32_t rank,
                        dlcp_errbuf *eb) {
  memset(r, 0, sizeof(*r));
  int used = 0;
  unsigned tcp, k;
  dlcp_sockaddr check;
  if (sscanf(text, "%45s %u %u%n", r->ip, &tcp, &k, &used) != 3 ||
      dlcp_sockaddr_parse(&check, r->ip, 0) != 0 || tcp == 0 || tcp > 65535 ||
      k == 0 || k > DLCP_ENV_MAX_PATHS) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u published a malformed address record "
                           "'%.60s'",
                           rank, text);
  }
  const char *s = text + used;
  for (unsigned i = 0; i < k; i++) {
    unsigned port;
    int n = 0;
    if (sscanf(s, "%u%n", &port, &n) != 1 || port == 0 || port > 65535) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "rank %u published a malformed UDP port list",
                             rank);
    }
    r->udp_port[i] = (uint16_t)port;
    s += n;
  }
  r->tcp_port = (uint16_t)tcp;
  r->k = k;
  /* Optional: the kernel the rank runs on. */
  int n = 0;
  if (sscanf(s, " machine %36s%n", r->machine, &n) == 1) {
    if (!machine_id_valid(r->machine)) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "rank %u published a malformed machine id "
                             "'%.40s'",
                             rank, r->machine);
    }
    s += n;
  }
  /* Optional: the shared-memory segment of a rank (with its machine). */
  long pid;
  int fd;
  n = 0;
  unsigned long long nonce;
  unsigned long long netns;
  if (sscanf(s, " shm %ld %d %llx %llx%n", &pid, &fd, &nonce, &netns, &n) ==
      4) {
    if (pid <= 0 || pid > INT32_MAX || fd < 0 || s[n] != '\0' ||
        r->machine[0] == '\0') {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "rank %u published a malformed shared-memory "
                             "segment '%.60s'",
                             rank, s);
    }
    r->shm_pid = (pid_t)pid;
    r->shm_fd = fd;
    r->shm_nonce = (uint64_t)nonce;
    r->shm_netns = (uint64_t)netns;
  } else if (*s != '\0') {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u published an address record with "
                           "unknown fields '%.60s'",
                           rank, s);
  }
  return 0;
}

/* build_mesh resolves the lower ranks' control listeners and builds the
 * mesh of control connections (mesh.h). */
static int build_mesh(dlcp_comm *c, const addr_record *recs,
                      dlcp_tstamp deadline, dlcp_errbuf *eb) {
  uint32_t me = c->env.rank;
  dlcp_sockaddr *lower = calloc(me > 0 ? me : 1, sizeof(*lower));
  int rv = 0;
  if (lower == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  for (uint32_t r = 0; rv == 0 && r < me; r++) {
    rv = dlcp_net_resolve(&lower[r], recs[r].ip, recs[r].tcp_port,
                          SOCK_STREAM, eb);
  }
  if (rv == 0) {
    rv = dlcp_rt_build_mesh(c, lower, deadline, eb);
  }
  free(lower);
  return rv;
}

/*
 * Every rank's location labels, as small integers per level: labels are
 * numbered in order of first appearance over ranks 0..n-1, which every
 * rank computes identically from the same exchanged strings.
 */
static int exchange_topology(dlcp_comm *c, dlcp_tstamp deadline,
                             dlcp_errbuf *eb) {
  const dlcp_rt_env *env = &c->env;
  uint32_t n = env->world_size;
  if (env->topo == DLCP_TOPO_FLAT) {
    return 0;
  }
  if (env->topo == DLCP_TOPO_RACK) {
    c->topo_levels = 1;
    c->topo = calloc(n, sizeof(uint32_t));
    if (!c->topo) {
      return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t r = 0; r < n; r++) {
      c->topo[r] = r / env->ranks_per_rack;
    }
    return 0;
  }
  char mine[DLCP_TOPO_MAX_LEVELS * (DLCP_TOPO_LABEL_MAX + 1) + 1];
  size_t len = 0;
  for (uint32_t l = 0; l < env->topo_levels; l++) {
    len += (size_t)snprintf(mine + len, sizeof(mine) - len, "%s%s",
                            l ? "/" : "", env->topo_labels[l]);
  }
  void **values = calloc(n, sizeof(void *));
  size_t *lens = calloc(n, sizeof(size_t));
  char (*labels)[DLCP_TOPO_LABEL_MAX + 1] =
      calloc((size_t)n * env->topo_levels, DLCP_TOPO_LABEL_MAX + 1);
  c->topo = calloc((size_t)n * env->topo_levels, sizeof(uint32_t));
  int rv = 0;
  if (!values || !lens || !labels || !c->topo) {
    rv = dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  if (rv == 0) {
    rv = dlcp_rdzv_exchange(c->rdzv.client, "topo", mine, len + 1, values,
                            lens, deadline, eb);
  }
  for (uint32_t r = 0; rv == 0 && r < n; r++) {
    /* The text was validated by its rank's environment loader; here only
     * the shape matters: the same number of levels everywhere. */
    const char *t = values[r];
    uint32_t levels = 0;
    while (rv == 0 && *t) {
      size_t k = strcspn(t, "/");
      if (levels == env->topo_levels || k == 0 || k > DLCP_TOPO_LABEL_MAX) {
        rv = dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "DLCP_TOPO: rank %u has '%.80s', expected %u "
                             "levels like this rank's '%s'",
                             r, (const char *)values[r], env->topo_levels,
                             mine);
        break;
      }
      memcpy(labels[r * env->topo_levels + levels], t, k);
      levels++;
      t += k + (t[k] == '/');
    }
    if (rv == 0 && levels != env->topo_levels) {
      rv = dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "DLCP_TOPO: rank %u has '%.80s', expected %u "
                           "levels like this rank's '%s'",
                           r, (const char *)values[r], env->topo_levels, mine);
    }
  }
  for (uint32_t l = 0; rv == 0 && l < env->topo_levels; l++) {
    for (uint32_t r = 0; r < n; r++) {
      uint32_t id = r;
      for (uint32_t q = 0; q < r; q++) {
        if (strcmp(labels[q * env->topo_levels + l],
                   labels[r * env->topo_levels + l]) == 0) {
          id = c->topo[q * env->topo_levels + l];
          break;
        }
      }
      c->topo[r * env->topo_levels + l] = id;
    }
  }
  if (rv == 0) {
    c->topo_levels = env->topo_levels;
    dlcp_rdzv_free_values(values, n);
  }
  free(values);
  free(lens);
  free(labels);
  return rv;
}

/* Reads the inode of this process's network namespace into |*ino|:
 * ranks of one machine share memory only within one namespace, so that
 * ranks in namespaces of their own (an emulated cluster, containers with
 * networks of their own) keep the network between them. */
static bool read_netns(uint64_t *ino) {
  struct stat st;
  if (stat("/proc/self/ns/net", &st) != 0) {
    return false;
  }
  *ino = (uint64_t)st.st_ino;
  return true;
}

/* This rank's rings, for the peers that turn out to share its machine
 * and network namespace (known only from the records it is published
 * in; the others never touch its pages).  Without a machine id or a
 * namespace to publish, or without a memfd, everything goes through
 * UDP. */
static void open_shm_segment(dlcp_comm *c, bool identified) {
  const dlcp_rt_env *env = &c->env;
  uint64_t nonce;
  if (!env->shm || !identified ||
      getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
    return;
  }
  dlcp_errbuf eb = {0};
  dlcp_shm_in_create(&c->shm_in, env->job, env->rank, env->world_size,
                     nonce, &eb);
}

/* Whether |rec| published rings from this rank's machine (|machine|) and
 * network namespace (|netns|). */
static bool shares_host(const addr_record *rec, const char *machine,
                        uint64_t netns) {
  return rec->shm_pid != 0 && strcmp(rec->machine, machine) == 0 &&
         rec->shm_netns == netns;
}

/* Reads from and writes to the peers that share this rank's host through
 * rings: all of them if they are few enough (DLCP_SHM_MAX_PEERS), else
 * those dlcp_shm_partners picks.  Each rank of the group counts the same
 * records and applies the same symmetric rule, so both ends of a pair
 * decide alike, and so does a pair whose mapping fails on one side (that
 * side writes through UDP; its ring for us stays empty, which costs
 * nothing).  A segment no peer reads is closed, so that a waiting thread
 * need not look at it.  Returns 0, or an error code if a peer's ring to
 * us cannot be mapped: it would write there unread. */
static int share_memory(dlcp_comm *c, const addr_record *recs,
                        const char *machine, uint64_t netns, dlcp_errbuf *eb) {
  uint32_t group = 0, me = c->env.rank, world = c->env.world_size;
  for (uint32_t r = 0; c->shm_in.hdr && r < world; r++) {
    group += r != me && shares_host(&recs[r], machine, netns);
  }
  bool crowded = group > DLCP_SHM_MAX_PEERS;
  for (uint32_t r = 0; group > 0 && r < world; r++) {
    peer *p = &c->peers[r];
    if (r == me || !shares_host(&recs[r], machine, netns) ||
        (crowded && !dlcp_shm_partners(me, r, world))) {
      continue;
    }
    int rv = dlcp_shm_in_admit(&c->shm_in, r, eb);
    if (rv != 0) {
      return rv;
    }
    p->both_rings = true;
    dlcp_errbuf ignored = {0};
    if (dlcp_shm_out_open(&p->shm, recs[r].shm_pid, recs[r].shm_fd,
                          recs[r].shm_nonce, c->env.job, r, me, world,
                          &ignored) == 0) {
      c->stats.shm_peers++;
    }
  }
  if (c->shm_in.admitted == 0) {
    dlcp_shm_in_close(&c->shm_in);
  }
  return 0;
}

/* Routes per path (proto/pathset.h, "Routes"): each route of a path is
 * a socket of its own, so an ECMP fabric hashes it anew; a path whose
 * route loses moves to the next.  DLCP_MLT_ECMP_ROUTES, within
 * DLCP_ENV_MAX_PATHS sockets in all. */
static uint32_t path_routes(uint32_t paths) {
  uint32_t fit = DLCP_ENV_MAX_PATHS / paths;
  return fit < DLCP_MLT_ECMP_ROUTES ? fit : DLCP_MLT_ECMP_ROUTES;
}

int dlcp_rt_join(dlcp_comm *c, dlcp_errbuf *eb) {
  dlcp_rt_env *env = &c->env;
  int rv;
  if (env->local_addr[0]) {
    dlcp_copy_str(c->local_ip, sizeof(c->local_ip), env->local_addr);
  } else if (env->world_size == 1) {
    snprintf(c->local_ip, sizeof(c->local_ip), "127.0.0.1");
  } else if ((rv = local_ip_towards(env->master_addr, c->local_ip,
                                    sizeof(c->local_ip), eb)) != 0) {
    return rv;
  }
  if ((rv = dlcp_udp_open(&c->udp, c->local_ip,
                          env->paths * path_routes(env->paths), eb)) != 0) {
    return rv;
  }
  if (env->world_size == 1) {
    c->stats.machine_ranks = 1;
    return 0;
  }
  /* The control listener exists before anyone can learn its port. */
  dlcp_sockaddr sin;
  dlcp_sockaddr_parse(&sin, c->local_ip, 0); /* dlcp_udp_open parsed it */
  socklen_t slen = sizeof(sin);
  c->listen_fd = socket(sin.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->listen_fd < 0 ||
      bind(c->listen_fd, &sin.sa, dlcp_sockaddr_len(&sin)) != 0 ||
      listen(c->listen_fd, SOMAXCONN) != 0 ||
      getsockname(c->listen_fd, &sin.sa, &slen) != 0) {
    return dlcp_errbuf_set(eb, -errno, "control listener on %s: %s",
                           c->local_ip, strerror(errno));
  }
  dlcp_tcp_tune(c->listen_fd);
  rv = dlcp_rdzv_join(&c->rdzv, env, eb);
  /* From here on the run's session key stands for the secret. */
  memset(env->job_secret, 0, sizeof(env->job_secret));
  if (rv != 0) {
    return rv;
  }
  char machine[DLCP_MACHINE_ID_LEN + 1];
  uint64_t netns = 0;
  read_machine_id(machine);
  open_shm_segment(c, machine[0] != '\0' && read_netns(&netns));
  char mine[224 + 8 * DLCP_ENV_MAX_PATHS];
  int len = snprintf(mine, sizeof(mine), "%s %u %u", c->local_ip,
                     (unsigned)dlcp_net_addr_port(&sin.sa), c->udp.k);
  for (uint32_t i = 0; i < c->udp.k; i++) {
    len += snprintf(mine + len, sizeof(mine) - (size_t)len, " %u",
                    (unsigned)c->udp.port[i]);
  }
  if (machine[0]) {
    len += snprintf(mine + len, sizeof(mine) - (size_t)len, " machine %s",
                    machine);
  }
  if (c->shm_in.hdr) {
    len += snprintf(mine + len, sizeof(mine) - (size_t)len,
                    " shm %ld %d %llx %llx", (long)getpid(), c->shm_in.fd,
                    (unsigned long long)c->shm_in.nonce,
                    (unsigned long long)netns);
  }
  void **values = calloc(env->world_size, sizeof(void *));
  size_t *lens = calloc(env->world_size, sizeof(size_t));
  addr_record *recs = calloc(env->world_size, sizeof(addr_record));
  dlcp_tstamp deadline = dlcp_rt_deadline_after(env->rdzv_timeout_ms);
  if (!values || !lens || !recs) {
    free(values);
    free(lens);
    free(recs);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  rv = dlcp_rdzv_exchange(c->rdzv.client, "addr", mine, (size_t)len + 1,
                          values, lens, deadline, eb);
  bool exchanged = rv == 0;
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    rv = parse_record(&recs[r], values[r], r, eb);
    peer *p = &c->peers[r];
    p->udp_k = recs[r].k;
    for (uint32_t k = 0; rv == 0 && k < recs[r].k; k++) {
      dlcp_sockaddr_parse(&p->udp[k], recs[r].ip, recs[r].udp_port[k]);
    }
    if (rv == 0 && p->udp[0].sa.sa_family != c->udp.family) {
      rv = dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u published the address %s, rank %u has "
                           "%s: every rank must reach MASTER_ADDR by the "
                           "same IP version",
                           r, recs[r].ip, env->rank, c->local_ip);
    }
    dlcp_fmt(p->name, sizeof(p->name),
             strchr(recs[r].ip, ':') ? "rank %u ([%s]:%u)" : "rank %u (%s:%u)",
             r, recs[r].ip, (unsigned)recs[r].tcp_port);
  }
  if (exchanged) {
    dlcp_rdzv_free_values(values, env->world_size); /* parsed into recs */
  }
  if (rv == 0) {
    rv = share_memory(c, recs, machine, netns, eb);
  }
  if (rv == 0) {
    /* A waiting rank lets the others run if they outnumber the CPUs
     * (drive.c). */
    c->stats.machine_ranks = ranks_here(recs, env->world_size, env->rank);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->cores_shared = cpus <= 0 || (long)c->stats.machine_ranks > cpus;
    c->spin_scale = spin_scale(c->stats.machine_ranks, cpus);
    c->cores_crowded =
        cpus > 0 && (long)c->stats.machine_ranks >=
                        (long)DLCP_RT_CROWDED_RANKS_PER_CPU * cpus;
    rv = exchange_topology(c, deadline, eb);
  }
  if (rv == 0) {
    rv = build_mesh(c, recs, deadline, eb);
  }
  free(values);
  free(lens);
  free(recs);
  return rv;
}

/* Reading payloads in place costs a second system call per datagram and
 * saves copying it: worth it from about this segment size (loopback's
 * 64 KiB datagrams), not for MTU-sized ones. */
#define RX_IN_PLACE_MIN_SEGMENT 16384u

int dlcp_rt_make_conns(dlcp_comm *c, dlcp_errbuf *eb) {
  /* An authenticated datagram is checked before any of it is used, so
   * none is read into a tensor before its trailer. */
  uint32_t trailer = c->rdzv.authenticated ? DLCP_AUTH_TRAILER_LEN : 0;
  c->rx_in_place = c->env.world_size > 1 && trailer == 0;
  c->reduce_on_arrival = true;
  /* What every connection sends eagerly, from settings every rank shares
   * (so all ranks agree on it whichever peers share memory): the eager
   * size, capped when control messages are datagrams. */
  c->eager_bytes = c->env.eager_bytes;
  if (c->env.control_datagrams &&
      c->eager_bytes > DLCP_MLT_CTL_DGRAM_EAGER_MAX) {
    c->eager_bytes = DLCP_MLT_CTL_DGRAM_EAGER_MAX;
  }
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r == c->env.rank) {
      continue;
    }
    peer *p = &c->peers[r];
    dlcp_mlt_config cfg;
    dlcp_mlt_config_default(&cfg);
    cfg.job = c->env.job;
    /* DLCP_SEGMENT is the most a datagram carries: a path whose MTU holds
     * less gets what it holds.  IP fragments of a longer one would lose
     * the whole datagram with any one of them and, under loss, fill the
     * kernel's reassembly memory with incomplete ones, after which every
     * datagram is lost until they expire (30 s): on the testbed at MTU
     * 1,500 and 1 % loss, 8,928-byte segments stalled an all-reduce
     * within 25. */
    uint32_t seg = segment_for(&p->udp[0], trailer);
    if (c->env.segment_bytes != 0 && c->env.segment_bytes < seg) {
      seg = c->env.segment_bytes;
    }
    cfg.datagram_max = DLCP_WIRE_DGRAM_MAX - trailer;
    if (seg + DLCP_WIRE_DATA_HDR_LEN > cfg.datagram_max) {
      seg = cfg.datagram_max - DLCP_WIRE_DATA_HDR_LEN;
    }
    dlcp_mlt_config_tune_segment(&cfg, seg);
    if (cfg.segment_size < RX_IN_PLACE_MIN_SEGMENT) {
      c->rx_in_place = false;
    }
    if (cfg.segment_size % SEGMENT_ALIGN != 0) {
      c->reduce_on_arrival = false; /* a DLCP_SEGMENT of odd size */
    }
    cfg.npaths = c->env.paths;
    cfg.nroutes = c->udp.k / c->env.paths;
    /* A path's packets go out a send batch at a time (udp.h), so a batch
     * of consecutive packets per path, sent in order: per-packet paths
     * had each batch overtake the other paths' (a fifth of the packets
     * reordered, a reorder guard of some hundred microseconds at 10
     * Gbit/s) and cost a GSO run per path (docs/runtime.md). */
    cfg.path_burst = DLCP_UDP_BATCH;
    double gbps = c->env.rate_gbps;
    if (gbps == 0) {
      gbps = dlcp_net_path_rate_gbps(&p->udp[0], DLCP_RT_LOCAL_RATE_GBPS,
                                     DLCP_RT_MIN_RATE_GBPS);
      gbps = gbps > DLCP_RT_MIN_RATE_GBPS ? gbps : DLCP_RT_MIN_RATE_GBPS;
    }
    cfg.line_rate_bps = (uint64_t)(gbps * 1e9);
    cfg.min_rate_bps = cfg.line_rate_bps / 1000 ? cfg.line_rate_bps / 1000 : 1;
    /* The stall inquiry that follows a transfer's timeout ends by the
     * operation timeout (rt/stall.h). */
    cfg.stall_timeout_ns = dlcp_stall_wait_ns(c->env.timeout_ms);
    cfg.max_inflight_bytes = c->env.window_bytes;
    /* Control messages as datagrams never wait for a TCP timeout; an
     * EAGER then goes as an unpaced burst of pieces, which bounds the
     * eager size (c->eager_bytes).  Between ranks on this host the
     * control stream rides the shared-memory rings, where nothing is lost
     * and no TCP timeout can arise, and a CACK per message would cost a
     * wake-up of the peer (4 ranks on loopback: 43 -> 149 us per 4 KiB
     * all-reduce). */
    cfg.control_datagrams = c->env.control_datagrams && !p->both_rings;
    /* A control message a reply does not acknowledge within the ack delay
     * gets a CACK of its own.  Where many ranks crowd each CPU, that CACK
     * comes a millisecond after the peer's turn on the core, when the
     * sender most likely sleeps, and wakes it: acknowledged at once, it
     * reaches the sender while it runs or with its next wake-up (2-core
     * VM, 8 B and 4 KiB all-reduce, 2 runs alternated: 16 ranks no
     * difference; 32 ranks 3.7 / 3.7 against 4.4 / 4.7 ms; 64 ranks
     * 13.8 / 13.1 against 22.1 / 25.3; 128 ranks 115 / 130 against
     * 149 / 155).  Elsewhere the delay stays: at once cost 4 ranks on 4
     * testbed hosts 1.5-2.6x at 8 B - 4 KiB (docs/runtime.md). */
    if (c->cores_crowded) {
      cfg.control_ack_delay_ns = 0;
    }
    cfg.eager_max_bytes =
        cfg.control_datagrams ? c->eager_bytes : c->env.eager_bytes;
    /* DLCP_RTT_LOW_US / DLCP_RTT_HIGH_US override the tuned thresholds. */
    if (c->env.rtt_low_us) {
      cfg.t_low_ns = (dlcp_duration)c->env.rtt_low_us * 1000u;
    }
    if (c->env.rtt_high_us) {
      cfg.t_high_ns = (dlcp_duration)c->env.rtt_high_us * 1000u;
    }
    cfg.queue_pkts = c->env.queue_pkts;
    if (cfg.t_high_ns <= cfg.t_low_ns) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "DLCP_RTT_HIGH_US (%llu us) must exceed "
                             "DLCP_RTT_LOW_US (%llu us)",
                             (unsigned long long)cfg.t_high_ns / 1000,
                             (unsigned long long)cfg.t_low_ns / 1000);
    }
    cfg.seed = c->env.fault.seed ^ ((uint64_t)c->env.rank << 32 | r);
    int rv = dlcp_mlt_conn_new(&p->conn, &cfg, NULL, dlcp_rt_now());
    if (rv != 0) {
      return dlcp_errbuf_set(eb, rv, "MLT connection to %s: %s", p->name,
                             dlcp_strerror(rv));
    }
  }
  /* Datagrams read in batches come coalesced where the host's NIC (or
   * loopback) can: a kernel without UDP_GRO delivers them one by one, as
   * before, so its refusal is no error. */
  if (!c->rx_in_place && c->env.world_size > 1) {
    (void)dlcp_udp_enable_gro(&c->udp);
  }
  return 0;
}
