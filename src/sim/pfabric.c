/*
 * pfabric.c: pFabric's end hosts (Alizadeh et al., "pFabric: Minimal
 * Near-Optimal Datacenter Transport", SIGCOMM 2013, section 4.2).
 *
 * pFabric moves scheduling into the switches (pfabric_queue.c: serve the
 * smallest remaining size first, drop the largest when full) and keeps the
 * hosts minimal:
 *   - every packet carries its flow's remaining size (bytes not yet
 *     ACKed) as its rank; ACKs and probes have rank 0;
 *   - a flow starts at line rate with a window of one BDP
 *     (init_cwnd_pkts, default from the topology) and sprays every packet
 *     over all equal-cost paths;
 *   - the receiver ACKs every packet selectively (the segment it got), so
 *     reordering from spraying costs nothing and there is no fast
 *     retransmit;
 *   - there is no RTT estimator: a fixed timeout (rto_ps, default 3 base
 *     RTTs) that fires when no ACK arrived for that long declares every
 *     unACKed packet lost, halves ssthresh and restarts slow start from a
 *     window of one; additive increase above ssthresh;
 *   - after probe_after consecutive timeouts the flow stops sending data
 *     and sends one header-only probe per timeout; the probe's ACK ends
 *     probe mode (the paper's guard against a starved flow wasting
 *     bandwidth).
 * The host NIC keeps the simulator's strict-priority FIFOs; the rank is
 * mapped onto them logarithmically (queue 1 + log4 of the remaining
 * packets, control on queue 0), an approximation of the paper's
 * prioritised NIC.  Packets are not ECN-capable.
 */
#include <string.h>

#include "sim/segments.h"

typedef enum conn_role { ROLE_TX = 1, ROLE_RX = 2 } conn_role;

/* pkt->msg marks a probe and its ACK (transport-private use). */
#define PFABRIC_PROBE 1u

typedef struct pf_host {
  dlcp_sim *sim;
  uint32_t host;
  uint32_t init_cwnd;
  dlcp_sim_ps rto;
} pf_host;

/* Segment states: NEW (to send), IN_FLIGHT, ACKED. */
typedef struct pf_tx {
  dlcp_sim_seg_tx seg; /* first (segments.h) */
  uint64_t next;       /* scan start for NEW segments */
  uint64_t high;       /* one past the highest segment ever sent */
  uint64_t inflight;
  double cwnd;     /* segments */
  double ssthresh; /* segments */
  uint32_t consecutive_timeouts;
  bool probing;
  dlcp_sim_conn_timer rto_timer;
} pf_tx;

static int pf_host_new(dlcp_sim *sim, uint32_t host, void **pstate) {
  pf_host *h = sim->mem->calloc(1, sizeof(*h), sim->mem->user);
  if (!h) {
    return DLCP_ERR_NOMEM;
  }
  const dlcp_sim_pfabric_config *c = &sim->cfg.transport.pfabric;
  h->sim = sim;
  h->host = host;
  h->init_cwnd = dlcp_sim_seg_window(sim, c->init_cwnd_pkts);
  h->rto = dlcp_sim_seg_rto(sim, c->rto_ps, 3);
  *pstate = h;
  return 0;
}

static void pf_host_del(dlcp_sim *sim, void *state) {
  sim->mem->free(state, sim->mem->user);
}

static uint64_t remaining_bytes(const dlcp_sim *sim, const dlcp_sim_flow *flow,
                                const pf_tx *tx) {
  uint64_t acked = tx->seg.nacked * sim->cfg.transport.mss_bytes;
  return acked >= flow->size_bytes ? 0 : flow->size_bytes - acked;
}

/* The NIC queue of a data packet: 1 + log4(remaining packets), capped. */
static uint8_t nic_queue(const dlcp_sim *sim, uint64_t remaining) {
  uint32_t nq = sim->cfg.sw.nqueues;
  if (nq < 2) {
    return 0;
  }
  uint64_t pkts = remaining / sim->cfg.transport.mss_bytes + 1;
  uint32_t q = 1;
  while (pkts >= 4 && q < nq - 1) {
    pkts /= 4;
    q++;
  }
  return (uint8_t)q;
}

static void send_segment(pf_host *h, pf_tx *tx, uint64_t seg,
                         dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  dlcp_sim_packet *pkt = dlcp_sim_seg_data(sim, flow, seg, now);
  if (!pkt) {
    return;
  }
  pkt->rank = remaining_bytes(sim, flow, tx);
  pkt->prio = nic_queue(sim, pkt->rank);
  if (seg < tx->high) {
    pkt->flags |= DLCP_SIM_PKT_F_RETX;
    flow->retransmits++;
  } else {
    tx->high = seg + 1;
  }
  flow->pkts_sent++;
  dlcp_sim_send(sim, flow->src, pkt, now);
}

static void send_probe(pf_host *h, pf_tx *tx, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  dlcp_sim_packet *pkt =
      dlcp_sim_seg_packet(sim, flow, DLCP_SIM_PKT_DATA, true);
  if (!pkt) {
    return;
  }
  pkt->size_bytes = sim->cfg.transport.header_bytes;
  pkt->msg = PFABRIC_PROBE;
  pkt->tx_ps = now;
  dlcp_sim_send(sim, flow->src, pkt, now);
}

static void try_send(pf_host *h, pf_tx *tx, dlcp_sim_ps now) {
  if (tx->probing) {
    return;
  }
  while ((double)tx->inflight + 1.0 <= tx->cwnd) {
    while (tx->next < tx->seg.nseg &&
           tx->seg.st[tx->next] != DLCP_SIM_SEG_NEW) {
      tx->next++;
    }
    if (tx->next >= tx->seg.nseg) {
      break;
    }
    uint64_t seg = tx->next++;
    send_segment(h, tx, seg, now);
    tx->seg.st[seg] = DLCP_SIM_SEG_IN_FLIGHT;
    tx->inflight++;
  }
}

static int pf_flow_start(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  pf_host *h = state;
  dlcp_sim *sim = h->sim;
  pf_tx *tx = dlcp_sim_seg_tx_new(sim, flow, sizeof(*tx), ROLE_TX);
  if (!tx) {
    return DLCP_ERR_NOMEM;
  }
  tx->cwnd = h->init_cwnd;
  tx->ssthresh = 1e18;
  dlcp_sim_conn_timer_init(&tx->rto_timer, sim, h->host, tx);
  flow->tx = tx;
  try_send(h, tx, now);
  dlcp_sim_timer_arm(&tx->rto_timer.timer, now + h->rto);
  return 0;
}

static void on_ack(pf_host *h, pf_tx *tx, const dlcp_sim_packet *pkt,
                   dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  if (pkt->msg == PFABRIC_PROBE) {
    if (tx->probing) {
      tx->probing = false;
      tx->consecutive_timeouts = 0;
      tx->cwnd = 1.0;
      dlcp_sim_timer_arm(&tx->rto_timer.timer, now + h->rto);
      try_send(h, tx, now);
    }
    return;
  }
  uint64_t seg = pkt->seq;
  if (seg >= tx->seg.nseg || tx->seg.st[seg] == DLCP_SIM_SEG_ACKED) {
    return;
  }
  if (tx->seg.st[seg] == DLCP_SIM_SEG_IN_FLIGHT) {
    tx->inflight--;
  }
  tx->consecutive_timeouts = 0;
  tx->probing = false;
  if (tx->cwnd < tx->ssthresh) {
    tx->cwnd += 1.0;
  } else {
    tx->cwnd += 1.0 / tx->cwnd;
  }
  if (dlcp_sim_seg_tx_ack(sim, &tx->seg, flow, seg)) {
    dlcp_sim_timer_cancel(&tx->rto_timer.timer);
    dlcp_sim_flow_finished(sim, flow, now);
    return;
  }
  dlcp_sim_timer_arm(&tx->rto_timer.timer, now + h->rto);
  try_send(h, tx, now);
}

static void on_rto(pf_host *h, pf_tx *tx, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_flow *flow = &sim->flows[tx->seg.flow];
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  flow->timeouts++;
  tx->consecutive_timeouts++;
  double half = tx->cwnd / 2.0;
  tx->ssthresh = half < 2.0 ? 2.0 : half;
  tx->cwnd = 1.0;
  for (uint64_t s = tx->seg.una; s < tx->seg.nseg; s++) {
    if (tx->seg.st[s] == DLCP_SIM_SEG_IN_FLIGHT) {
      tx->seg.st[s] = DLCP_SIM_SEG_NEW;
    }
  }
  tx->inflight = 0;
  tx->next = tx->seg.una;
  dlcp_sim_timer_arm(&tx->rto_timer.timer, now + h->rto);
  if (tx->consecutive_timeouts >= sim->cfg.transport.pfabric.probe_after) {
    tx->probing = true;
    send_probe(h, tx, now);
    return;
  }
  try_send(h, tx, now);
}

/* Turns the arrived |pkt| into its ACK (same segment, same probe mark). */
static void send_ack(pf_host *h, const dlcp_sim_flow *flow,
                     dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  uint64_t seq = pkt->seq;
  uint32_t msg = pkt->msg;
  dlcp_sim_ps echo = pkt->tx_ps;
  memset(pkt, 0, sizeof(*pkt));
  pkt->kind = DLCP_SIM_PKT_ACK;
  pkt->flow = flow->id;
  pkt->src = flow->dst;
  pkt->dst = flow->src;
  pkt->size_bytes = sim->cfg.transport.ack_bytes;
  pkt->ecn = DLCP_SIM_ECN_NOT_ECT;
  pkt->lb = DLCP_SIM_LB_SPRAY;
  pkt->seq = seq;
  pkt->msg = msg;
  pkt->echo_ps = echo;
  pkt->tx_ps = now;
  dlcp_sim_send(sim, flow->dst, pkt, now);
}

static void on_data(pf_host *h, dlcp_sim_flow *flow, dlcp_sim_packet *pkt,
                    dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dlcp_sim_seg_rx *rx = dlcp_sim_seg_rx_of(sim, flow, ROLE_RX);
  if (!rx || (pkt->msg != PFABRIC_PROBE && pkt->seq >= rx->nseg)) {
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  if (pkt->msg != PFABRIC_PROBE) {
    dlcp_sim_seg_rx_mark(sim, rx, flow, pkt->seq, now);
  }
  send_ack(h, flow, pkt, now);
}

static void pf_on_packet(void *state, dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  pf_host *h = state;
  dlcp_sim *sim = h->sim;
  if (pkt->flow >= sim->nflows) {
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  dlcp_sim_flow *flow = &sim->flows[pkt->flow];
  if (pkt->kind == DLCP_SIM_PKT_DATA) {
    on_data(h, flow, pkt, now);
    return;
  }
  if (pkt->kind == DLCP_SIM_PKT_ACK && flow->tx) {
    on_ack(h, flow->tx, pkt, now);
  }
  dlcp_sim_packet_drop(sim, pkt);
}

static void pf_on_timer(void *state, void *conn, dlcp_sim_ps now) {
  if (*(const int *)conn == ROLE_TX) {
    on_rto(state, conn, now);
  }
}

const dlcp_sim_transport_ops dlcp_sim_pfabric_ops = {
    .name = "pfabric",
    .init = NULL,
    .fini = NULL,
    .host_new = pf_host_new,
    .host_del = pf_host_del,
    .flow_start = pf_flow_start,
    .on_packet = pf_on_packet,
    .on_timer = pf_on_timer,
    .flow_free = dlcp_sim_seg_flow_free};
