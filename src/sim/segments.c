/*
 * segments.c: per-segment state of the selective-ACK baselines (see
 * segments.h).
 */
#include "sim/segments.h"

static uint64_t seg_count(const dlcp_sim *sim, const dlcp_sim_flow *flow) {
  uint64_t mss = sim->cfg.transport.mss_bytes;
  uint64_t n = (flow->size_bytes + mss - 1) / mss;
  return n ? n : 1;
}

void *dlcp_sim_seg_tx_new(dlcp_sim *sim, const dlcp_sim_flow *flow,
                          size_t size, int role) {
  dlcp_sim_seg_tx *tx = sim->mem->calloc(1, size, sim->mem->user);
  if (!tx) {
    return NULL;
  }
  tx->role = role;
  tx->flow = flow->id;
  tx->nseg = seg_count(sim, flow);
  tx->st = sim->mem->calloc(tx->nseg, 1, sim->mem->user);
  if (!tx->st) {
    sim->mem->free(tx, sim->mem->user);
    return NULL;
  }
  return tx;
}

dlcp_sim_seg_rx *dlcp_sim_seg_rx_of(dlcp_sim *sim, dlcp_sim_flow *flow,
                                    int role) {
  if (flow->rx) {
    return flow->rx;
  }
  uint64_t nseg = seg_count(sim, flow);
  dlcp_sim_seg_rx *rx = sim->mem->calloc(1, sizeof(*rx), sim->mem->user);
  uint8_t *got = rx ? sim->mem->calloc(nseg, 1, sim->mem->user) : NULL;
  if (!got) {
    sim->mem->free(rx, sim->mem->user);
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return NULL;
  }
  rx->role = role;
  rx->flow = flow->id;
  rx->nseg = nseg;
  rx->got = got;
  flow->rx = rx;
  return rx;
}

bool dlcp_sim_seg_rx_has(const dlcp_sim_seg_rx *rx, uint64_t seg) {
  return !rx->got || rx->got[seg];
}

void dlcp_sim_seg_rx_mark(dlcp_sim *sim, dlcp_sim_seg_rx *rx,
                          dlcp_sim_flow *flow, uint64_t seg,
                          dlcp_sim_ps now) {
  if (dlcp_sim_seg_rx_has(rx, seg)) {
    return;
  }
  rx->got[seg] = 1;
  if (++rx->got_count == rx->nseg) {
    sim->mem->free(rx->got, sim->mem->user);
    rx->got = NULL;
    flow->delivered_bytes = flow->size_bytes;
    dlcp_sim_flow_delivered(sim, flow, now);
  }
}

bool dlcp_sim_seg_tx_ack(dlcp_sim *sim, dlcp_sim_seg_tx *tx,
                         dlcp_sim_flow *flow, uint64_t seg) {
  tx->st[seg] = DLCP_SIM_SEG_ACKED;
  tx->nacked++;
  while (tx->una < tx->nseg && tx->st[tx->una] == DLCP_SIM_SEG_ACKED) {
    tx->una++;
  }
  uint64_t acked = tx->una * sim->cfg.transport.mss_bytes;
  flow->bytes_acked = acked < flow->size_bytes ? acked : flow->size_bytes;
  if (tx->nacked < tx->nseg) {
    return false;
  }
  flow->bytes_acked = flow->size_bytes;
  /* Every state is ACKED now; a late packet of the flow reads none. */
  sim->mem->free(tx->st, sim->mem->user);
  tx->st = NULL;
  return true;
}

dlcp_sim_packet *dlcp_sim_seg_packet(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                     dlcp_sim_pkt_kind kind,
                                     bool to_receiver) {
  dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
  if (!pkt) {
    return NULL;
  }
  pkt->kind = (uint8_t)kind;
  pkt->flow = flow->id;
  pkt->src = to_receiver ? flow->src : flow->dst;
  pkt->dst = to_receiver ? flow->dst : flow->src;
  pkt->ecn = DLCP_SIM_ECN_NOT_ECT;
  pkt->lb = DLCP_SIM_LB_SPRAY;
  return pkt;
}

dlcp_sim_packet *dlcp_sim_seg_data(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                   uint64_t seg, dlcp_sim_ps now) {
  dlcp_sim_packet *pkt = dlcp_sim_seg_packet(sim, flow, DLCP_SIM_PKT_DATA,
                                             true);
  if (!pkt) {
    return NULL;
  }
  uint64_t mss = sim->cfg.transport.mss_bytes;
  uint64_t left = flow->size_bytes - seg * mss;
  pkt->payload_bytes = (uint32_t)(left < mss ? left : mss);
  pkt->size_bytes = pkt->payload_bytes + sim->cfg.transport.header_bytes;
  pkt->seq = seg;
  pkt->tx_ps = now;
  return pkt;
}

void dlcp_sim_seg_flow_free(dlcp_sim *sim, dlcp_sim_flow *flow) {
  dlcp_sim_seg_tx *tx = flow->tx;
  dlcp_sim_seg_rx *rx = flow->rx;
  if (tx) {
    sim->mem->free(tx->st, sim->mem->user);
    sim->mem->free(tx, sim->mem->user);
  }
  if (rx) {
    sim->mem->free(rx->got, sim->mem->user);
    sim->mem->free(rx, sim->mem->user);
  }
  flow->tx = flow->rx = NULL;
}

uint32_t dlcp_sim_seg_window(const dlcp_sim *sim, uint32_t configured) {
  return configured ? configured : dlcp_sim_bdp_pkts(&sim->cfg);
}

dlcp_sim_ps dlcp_sim_seg_rto(const dlcp_sim *sim, dlcp_sim_ps configured,
                             uint32_t rtts) {
  dlcp_sim_ps rto = configured ? configured
                               : rtts * dlcp_sim_base_rtt(&sim->cfg);
  return rto ? rto : dlcp_sim_time_from_us(1);
}
