/*
 * ndp.c: NDP's end hosts (Handley et al., "Re-architecting datacenter
 * networks and stacks for low latency and high performance", SIGCOMM
 * 2017, sections 3.1-3.3).
 *
 * NDP relies on switches that trim instead of dropping: a data packet that
 * finds its queue full loses its payload and its header is forwarded on
 * the high-priority queue (queue.c, switch.trimming, with the data queue's
 * limit as its ECN threshold and queue 0 for headers and control; see
 * scenarios/ndp-incast.yaml).  The hosts:
 *   - Sender: the first window (init_window_pkts, default one BDP) leaves
 *     at line rate with no handshake; every packet is sprayed over all
 *     equal-cost paths (per-packet load balancing) and is not ECN-capable,
 *     so the switch's threshold trims it.  After that the sender sends
 *     only when pulled: each PULL lets it send one packet, a NACKed one
 *     first (lowest sequence), else the next new one.
 *   - Receiver: every data packet is answered at once on queue 0 by an
 *     ACK (full packet) or a NACK (trimmed header), and earns one PULL.
 *     PULLs of all the receiver's flows share one queue that a pacer
 *     drains at one PULL per MTU serialization time of the receiver's link,
 *     so the data it pulls arrives at exactly its line rate (the pull
 *     queue is FIFO over flows; the paper allows priorities there).  A
 *     PULL carries the flow's cumulative pull number and the sender sends
 *     one packet per number it had not seen, so a lost PULL is made up by
 *     the next one (section 3.2).
 *   - Losses NDP cannot see (a header or control packet dropped because
 *     queue 0 overflowed, random loss) are repaired by a timeout per
 *     packet, as in htsim's NDP: a packet unanswered rto_ps (default 10
 *     base RTTs) after it left is treated as NACKed and sent again at
 *     once, without waiting for a PULL.  Each packet in flight stands for
 *     a PULL to come and a lost one takes its PULL with it, so a flow that
 *     waited for PULLs to resend would lose a packet of its window with
 *     every loss (a 16 MB flow at 1 % loss on every link took 160 ms
 *     instead of 1.4 when a timeout resent one packet).  A flow with
 *     nothing in flight that has heard nothing for rto_ps (its last PULLs
 *     lost) sends one packet, whose arrival restarts the pull clock.
 * ACK, NACK and PULL are DLCP_SIM_PKT_CTRL packets of ack_size bytes whose
 * |msg| says which.  FCT ends when the sender has every ACK.
 */
#include "sim/segments.h"

typedef enum conn_role {
  ROLE_TX = 1,
  ROLE_RX = 2,
  ROLE_PACER = 3
} conn_role;

enum { NDP_ACK = 1, NDP_NACK = 2, NDP_PULL = 3 };

/* Data rides queue 1; trimmed headers and control move to queue 0. */
enum { NDP_DATA_QUEUE = 1 };

typedef struct ndp_host {
  dlcp_sim *sim;
  uint32_t host;
  uint32_t init_window;
  dlcp_sim_ps rto;
  dlcp_sim_ps pull_interval;
  /* The pull pacer: flow ids owed one PULL each, in a ring. */
  int pacer_role; /* the pacer timer's conn points here */
  dlcp_sim_conn_timer pacer;
  dlcp_sim_ps next_pull_ps;
  uint32_t *pulls;
  uint32_t pull_head, pull_len, pull_cap; /* cap: 0 or a power of two */
} ndp_host;

/* Segment states: NEW, IN_FLIGHT, NACKED (to send again first), ACKED. */
typedef struct ndp_tx {
  dlcp_sim_seg_tx seg; /* first (segments.h) */
  uint64_t next;       /* next new segment */
  uint64_t retx_lo;    /* no NACKed segment below this */
  uint64_t nnacked;
  uint64_t pulled;   /* the highest pull number acted on */
  dlcp_sim_ps *sent; /* per segment: when it last left */
  dlcp_sim_ps heard; /* the last ACK, NACK or PULL */
  dlcp_sim_conn_timer rto_timer;
} ndp_tx;

static int ndp_host_new(dlcp_sim *sim, uint32_t host, void **pstate) {
  ndp_host *h = sim->mem->calloc(1, sizeof(*h), sim->mem->user);
  if (!h) {
    return DLCP_ERR_NOMEM;
  }
  const dlcp_sim_ndp_config *c = &sim->cfg.transport.ndp;
  h->sim = sim;
  h->host = host;
  h->init_window = dlcp_sim_seg_window(sim, c->init_window_pkts);
  h->rto = dlcp_sim_seg_rto(sim, c->rto_ps, 10);
  const dlcp_sim_port *nic = dlcp_sim_host_nic(&sim->net, host);
  h->pull_interval = dlcp_sim_serialization_ps(
      sim->cfg.transport.mss_bytes + sim->cfg.transport.header_bytes,
      nic->rate_bps);
  h->pacer_role = ROLE_PACER;
  dlcp_sim_conn_timer_init(&h->pacer, sim, host, &h->pacer_role);
  *pstate = h;
  return 0;
}

static void ndp_host_del(dlcp_sim *sim, void *state) {
  ndp_host *h = state;
  sim->mem->free(h->pulls, sim->mem->user);
  sim->mem->free(h, sim->mem->user);
}

/* An ACK or NACK of segment |seq|, or PULL number |seq|, from |flow|'s
 * receiver to its sender. */
static void send_ctrl(dlcp_sim *sim, const dlcp_sim_flow *flow, uint32_t what,
                      uint64_t seq, dlcp_sim_ps now) {
  dlcp_sim_packet *pkt =
      dlcp_sim_seg_packet(sim, flow, DLCP_SIM_PKT_CTRL, false);
  if (!pkt) {
    return;
  }
  pkt->size_bytes = sim->cfg.transport.ack_bytes;
  pkt->prio = 0;
  pkt->msg = what;
  pkt->seq = seq;
  pkt->tx_ps = now;
  dlcp_sim_send(sim, flow->dst, pkt, now);
}

/* How long what |host|'s NIC holds in queues 0..|prio| takes to leave it:
 * when a packet just queued at |prio| will have left, but for control
 * packets that pass it later. */
static dlcp_sim_ps nic_wait(dlcp_sim *sim, uint32_t host, uint32_t prio) {
  const dlcp_sim_port *nic = dlcp_sim_host_nic(&sim->net, host);
  uint64_t bytes = 0;
  for (uint32_t q = 0; q <= prio && q < nic->cfg->nqueues; q++) {
    bytes += nic->q[q].bytes;
  }
  return dlcp_sim_serialization_ps(bytes, nic->rate_bps);
}

static void send_segment(ndp_host *h, ndp_tx *tx, uint64_t seg,
                         dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  dlcp_sim_packet *pkt = dlcp_sim_seg_data(sim, flow, seg, now);
  if (!pkt) {
    return;
  }
  pkt->prio = NDP_DATA_QUEUE;
  if (tx->seg.st[seg] != DLCP_SIM_SEG_NEW) {
    pkt->flags |= DLCP_SIM_PKT_F_RETX;
    flow->retransmits++;
  }
  tx->seg.st[seg] = DLCP_SIM_SEG_IN_FLIGHT;
  flow->pkts_sent++;
  dlcp_sim_send(sim, flow->src, pkt, now);
  /* The timeout runs from when the packet leaves the host: a host that
   * starts many flows at once queues their first windows in its NIC for
   * longer than the timeout (htsim adds the same wait to a send time). */
  tx->sent[seg] = now + nic_wait(sim, flow->src, NDP_DATA_QUEUE);
  if (!dlcp_sim_timer_armed(&tx->rto_timer.timer)) {
    dlcp_sim_timer_arm(&tx->rto_timer.timer, tx->sent[seg] + h->rto);
  }
}

/* Sends one packet: the lowest NACKed segment, else the next new one.
 * Returns false if there was nothing to send. */
static bool send_one(ndp_host *h, ndp_tx *tx, dlcp_sim_ps now) {
  if (tx->nnacked > 0) {
    while (tx->seg.st[tx->retx_lo] != DLCP_SIM_SEG_NACKED) {
      tx->retx_lo++;
    }
    tx->nnacked--;
    send_segment(h, tx, tx->retx_lo++, now);
    return true;
  }
  if (tx->next < tx->seg.nseg) {
    send_segment(h, tx, tx->next++, now);
    return true;
  }
  return false;
}

static int ndp_flow_start(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  ndp_host *h = state;
  dlcp_sim *sim = h->sim;
  ndp_tx *tx = dlcp_sim_seg_tx_new(sim, flow, sizeof(*tx), ROLE_TX);
  if (!tx) {
    return DLCP_ERR_NOMEM;
  }
  tx->sent = sim->mem->malloc(tx->seg.nseg * sizeof(*tx->sent), sim->mem->user);
  dlcp_sim_conn_timer_init(&tx->rto_timer, sim, h->host, tx);
  flow->tx = tx;
  if (!tx->sent) {
    return DLCP_ERR_NOMEM;
  }
  tx->heard = now;
  for (uint32_t i = 0; i < h->init_window && send_one(h, tx, now); i++) {
  }
  return 0;
}

static void nack(ndp_tx *tx, uint64_t seg) {
  tx->seg.st[seg] = DLCP_SIM_SEG_NACKED;
  tx->nnacked++;
  if (seg < tx->retx_lo) {
    tx->retx_lo = seg;
  }
}

/* A PULL numbered |pull_no|: one packet for each number not seen yet (a
 * PULL overtaken by a later one on another path is then worth nothing). */
static void on_pull(ndp_host *h, ndp_tx *tx, uint64_t pull_no,
                    dlcp_sim_ps now) {
  for (; tx->pulled < pull_no; tx->pulled++) {
    send_one(h, tx, now);
  }
}

static void on_ctrl(ndp_host *h, ndp_tx *tx, const dlcp_sim_packet *pkt,
                    dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  tx->heard = now;
  if (pkt->msg == NDP_PULL) {
    on_pull(h, tx, pkt->seq, now);
    return;
  }
  uint64_t seg = pkt->seq;
  if (seg >= tx->seg.nseg) {
    return;
  }
  uint8_t st = tx->seg.st[seg];
  switch (pkt->msg) {
  case NDP_ACK:
    if (st == DLCP_SIM_SEG_ACKED) {
      return;
    }
    if (st == DLCP_SIM_SEG_NACKED) {
      tx->nnacked--;
    }
    if (dlcp_sim_seg_tx_ack(sim, &tx->seg, flow, seg)) {
      dlcp_sim_timer_cancel(&tx->rto_timer.timer);
      sim->mem->free(tx->sent, sim->mem->user);
      tx->sent = NULL;
      dlcp_sim_flow_finished(sim, flow, now);
    }
    return;
  case NDP_NACK:
    if (st == DLCP_SIM_SEG_IN_FLIGHT) {
      nack(tx, seg);
    }
    return;
  default:
    return;
  }
}

/* The timer is due no later than rto after the earliest packet in flight
 * left, or after the flow last heard anything when none is in flight.  A
 * send arms it only when it is disarmed, so it may fire early, and then
 * it only re-arms. */
static void on_rto(ndp_host *h, ndp_tx *tx, dlcp_sim_ps now) {
  dlcp_sim_flow *flow = &h->sim->flows[tx->seg.flow];
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  uint64_t lost = 0;
  dlcp_sim_ps due = DLCP_SIM_PS_NEVER;
  for (uint64_t s = tx->seg.una; s < tx->next; s++) {
    if (tx->seg.st[s] != DLCP_SIM_SEG_IN_FLIGHT) {
      continue;
    }
    if (tx->sent[s] + h->rto <= now) {
      nack(tx, s);
      lost++;
    } else if (tx->sent[s] + h->rto < due) {
      due = tx->sent[s] + h->rto;
    }
  }
  bool quiet = lost == 0 && due == DLCP_SIM_PS_NEVER;
  if (quiet && tx->heard + h->rto > now) {
    dlcp_sim_timer_arm(&tx->rto_timer.timer, tx->heard + h->rto);
    return;
  }
  if (lost > 0 || quiet) {
    flow->timeouts++;
  }
  /* Each packet lost goes again now, in place of the PULL it took with
   * it (send_segment re-arms the timer for them). */
  for (uint64_t i = 0; i < (quiet ? 1 : lost) && send_one(h, tx, now); i++) {
  }
  if (due != DLCP_SIM_PS_NEVER) {
    dlcp_sim_timer_arm(&tx->rto_timer.timer, due);
  } else if (!dlcp_sim_timer_armed(&tx->rto_timer.timer)) {
    dlcp_sim_timer_arm(&tx->rto_timer.timer, now + h->rto);
  }
}

/* flow_free: the send times, then the shared per-segment state. */
static void ndp_flow_free(dlcp_sim *sim, dlcp_sim_flow *flow) {
  ndp_tx *tx = flow->tx;
  if (tx) {
    sim->mem->free(tx->sent, sim->mem->user);
  }
  dlcp_sim_seg_flow_free(sim, flow);
}

/* The receiver's pull pacer. */
static int pull_push(ndp_host *h, uint32_t flow) {
  const dlcp_mem *mem = h->sim->mem;
  if (h->pull_len == h->pull_cap) {
    uint32_t ncap = h->pull_cap ? h->pull_cap * 2 : 64;
    uint32_t *n = mem->malloc(ncap * sizeof(*n), mem->user);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < h->pull_len; i++) {
      n[i] = h->pulls[(h->pull_head + i) & (h->pull_cap - 1)];
    }
    mem->free(h->pulls, mem->user);
    h->pulls = n;
    h->pull_cap = ncap;
    h->pull_head = 0;
  }
  h->pulls[(h->pull_head + h->pull_len++) & (h->pull_cap - 1)] = flow;
  return 0;
}

/* Sends the next PULL owed to a flow still receiving, if any. */
static void pull_send_next(ndp_host *h, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  while (h->pull_len > 0) {
    uint32_t id = h->pulls[h->pull_head];
    h->pull_head = (h->pull_head + 1) & (h->pull_cap - 1);
    h->pull_len--;
    dlcp_sim_flow *flow = &sim->flows[id];
    dlcp_sim_seg_rx *rx = flow->rx;
    if (flow->rx_done_ps == DLCP_SIM_PS_NEVER && rx) {
      send_ctrl(sim, flow, NDP_PULL, ++rx->pulls, now);
      h->next_pull_ps = now + h->pull_interval;
      break;
    }
  }
  if (h->pull_len > 0 && !dlcp_sim_timer_armed(&h->pacer.timer)) {
    dlcp_sim_timer_arm(&h->pacer.timer, h->next_pull_ps);
  }
}

static void pull_owe(ndp_host *h, uint32_t flow, dlcp_sim_ps now) {
  if (pull_push(h, flow) != 0) {
    dlcp_sim_engine_fail(&h->sim->engine, DLCP_ERR_NOMEM);
    return;
  }
  if (dlcp_sim_timer_armed(&h->pacer.timer)) {
    return;
  }
  if (now >= h->next_pull_ps) {
    pull_send_next(h, now);
  } else {
    dlcp_sim_timer_arm(&h->pacer.timer, h->next_pull_ps);
  }
}

static void on_data(ndp_host *h, dlcp_sim_flow *flow,
                    const dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_seg_rx *rx = dlcp_sim_seg_rx_of(sim, flow, ROLE_RX);
  uint64_t seg = pkt->seq;
  if (!rx || seg >= rx->nseg) {
    return;
  }
  if (pkt->flags & DLCP_SIM_PKT_F_TRIMMED) {
    send_ctrl(sim, flow, dlcp_sim_seg_rx_has(rx, seg) ? NDP_ACK : NDP_NACK,
              seg, now);
  } else {
    dlcp_sim_seg_rx_mark(sim, rx, flow, seg, now);
    send_ctrl(sim, flow, NDP_ACK, seg, now);
  }
  if (flow->rx_done_ps == DLCP_SIM_PS_NEVER) {
    pull_owe(h, flow->id, now);
  }
}

static void ndp_on_packet(void *state, dlcp_sim_packet *pkt,
                          dlcp_sim_ps now) {
  ndp_host *h = state;
  dlcp_sim *sim = h->sim;
  if (pkt->flow < sim->nflows) {
    dlcp_sim_flow *flow = &sim->flows[pkt->flow];
    if (pkt->kind == DLCP_SIM_PKT_DATA) {
      on_data(h, flow, pkt, now);
    } else if (pkt->kind == DLCP_SIM_PKT_CTRL && flow->tx) {
      on_ctrl(h, flow->tx, pkt, now);
    }
  }
  dlcp_sim_packet_drop(sim, pkt);
}

static void ndp_on_timer(void *state, void *conn, dlcp_sim_ps now) {
  switch (*(const int *)conn) {
  case ROLE_TX:
    on_rto(state, conn, now);
    return;
  case ROLE_PACER:
    pull_send_next(state, now);
    return;
  default:
    return;
  }
}

const dlcp_sim_transport_ops dlcp_sim_ndp_ops = {
    .name = "ndp",
    .init = NULL,
    .fini = NULL,
    .host_new = ndp_host_new,
    .host_del = ndp_host_del,
    .flow_start = ndp_flow_start,
    .on_packet = ndp_on_packet,
    .on_timer = ndp_on_timer,
    .flow_free = ndp_flow_free};
