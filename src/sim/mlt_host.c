/*
 * mlt_host.c: MLT in the simulator, through the unchanged src/proto core.
 *
 * Model.  Every simulated host holds one dlcp_mlt_conn per peer it talks
 * to, created on first use, exactly as the runtime holds one per rank.  A
 * flow is one tensor transfer whose tensor id is the flow id: when the flow
 * starts, the receiving host posts the receive (with the scenario's loss
 * bound) and then the sending host posts the send, so the receiver's START
 * is what releases the data, as in the seed.  After every event that
 * reaches a connection (a post, a datagram, a control message, its timer)
 * the driver polls it until it has nothing to say and arms one engine timer
 * at dlcp_mlt_next_deadline.  Simulated time is picoseconds; it is turned
 * into the core's nanoseconds (truncated) only at those calls, and the
 * core's deadlines are turned back (deadline_ns * 1000, never earlier than
 * now).
 *
 * Datagrams (DATA, ACK) become simulated packets of IPv4 + UDP + MLT header
 * + payload bytes.  The payload itself is not carried: its bytes are never
 * looked at by the network, and the receiver's copy lands in a shared sink
 * buffer, so only the encoded header travels in pkt->hdr.  The core's
 * priority p picks switch queue 1 + p, act.ect picks ECT or not-ECT (so
 * selective dropping sees the core's importance tags), act.path becomes
 * the packet's path id for source routing and act.route, for ECMP, the
 * source port it leaves from, as the runtime's socket (spraying ignores
 * both).
 *
 * Control messages (START, PROBE, BITMAP, STOP, FINISH) go the way the
 * core sends them with control_datagrams: CDATA datagrams (and CACKs) on
 * switch queue 0, the highest priority, with the core's own RTT-based
 * retransmission and duplicate suppression (src/proto/ctlchan.c).  A
 * datagram larger than the MTU is cut into fragments that follow one ECMP
 * path per host pair, as IP fragments; losing one loses the datagram.
 * Nothing is lossless: buffers and random link loss drop control packets
 * like any other, and the core recovers them.
 *
 * Each host's connections share one NIC: a connection whose data finds
 * the NIC queue holding MLT_NIC_BACKLOG_BYTES waits (a real sender's
 * socket buffer blocks the same way), and as the NIC drains the waiting
 * connections are served one packet each in turn; with the scenario's
 * transport.srpt, the lowest dlcp_mlt_send_class first (shortest
 * remaining first, as pFabric's and Homa's senders), equal classes in a
 * fixed pseudo-random order of peers per host (drawn from the scenario's
 * seed; docs/protocol.md says why not the bytes sent so far, and why the
 * option is off by default).  They also share one dlcp_mlt_rx_share: the
 * receiver grants of src/proto.
 *
 * Completions feed the per-flow records DCTCP uses: the sender's completion
 * (STOP received) is the flow's finish, so FCT runs from the flow's start
 * to the STOP; the receiver's completion gives rx_done and the delivered
 * byte count.  FCT therefore includes the half round trip of the START,
 * unless the receiver posted the receive ahead (flow_expect: a parameter
 * server's pushes, workload.ps.post_ahead), whose START then precedes the
 * flow.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/mlt.h"
#include "proto/mlt_tune.h"
#include "proto/rng.h"
#include "sim/sim.h"
#include "wire/wire.h"

/* IPv4 (20) + UDP (8) around every MLT datagram on the wire, and IPv4 +
 * TCP (40) around every segment of the control channel. */
#define MLT_IP_UDP_BYTES 28u
#define MLT_IP_TCP_BYTES 40u
/* The poll buffer bounds control messages: a bitmap window (64 KiB
 * describes any realistic loss pattern of a multi-megabyte tensor) and an
 * EAGER of the largest eager size with its header, in a CDATA
 * (dlcp_mlt_config.eager_max_bytes). */
#define MLT_POLL_BUF                                                           \
  (DLCP_MLT_CTL_DGRAM_EAGER_MAX + DLCP_WIRE_EAGER_HDR_LEN +                    \
   DLCP_WIRE_CDATA_HDR_LEN)

/* The NIC queue a host lets its connections fill before it stops polling
 * them for data, as a real sender's socket buffer blocks (EAGAIN) and its
 * driver waits: without it every connection paces at line rate on its
 * own, the host queue grows by the number of peers times the rate, and
 * that queueing delay (not the network's) slows every control loop. */
#define MLT_NIC_BACKLOG_BYTES (64u * 1024u)

/* A control message in flight: its bytes, owned here until delivered. */
typedef struct ctrl_msg {
  uint8_t *bytes; /* NULL when the slot is free */
  uint32_t len;
  uint32_t frags_left; /* fragments still to arrive */
  uint32_t next_free;
} ctrl_msg;

/* State shared by every host of one simulation. */
typedef struct mlt_sim {
  dlcp_sim *sim;
  dlcp_mlt_config base; /* template for every connection */
  uint32_t mtu;         /* mss + header: the largest packet on the wire */
  uint8_t *poll_buf;
  uint8_t *rx_buf;  /* header + payload handed to dlcp_mlt_on_datagram */
  size_t rx_len;
  uint8_t *sink;    /* every receive buffer, and the send buffer unless
                       magnitude tagging needs real gradients */
  uint8_t *grad;    /* synthetic float32 gradients, or NULL */
  uint64_t bdp_bytes; /* a host link's rate x base RTT: receiver grants */
  uint64_t max_flow;
  ctrl_msg *msgs;
  uint32_t nmsgs, msgs_cap, free_msg;
} mlt_sim;

typedef struct mlt_peer {
  struct mlt_host *host;
  uint32_t peer; /* host index of the other end */
  dlcp_mlt_conn *conn;
  dlcp_sim_conn_timer timer;
  struct mlt_peer *blocked_next; /* in the host's waiting list */
  bool blocked;
  uint32_t send_class; /* dlcp_mlt_send_class when it began to wait */
  uint64_t tie;        /* its rank among equal classes on this host */
  uint64_t window_timeouts; /* the core's count when last charged */
  /* Added to the core's path ids (source routing): a multiple of npaths,
   * drawn per host pair (see peer_get). */
  uint32_t path_base;
} mlt_peer;

/* A host's connections, in an open-addressing table keyed by peer, and
 * the connections waiting for its NIC to drain. */
typedef struct mlt_host {
  dlcp_sim *sim;
  uint32_t host;
  mlt_peer **slots;
  uint32_t cap, count; /* cap is a power of two or 0 */
  mlt_peer *blocked, *blocked_tail; /* waiting for the NIC, in the order
                                       they began to wait */
  dlcp_sim_timer nic_timer;
  dlcp_mlt_rx_share rx_share; /* its connections' receiver grants */
} mlt_host;

static mlt_sim *shared(const dlcp_sim *sim) {
  return sim->transport;
}

/* NICs serve shortest remaining first (transport.srpt), else in turn. */
static bool srpt(const dlcp_sim *sim) {
  return sim->cfg.transport.mlt.srpt;
}

/* Core times are ns; a deadline beyond the representable ps range is
 * "never". */
static uint64_t ns_of(dlcp_sim_ps t) {
  return dlcp_sim_time_to_ns(t);
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* ---- shared state ------------------------------------------------------ */

static uint32_t segment_bytes(const dlcp_sim_config *cfg) {
  const dlcp_sim_mlt_config *m = &cfg->transport.mlt;
  if (m->segment_bytes) {
    return m->segment_bytes;
  }
  uint32_t mtu = cfg->transport.mss_bytes + cfg->transport.header_bytes;
  uint32_t hdr = MLT_IP_UDP_BYTES + DLCP_WIRE_DATA_HDR_LEN;
  return mtu > hdr + DLCP_WIRE_MIN_SEG ? mtu - hdr : DLCP_WIRE_MIN_SEG;
}

/* Fills |g| with float32 gradients.  Real gradients vary in scale from one
 * region of a tensor to the next, which is what lets the seed's rule (a
 * packet is important if its mean |g| exceeds the tensor's median |g|) split
 * packets; so every 256-float block gets its own scale, spread log-uniformly
 * over two decades, and values within a block are Laplace distributed. */
static void fill_gradients(uint8_t *g, uint64_t bytes, uint64_t seed) {
  dlcp_rng rng;
  dlcp_rng_seed(&rng, seed ^ 0x6A4Dull);
  double scale = 0;
  uint64_t n = bytes / sizeof(float);
  for (uint64_t i = 0; i < n; i++) {
    if (i % 256 == 0) {
      scale = 1e-3 * pow(10.0, 2.0 * dlcp_rng_unit(&rng));
    }
    double u = dlcp_rng_unit(&rng);
    float v = (float)(-scale * log(1.0 - u));
    if (dlcp_rng_next(&rng) & 1u) {
      v = -v;
    }
    memcpy(g + i * sizeof(float), &v, sizeof(v));
  }
}

static int mlt_init(dlcp_sim *sim) {
  const dlcp_mem *mem = sim->mem;
  const dlcp_sim_config *cfg = &sim->cfg;
  const dlcp_sim_mlt_config *mc = &cfg->transport.mlt;
  mlt_sim *m = mem->calloc(1, sizeof(*m), mem->user);
  if (!m) {
    return DLCP_ERR_NOMEM;
  }
  sim->transport = m;
  m->sim = sim;
  m->mtu = cfg->transport.mss_bytes + cfg->transport.header_bytes;
  m->free_msg = DLCP_SIM_NONE;

  dlcp_mlt_config *b = &m->base;
  dlcp_mlt_config_default(b);
  /* The protocol's policy for a segment size, as the runtime applies it;
   * the scenario's thresholds then override. */
  dlcp_mlt_config_tune_segment(b, segment_bytes(cfg));
  b->npaths = mc->npaths;
  /* Under ECMP a path is a source port the switches hash, and a path
   * whose route loses takes another port (pathset.h, "Routes"), as the
   * runtime takes another socket; a source route is the path itself. */
  b->nroutes =
      cfg->transport.lb == DLCP_SIM_LB_SOURCE ? 1 : DLCP_MLT_ECMP_ROUTES;
  b->path_burst = mc->path_burst;
  b->eager_max_bytes = mc->eager_bytes;
  b->nprio = cfg->sw.nqueues > 1 ? cfg->sw.nqueues - 1 : 1;
  /* The core paces header + payload; the wire also carries IPv4/UDP.  Pace
   * at the share of the host's rate that makes a full packet leave exactly
   * at line rate (rounded up so the core's ns gap rounds to the wire's). */
  uint64_t core_len = (uint64_t)b->segment_size + DLCP_WIRE_DATA_HDR_LEN;
  uint64_t wire_len = core_len + MLT_IP_UDP_BYTES;
  uint64_t host_rate = cfg->topo.host_rate_bps;
  /* host_rate <= 10 Tbps and core_len < 2^16: no overflow. */
  b->line_rate_bps = (host_rate * core_len + wire_len - 1) / wire_len;
  b->min_rate_bps = b->line_rate_bps / 1000 ? b->line_rate_bps / 1000 : 1;
  b->t_low_ns = ns_of(mc->t_low_ps);
  b->t_high_ns = ns_of(mc->t_high_ps);
  b->queue_pkts = mc->queue_pkts;
  b->ack_every = mc->ack_every;
  b->burst_pkts = mc->burst_pkts;
  b->probe_timeout_ns = ns_of(mc->probe_timeout_ps);
  if (b->max_probe_timeout_ns < b->probe_timeout_ns) {
    b->max_probe_timeout_ns = b->probe_timeout_ns;
  }
  b->min_drain_ns = ns_of(mc->min_drain_ps);
  /* The fabric's base RTT (a generated topology's longest path), for the
   * first RTT estimate and the receivers' window grants. */
  uint32_t hops = dlcp_sim_topo_diameter(&cfg->topo);
  if (hops > 0) {
    uint64_t rtt_ns = ns_of(2ull * hops * dlcp_sim_topo_link_delay(&cfg->topo));
    if (rtt_ns > 0) {
      b->initial_rtt_ns = rtt_ns;
    }
  }
  /* host_rate <= 10 Tbps, RTT < 2^32 ns: no overflow in a double. */
  m->bdp_bytes = (uint64_t)((double)host_rate * (double)b->initial_rtt_ns / 8e9);
  b->max_transfers = 1u << 20;
  b->control_datagrams = true;
  /* A control message's acknowledgement waits one base RTT for a reply to
   * carry it: the host stacks' 1 ms default is 100 fabric RTTs here, and a
   * lost control message's RTO would be as long. */
  b->control_ack_delay_ns = b->initial_rtt_ns;
  b->rise_to_share = mc->srpt;
  if (dlcp_mlt_config_check(b) != 0) {
    return DLCP_ERR_CONFIG;
  }

  /* Collective jobs add flows as they run, up to coll_max_flow bytes. */
  m->max_flow = sim->coll_max_flow;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    if (sim->flows[i].size_bytes > m->max_flow) {
      m->max_flow = sim->flows[i].size_bytes;
    }
  }
  m->poll_buf = mem->malloc(MLT_POLL_BUF, mem->user);
  m->rx_len = DLCP_WIRE_DATA_HDR_LEN + (size_t)b->segment_size;
  m->rx_buf = mem->calloc(1, m->rx_len, mem->user);
  /* calloc: untouched pages of a large sink cost nothing. */
  m->sink = mem->calloc(1, (size_t)m->max_flow + 1, mem->user);
  if (!m->poll_buf || !m->rx_buf || !m->sink) {
    return DLCP_ERR_NOMEM;
  }
  if (mc->importance == DLCP_SIM_MLT_IMPORTANT_MAGNITUDE) {
    m->grad = mem->malloc((size_t)m->max_flow + 1, mem->user);
    if (!m->grad) {
      return DLCP_ERR_NOMEM;
    }
    fill_gradients(m->grad, m->max_flow, cfg->seed);
  }
  return 0;
}

static void mlt_fini(dlcp_sim *sim) {
  mlt_sim *m = shared(sim);
  if (!m) {
    return;
  }
  const dlcp_mem *mem = sim->mem;
  for (uint32_t i = 0; i < m->nmsgs; i++) {
    mem->free(m->msgs[i].bytes, mem->user);
  }
  mem->free(m->msgs, mem->user);
  mem->free(m->poll_buf, mem->user);
  mem->free(m->rx_buf, mem->user);
  mem->free(m->sink, mem->user);
  mem->free(m->grad, mem->user);
  mem->free(m, mem->user);
  sim->transport = NULL;
}

/* Stores a copy of a control message; returns its slot or DLCP_SIM_NONE. */
static uint32_t msg_store(mlt_sim *m, const uint8_t *bytes, size_t len) {
  const dlcp_mem *mem = m->sim->mem;
  uint32_t slot = m->free_msg;
  if (slot == DLCP_SIM_NONE) {
    if (m->nmsgs == m->msgs_cap) {
      uint32_t ncap = m->msgs_cap ? m->msgs_cap * 2 : 64;
      ctrl_msg *n = mem->realloc(m->msgs, ncap * sizeof(*n), mem->user);
      if (!n) {
        return DLCP_SIM_NONE;
      }
      m->msgs = n;
      m->msgs_cap = ncap;
    }
    slot = m->nmsgs++;
  } else {
    m->free_msg = m->msgs[slot].next_free;
  }
  ctrl_msg *c = &m->msgs[slot];
  c->bytes = mem->malloc(len, mem->user);
  if (!c->bytes) {
    c->next_free = m->free_msg;
    m->free_msg = slot;
    return DLCP_SIM_NONE;
  }
  memcpy(c->bytes, bytes, len);
  c->len = (uint32_t)len;
  return slot;
}

static void msg_release(mlt_sim *m, uint32_t slot) {
  ctrl_msg *c = &m->msgs[slot];
  m->sim->mem->free(c->bytes, m->sim->mem->user);
  c->bytes = NULL;
  c->next_free = m->free_msg;
  m->free_msg = slot;
}

/* ---- hosts and connections --------------------------------------------- */

static void nic_ready(void *obj, dlcp_sim_ps now);

static int mlt_host_new(dlcp_sim *sim, uint32_t host, void **pstate) {
  mlt_host *h = sim->mem->calloc(1, sizeof(*h), sim->mem->user);
  if (!h) {
    return DLCP_ERR_NOMEM;
  }
  h->sim = sim;
  h->host = host;
  dlcp_sim_timer_init(&h->nic_timer, &sim->engine, nic_ready, h);
  *pstate = h;
  return 0;
}

bool dlcp_sim_mlt_sum(const dlcp_sim *sim, dlcp_mlt_stats *c) {
  memset(c, 0, sizeof(*c));
  if (sim->ops != &dlcp_sim_mlt_ops || !sim->host_state) {
    return false;
  }
  for (uint32_t host = 0; host < sim->net.nhosts; host++) {
    const mlt_host *h = sim->host_state[host];
    for (uint32_t i = 0; h && i < h->cap; i++) {
      const mlt_peer *p = h->slots[i];
      if (p) {
        dlcp_mlt_stats st;
        dlcp_mlt_get_stats(p->conn, &st);
        dlcp_mlt_stats_add(c, &st);
      }
    }
  }
  return true;
}

static void mlt_host_del(dlcp_sim *sim, void *state) {
  mlt_host *h = state;
  for (uint32_t i = 0; i < h->cap; i++) {
    mlt_peer *p = h->slots[i];
    if (p) {
      dlcp_mlt_conn_del(p->conn);
      sim->mem->free(p, sim->mem->user);
    }
  }
  sim->mem->free(h->slots, sim->mem->user);
  dlcp_sim_timer_cancel(&h->nic_timer);
  sim->mem->free(h, sim->mem->user);
}

static uint32_t slot_of(const mlt_host *h, uint32_t peer) {
  uint32_t mask = h->cap - 1;
  uint32_t i = (uint32_t)dlcp_rng_mix(peer) & mask;
  while (h->slots[i] && h->slots[i]->peer != peer) {
    i = (i + 1) & mask;
  }
  return i;
}

static int table_grow(mlt_host *h) {
  const dlcp_mem *mem = h->sim->mem;
  uint32_t ncap = h->cap ? h->cap * 2 : 16;
  mlt_peer **old = h->slots;
  uint32_t ocap = h->cap;
  h->slots = mem->calloc(ncap, sizeof(*h->slots), mem->user);
  if (!h->slots) {
    h->slots = old;
    return DLCP_ERR_NOMEM;
  }
  h->cap = ncap;
  for (uint32_t i = 0; i < ocap; i++) {
    if (old[i]) {
      h->slots[slot_of(h, old[i]->peer)] = old[i];
    }
  }
  mem->free(old, mem->user);
  return 0;
}

/* The connection from |h| to |peer|, created on first use; NULL (and the
 * run fails) if memory ran out. */
static mlt_peer *peer_get(mlt_host *h, uint32_t peer) {
  dlcp_sim *sim = h->sim;
  if (h->cap) {
    mlt_peer *p = h->slots[slot_of(h, peer)];
    if (p) {
      return p;
    }
  }
  if ((h->count + 1) * 2 > h->cap && table_grow(h) != 0) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return NULL;
  }
  mlt_peer *p = sim->mem->calloc(1, sizeof(*p), sim->mem->user);
  if (!p) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return NULL;
  }
  dlcp_mlt_config cfg = shared(sim)->base;
  cfg.seed = dlcp_rng_mix(sim->cfg.seed ^ ((uint64_t)h->host << 32 | peer));
  /* Hosts are made before the transport's shared state: set here. */
  h->rx_share.bdp_bytes = shared(sim)->bdp_bytes;
  cfg.rx_share = &h->rx_share;
  int rv = dlcp_mlt_conn_new(&p->conn, &cfg, sim->mem,
                             ns_of(dlcp_sim_now(sim)));
  if (rv != 0) {
    sim->mem->free(p, sim->mem->user);
    dlcp_sim_engine_fail(&sim->engine, rv);
    return NULL;
  }
  p->host = h;
  p->peer = peer;
  p->tie = dlcp_rng_mix(cfg.seed ^ 0x7E5EED5ull);
  /* The core numbers a connection's paths 0..npaths-1, and the runtime
   * sends each from its own UDP port, which the fabric's ECMP hashes with
   * the pair's addresses (pkt->sport): every pair spreads over its own
   * paths, whatever tensor a packet carries.  Source routing reads a path
   * id digit by digit (switch.c), so ids 0..npaths-1 alone would give
   * every pair the same first digits and the same zero beyond them: on a
   * k = 16 fat tree with 8 paths, every MLT packet went through the core
   * switches of digit 0, one in eight.  A random multiple of npaths keeps
   * the digits npaths covers (a leaf-spine with as many spines as paths
   * routes exactly as before) and draws the rest per pair. */
  p->path_base =
      cfg.npaths * (uint32_t)(dlcp_rng_mix(cfg.seed ^ 0x9A75ull) & 0xFFFF);
  dlcp_sim_conn_timer_init(&p->timer, sim, h->host, p);
  h->slots[slot_of(h, peer)] = p;
  h->count++;
  return p;
}

/* ---- actions out ------------------------------------------------------- */

static uint8_t queue_of(const dlcp_sim *sim, uint8_t core_prio) {
  uint32_t k = sim->cfg.sw.nqueues;
  if (k <= 1) {
    return 0;
  }
  uint32_t q = 1u + core_prio;
  return (uint8_t)(q < k ? q : k - 1);
}

static void send_datagram(mlt_peer *p, const dlcp_mlt_action *act,
                          const uint8_t *hdr, dlcp_sim_ps now) {
  dlcp_sim *sim = p->host->sim;
  dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
  if (!pkt) {
    return;
  }
  bool data = act->payload_len > 0;
  pkt->kind = data ? DLCP_SIM_PKT_DATA : DLCP_SIM_PKT_ACK;
  pkt->flow = DLCP_SIM_NONE;
  pkt->src = p->host->host;
  pkt->dst = p->peer;
  pkt->payload_bytes = (uint32_t)act->payload_len;
  pkt->size_bytes =
      (uint32_t)(MLT_IP_UDP_BYTES + act->len + act->payload_len);
  pkt->prio = queue_of(sim, act->priority);
  pkt->ecn = act->ect ? DLCP_SIM_ECN_ECT : DLCP_SIM_ECN_NOT_ECT;
  pkt->lb = (uint8_t)sim->cfg.transport.lb;
  pkt->path = p->path_base + act->path;
  pkt->sport = (uint16_t)(1u + act->route);
  if (data) {
    /* DATA header (wire.h): flags at byte 16, tensor id at 20.  The tensor
     * id is the flow id, whose counters the packet adds to. */
    uint32_t flow = le32(hdr + 20);
    if (flow < sim->nflows) {
      dlcp_sim_flow *f = &sim->flows[flow];
      pkt->flow = flow;
      pkt->lb = f->lb;
      pkt->path = f->path + p->path_base + act->path;
      f->pkts_sent++;
      /* A window that timed out is what let this packet go: the wait is
       * charged to its flow as a timeout, as DCTCP's RTOs are. */
      uint64_t wt = dlcp_mlt_window_timeouts(p->conn);
      f->timeouts += wt - p->window_timeouts;
      p->window_timeouts = wt;
      if (hdr[16] & DLCP_WIRE_FLAG_RETX) {
        pkt->flags |= DLCP_SIM_PKT_F_RETX;
        f->retransmits++;
      }
    }
  }
  memcpy(pkt->hdr, hdr, act->len);
  pkt->hdr_len = (uint16_t)act->len;
  dlcp_sim_send(sim, p->host->host, pkt, now);
}

/* Sends a control datagram (CDATA or CACK) as MTU-sized fragments on
 * queue 0, the highest priority, as IP fragments a UDP datagram: the
 * bytes stay here until every fragment has arrived, and a lost fragment
 * loses the datagram (the core's control channel sends it again).  It
 * takes the core's path, as the runtime sends it from that path's
 * socket: ECMP hashes the port, source routing follows the path id (the
 * core starts each connection's control channel on a path of its own,
 * so the pairs' control traffic spreads over the spines); it is never
 * sprayed, so a message's fragments keep one route.  It took path 0's
 * socket whatever the core chose, and a job whose path 0 crossed a dead
 * link failed. */
static void send_control(mlt_peer *p, const dlcp_mlt_action *act,
                         const uint8_t *bytes, dlcp_sim_ps now) {
  size_t len = act->len;
  dlcp_sim *sim = p->host->sim;
  mlt_sim *m = shared(sim);
  uint32_t slot = msg_store(m, bytes, len);
  if (slot == DLCP_SIM_NONE) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return;
  }
  uint32_t room = m->mtu - MLT_IP_UDP_BYTES;
  m->msgs[slot].frags_left = (uint32_t)((len + room - 1) / room);
  size_t left = len;
  do {
    uint32_t chunk = left > room ? room : (uint32_t)left;
    left -= chunk;
    dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
    if (!pkt) {
      return;
    }
    pkt->kind = DLCP_SIM_PKT_CTRL;
    pkt->flow = DLCP_SIM_NONE;
    pkt->sport = (uint16_t)(1u + act->route);
    pkt->path = p->path_base + act->path;
    pkt->src = p->host->host;
    pkt->dst = p->peer;
    pkt->size_bytes = MLT_IP_UDP_BYTES + chunk;
    pkt->prio = 0;
    pkt->ecn = DLCP_SIM_ECN_ECT;
    pkt->lb = sim->cfg.transport.lb == DLCP_SIM_LB_SOURCE ? DLCP_SIM_LB_SOURCE
                                                          : DLCP_SIM_LB_ECMP;
    pkt->msg = slot;
    if (left == 0) {
      pkt->flags |= DLCP_SIM_PKT_F_MSG_END;
    }
    /* The datagram's first bytes, for packet captures. */
    size_t h = len < DLCP_SIM_PKT_HDR_MAX ? len : DLCP_SIM_PKT_HDR_MAX;
    memcpy(pkt->hdr, bytes, h);
    pkt->hdr_len = (uint16_t)h;
    dlcp_sim_send(sim, p->host->host, pkt, now);
  } while (left > 0);
}

static void complete(mlt_peer *p, const dlcp_mlt_completion *c,
                     dlcp_sim_ps now) {
  dlcp_sim *sim = p->host->sim;
  if (c->user_data >= sim->nflows) {
    return;
  }
  dlcp_sim_flow *f = &sim->flows[c->user_data];
  if (c->status != 0) {
    f->status = c->status;
    if (f->xfer != DLCP_SIM_NONE) {
      dlcp_sim_coll_flow_failed(sim, f, c->is_send, c->status, now);
    }
    return;
  }
  /* An eager sender is done at once, as in the runtime, so a collective's
   * next step may start; the flow, for its FCT, when its bytes land. */
  bool eager = dlcp_mlt_config_eager(&shared(sim)->base, f->size_bytes);
  if (c->is_send && eager) {
    if (f->xfer != DLCP_SIM_NONE) {
      dlcp_sim_coll_flow_sent_whole(sim, f, now);
    }
  } else if (c->is_send) {
    dlcp_sim_flow_finished(sim, f, now);
  } else {
    f->delivered_bytes = c->delivered_bytes;
    if (f->xfer != DLCP_SIM_NONE) {
      /* The collective's receive zero-fills and reports these. */
      for (size_t i = 0; i < c->nmissing; i++) {
        dlcp_sim_coll_flow_hole(sim, f, c->missing[i].offset,
                                c->missing[i].len);
      }
    }
    dlcp_sim_flow_delivered(sim, f, now);
    if (eager) {
      dlcp_sim_flow_finished(sim, f, now);
    }
  }
}

/* Whether the host's NIC holds its backlog: then its connections wait. */
static bool nic_full(const mlt_host *h) {
  return dlcp_sim_host_nic(&h->sim->net, h->host)->bytes >=
         MLT_NIC_BACKLOG_BYTES;
}

/* Wakes the NIC timer when half the backlog has drained (at once if it
 * has already). */
static void nic_wait(mlt_host *h, dlcp_sim_ps now) {
  const dlcp_sim_port *nic = dlcp_sim_host_nic(&h->sim->net, h->host);
  uint64_t half = MLT_NIC_BACKLOG_BYTES / 2;
  uint64_t excess = nic->bytes > half ? nic->bytes - half : 0;
  dlcp_sim_ps at = now + dlcp_sim_serialization_ps(excess, nic->rate_bps);
  if (!dlcp_sim_timer_armed(&h->nic_timer) || at < h->nic_timer.deadline) {
    dlcp_sim_timer_arm(&h->nic_timer, at);
  }
}

/* |p| has data due and no room for it: it waits for the NIC's turn. */
static void block(mlt_peer *p, dlcp_sim_ps now) {
  mlt_host *h = p->host;
  if (srpt(h->sim)) {
    p->send_class = dlcp_mlt_send_class(p->conn);
  } else {
    dlcp_sim_timer_cancel(&p->timer.timer); /* its turn comes soon */
  }
  p->blocked = true;
  p->blocked_next = NULL;
  if (h->blocked_tail) {
    h->blocked_tail->blocked_next = p;
  } else {
    h->blocked = p;
  }
  h->blocked_tail = p;
  nic_wait(h, now);
}

/* Takes the waiting connection to serve next out of the list: the one
 * that has waited longest (in turn), or with srpt the lowest send class,
 * then the lowest tie rank. */
static mlt_peer *unblock_next(mlt_host *h) {
  mlt_peer *best = h->blocked, *best_prev = NULL;
  if (srpt(h->sim)) {
    for (mlt_peer *prev = best, *q = best->blocked_next; q;
         prev = q, q = q->blocked_next) {
      if (q->send_class < best->send_class ||
          (q->send_class == best->send_class && q->tie < best->tie)) {
        best = q;
        best_prev = prev;
      }
    }
  }
  if (best_prev) {
    best_prev->blocked_next = best->blocked_next;
  } else {
    h->blocked = best->blocked_next;
  }
  if (h->blocked_tail == best) {
    h->blocked_tail = best_prev;
  }
  best->blocked = false;
  return best;
}

static void service(mlt_peer *p, dlcp_sim_ps now);

/* The NIC drained: the waiting connections go on, one packet at a time
 * in unblock_next's order, until it fills again. */
static void nic_ready(void *obj, dlcp_sim_ps now) {
  mlt_host *h = obj;
  while (h->blocked && !nic_full(h)) {
    service(unblock_next(h), now);
    if (h->sim->engine.error) {
      return;
    }
  }
  if (h->blocked) {
    nic_wait(h, now);
  }
}

/* Polls |p|'s connection until it is quiet, then arms its timer.  A data
 * packet that finds the NIC full or other connections waiting is the
 * connection's last until its turn, if it has more due.  Served in turn,
 * a waiting connection's turn comes within a few packets and it is left
 * alone until then; with srpt a long transfer may wait for many others,
 * so its ACKs, control and timers go on meanwhile (its peer must not read
 * the silence as a stalled transfer). */
static void service(mlt_peer *p, dlcp_sim_ps now) {
  mlt_host *h = p->host;
  dlcp_sim *sim = h->sim;
  mlt_sim *m = shared(sim);
  uint64_t now_ns = ns_of(now);
  if (p->blocked && !srpt(sim)) {
    return;
  }
  for (;;) {
    dlcp_mlt_action act;
    int rv = p->blocked
                 ? dlcp_mlt_poll_control(p->conn, &act, m->poll_buf,
                                         MLT_POLL_BUF, now_ns)
                 : dlcp_mlt_poll(p->conn, &act, m->poll_buf, MLT_POLL_BUF,
                                 now_ns);
    if (rv != 0) {
      dlcp_sim_engine_fail(&sim->engine, rv);
      return;
    }
    if (act.type == DLCP_MLT_ACT_NONE) {
      break;
    }
    switch (act.type) {
    case DLCP_MLT_ACT_DATAGRAM:
      /* The preamble's type (byte 3): the control channel's datagrams
       * (any size, up to 64 KB) travel out of line. */
      if (m->poll_buf[3] == DLCP_WIRE_CDATA ||
          m->poll_buf[3] == DLCP_WIRE_CACK) {
        send_control(p, &act, m->poll_buf, now);
        break;
      }
      send_datagram(p, &act, m->poll_buf, now);
      if (act.payload_len > 0 && (nic_full(h) || h->blocked) &&
          dlcp_mlt_next_deadline(p->conn) <= now_ns) {
        block(p, now);
        if (!srpt(sim)) {
          return;
        }
      }
      break;
    case DLCP_MLT_ACT_CONTROL:
    case DLCP_MLT_ACT_NOTE:
      /* The simulator runs the core with control_datagrams: no stream;
       * its collectives send no NOTEs through the core. */
      dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_INVALID_ARGUMENT);
      return;
    case DLCP_MLT_ACT_COMPLETE:
      complete(p, &act.completion, now);
      break;
    case DLCP_MLT_ACT_NONE:
      break;
    }
    if (sim->engine.error) {
      return;
    }
  }
  dlcp_tstamp next = p->blocked ? dlcp_mlt_next_control_deadline(p->conn)
                                : dlcp_mlt_next_deadline(p->conn);
  if (dlcp_sim_timer_follow(&p->timer.timer, next, now)) {
    dlcp_sim_timer_arm(&p->timer.timer, now);
  }
}

/* ---- events in --------------------------------------------------------- */

static uint8_t layer_prio(void *user, uint32_t tensor, uint32_t layer,
                          uint64_t offset, uint32_t len) {
  const mlt_sim *m = user;
  const dlcp_sim *sim = m->sim;
  (void)layer;
  (void)len;
  uint64_t size = sim->flows[tensor].size_bytes;
  uint64_t layers = sim->cfg.transport.mlt.layers;
  /* offset < 2^40 and layers <= 65535 (scenario.c): no overflow. */
  uint64_t l = size ? offset * layers / size : 0;
  return (uint8_t)(l * m->base.nprio / layers);
}

/* Posts |flow|'s receive on its receiver, which then sends START. */
static int post_receive(dlcp_sim *sim, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  mlt_sim *m = shared(sim);
  const dlcp_sim_mlt_config *mc = &sim->cfg.transport.mlt;
  mlt_peer *rx = peer_get(sim->host_state[flow->dst], flow->src);
  if (!rx) {
    return DLCP_ERR_NOMEM;
  }
  dlcp_mlt_recv r = {.tensor = flow->id,
                     .buf = m->sink,
                     .len = flow->size_bytes,
                     .loss_bound = flow->loss_bound >= 0.0 ? flow->loss_bound
                                                           : mc->loss_bound,
                     .stage = flow->stage,
                     .user_data = flow->id};
  int rv = dlcp_mlt_post_recv(rx->conn, &r, ns_of(now));
  if (rv != 0) {
    return rv;
  }
  if (flow->xfer != DLCP_SIM_NONE) {
    /* A collective's: polled once this instant's posts are in, as the
     * runtime polls its connections after a collective's whole batch of
     * posts.  A START's grant divides the host's pool among the receives
     * posted, and one polled at its own post took the whole pool, its
     * batch-mates the window's floor (a 256 KB RAT all-reduce of 128
     * ranks 163.8 -> 124.5 us, a 4 MiB PS of 16 ranks 970.7 -> 733.0). */
    dlcp_sim_timer_arm(&rx->timer.timer, now);
  } else {
    service(rx, now); /* as dlcp_post_recv, which sends what it can */
  }
  return 0;
}

static int mlt_flow_expect(void *state, dlcp_sim_flow *flow,
                           dlcp_sim_ps now) {
  mlt_host *h = state;
  return post_receive(h->sim, flow, now);
}

/* The receive posted ahead for |flow| is withdrawn before its sender
 * posted: the core tells the sender (STOP) if its START went out. */
static int mlt_flow_unexpect(void *state, dlcp_sim_flow *flow,
                             dlcp_sim_ps now) {
  mlt_host *h = state;
  mlt_peer *rx = peer_get(h, flow->src);
  if (!rx) {
    return DLCP_ERR_NOMEM;
  }
  int rv = dlcp_mlt_cancel_unsent_recv(rx->conn, flow->id, ns_of(now));
  if (rv == 0) {
    service(rx, now);
  }
  return rv;
}

static int mlt_flow_start(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  mlt_host *h = state;
  dlcp_sim *sim = h->sim;
  mlt_sim *m = shared(sim);
  const dlcp_sim_mlt_config *mc = &sim->cfg.transport.mlt;
  mlt_peer *tx = peer_get(h, flow->dst);
  if (!tx) {
    return DLCP_ERR_NOMEM;
  }
  uint64_t now_ns = ns_of(now);
  int rv = flow->expected ? 0 : post_receive(sim, flow, now);
  if (rv != 0) {
    return rv;
  }
  uint32_t nprio = m->base.nprio;
  dlcp_mlt_send s = {
      .tensor = flow->id,
      .buf = m->grad ? m->grad : m->sink,
      .len = flow->size_bytes,
      /* layer * nprio / nlayers == the flow's priority */
      .layer = flow->prio < nprio ? flow->prio : nprio - 1,
      .nlayers = nprio,
      .prio_fn = mc->layers ? layer_prio : NULL,
      .prio_user = m,
      .importance = mc->importance == DLCP_SIM_MLT_IMPORTANT_NONE
                        ? DLCP_MLT_IMPORTANCE_NONE
                    : mc->importance == DLCP_SIM_MLT_IMPORTANT_MAGNITUDE
                        ? DLCP_MLT_IMPORTANCE_F32_MAGNITUDE
                        : DLCP_MLT_IMPORTANCE_ALL,
      .user_data = flow->id};
  rv = dlcp_mlt_post_send(tx->conn, &s, now_ns);
  if (rv != 0) {
    return rv;
  }
  service(tx, now);
  return 0;
}

static void mlt_on_packet(void *state, dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  mlt_host *h = state;
  dlcp_sim *sim = h->sim;
  mlt_sim *m = shared(sim);
  mlt_peer *p = pkt->src < sim->net.nhosts ? peer_get(h, pkt->src) : NULL;
  if (!p) {
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  uint64_t now_ns = ns_of(now);
  switch ((dlcp_sim_pkt_kind)pkt->kind) {
  case DLCP_SIM_PKT_DATA:
  case DLCP_SIM_PKT_ACK: {
    /* A trimmed packet lost its payload: MLT does not use trimming, so it
     * is a loss.  Payload bytes are not carried; the zeros after the header
     * in rx_buf stand in for them. */
    size_t len = (size_t)pkt->hdr_len + pkt->payload_bytes;
    if ((pkt->flags & DLCP_SIM_PKT_F_TRIMMED) || len > m->rx_len) {
      break;
    }
    memcpy(m->rx_buf, pkt->hdr, pkt->hdr_len);
    /* A datagram the core rejects is counted in its stats; not an error. */
    dlcp_mlt_arrival arr = {.ce = pkt->ecn == DLCP_SIM_ECN_CE};
    (void)dlcp_mlt_on_datagram_arrived(p->conn, m->rx_buf, len, &arr, now_ns);
    service(p, now);
    break;
  }
  case DLCP_SIM_PKT_NOTE:
  case DLCP_SIM_PKT_INA:
    break;
  case DLCP_SIM_PKT_CTRL:
    /* The datagram is whole when its last fragment arrives; one lost
     * fragment loses it (its slot is freed with the simulation). */
    if (pkt->msg < m->nmsgs && m->msgs[pkt->msg].bytes &&
        --m->msgs[pkt->msg].frags_left == 0) {
      uint32_t slot = pkt->msg;
      dlcp_mlt_arrival arr = {.ce = pkt->ecn == DLCP_SIM_ECN_CE};
      (void)dlcp_mlt_on_datagram_arrived(p->conn, m->msgs[slot].bytes,
                                         m->msgs[slot].len, &arr, now_ns);
      msg_release(m, slot);
      service(p, now);
    }
    break;
  }
  dlcp_sim_packet_drop(sim, pkt);
}

static void mlt_on_timer(void *state, void *conn, dlcp_sim_ps now) {
  (void)state;
  service(conn, now);
}

static void mlt_flow_free(dlcp_sim *sim, dlcp_sim_flow *flow) {
  (void)sim;
  flow->tx = flow->rx = NULL;
}

const dlcp_sim_transport_ops dlcp_sim_mlt_ops = {
    .name = "mlt",
    .init = mlt_init,
    .fini = mlt_fini,
    .host_new = mlt_host_new,
    .host_del = mlt_host_del,
    .flow_start = mlt_flow_start,
    .flow_expect = mlt_flow_expect,
    .flow_unexpect = mlt_flow_unexpect,
    .on_packet = mlt_on_packet,
    .on_timer = mlt_on_timer,
    .flow_free = mlt_flow_free,
};
