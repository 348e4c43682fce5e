/*
 * dctcp.c: DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257) as the
 * simulator's baseline transport.
 *
 * Sender: segments of mss bytes numbered from 0 (sequence numbers count
 * segments, not bytes); slow start from init_cwnd_pkts, then additive
 * increase of one segment per window; NewReno fast retransmit after
 * dupack_threshold duplicate ACKs with one retransmission per partial ACK,
 * only the first of which restarts the timer (RFC 6582's "impatient"
 * variant, as ns-3); a retransmission timeout (RFC 6298 estimator, floored
 * at rto_min, doubled per consecutive timeout up to rto_max) goes back to
 * snd_una with a window of one segment, and no fast retransmit follows
 * until everything sent before it is ACKed (RFC 6582, section 4.1).
 * DCTCP proper: every packet is ECN-capable (ACKs too, as
 * Linux sets ECT on all DCTCP packets, so ECN-marking switches never drop
 * them for being non-ECT); once per window of data the sender updates
 *   alpha = (1 - g) * alpha + g * F,
 * F the fraction of segments ACKed with ECE in that window; and at most
 * once per window, on an ECE, cuts cwnd to max(cwnd * (1 - alpha/2), 2).
 * There is no handshake: data leaves at the flow's start time.  ACKs carry
 * the send time stamp of the data packet that triggered them, which gives
 * an RTT sample on every ACK (the TCP timestamp option).
 *
 * Receiver: a per-segment bitmap and a cumulative ACK.  Without delayed
 * ACKs every data packet is ACKed at once and ECE echoes its CE bit.  With
 * delayed ACKs one ACK covers two packets or delayed_ack_ps, whichever
 * comes first, out-of-order data is ACKed at once, and the DCTCP state
 * machine keeps the echo exact: when the CE bit of arriving packets
 * changes, the packets received so far are ACKed immediately with the old
 * ECE value.
 *
 * A flow's state at both ends goes back to its hosts once the sender holds
 * the last ACK (a copy still in the network is answered without it, as
 * before), and is reused by their next flows, so memory follows the flows
 * in progress, not all flows ever started (a 1,024-rank ring makes two
 * million).  It is recycled, not freed, because its timers' queued events
 * point into it (engine.h); a reused timer is reset
 * (dlcp_sim_timer_reset), so those events fire for nothing and the new
 * owner's arms queue events of their own, as a new timer's would: events
 * come in the same order as with fresh state, and so do the outputs.
 *
 * Persistent connections (transport.persistent, on by default).  A flow
 * of a workload other than a collective is a connection of its own, which
 * starts in slow start; so is every flow with the option off.  With it on
 * a collective's transfers from one host to another (flows carrying a
 * transfer) ride one connection of the pair, as Gloo's and NCCL's pairs
 * of ranks keep one TCP connection: a stream whose segments are the
 * transfers', in the order they start, each from a segment boundary, with
 * one window, one DCTCP alpha, one RTT estimator and one loss recovery
 * (a later transfer's segments make the duplicate ACKs that repair an
 * earlier one's loss).  A transfer starting on a connection idle for more
 * than its RTO restarts from min(cwnd, init_cwnd) (RFC 5681, section
 * 4.1).  A transfer is delivered when the stream's cumulative ACK point
 * passes its last segment and finished when its sender holds that ACK.
 * The stream's packets hash as one connection (ECMP) and take one path
 * id (source routing).  PIAS tags a transfer's segments by the bytes of
 * that transfer sent before them.  Streams live to the end of the run.
 *
 * Two baselines share this machinery, chosen by transport.kind:
 *   tcp   NewReno as above without ECN: packets (ACKs too) are not-ECT and
 *         ECE is ignored, so a switch with an ECN threshold drops them
 *         there (RED with min = max) and without one they meet drop-tail:
 *         the "default reliable transport", its tail set by rto_min.
 *   pias  DCTCP whose data packets are tagged by PIAS's MLFQ (Bai et al.,
 *         NSDI 2015): the queue of a segment is the number of thresholds
 *         at or below the bytes its flow sent before it (a retransmission
 *         keeps its offset's queue), capped at the last queue; ACKs ride
 *         queue 0.  The per-queue ECN thresholds are the switch's.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef enum conn_role { ROLE_TX = 1, ROLE_RX = 2 } conn_role;

typedef struct dctcp_tx dctcp_tx;
typedef struct dctcp_rx dctcp_rx;
typedef struct dctcp_stream dctcp_stream;

typedef struct dctcp_host {
  dlcp_sim *sim;
  uint32_t host;
  bool ecn;  /* DCTCP and PIAS; plain TCP is not ECN-capable */
  bool pias; /* MLFQ tagging of data, ACKs on queue 0 */
  dctcp_tx *spare_tx; /* released sender states, for reuse (see above) */
  dctcp_rx *spare_rx;
  dctcp_stream **streams; /* by receiving host; NULL until the first */
} dctcp_host;

/* Flows are named by id, not pointer: a collective job adds flows while
 * the run goes on, and the flow table may move then. */
struct dctcp_tx {
  conn_role role;
  uint32_t flow;
  uint64_t nseg;
  uint64_t snd_una;   /* first unacknowledged segment */
  uint64_t snd_nxt;   /* next segment to send */
  uint64_t high_tx;   /* one past the highest segment ever sent */
  double cwnd;        /* segments */
  double ssthresh;    /* segments */
  double alpha;
  uint64_t win_end;   /* alpha is updated when snd_una passes this */
  uint64_t win_acked; /* segments ACKed in the current window */
  uint64_t win_marked; /* ... of which with ECE */
  uint64_t cwr_end;   /* no ECN cut until snd_una passes this */
  uint32_t dupacks;
  bool in_recovery;
  bool partial_acked; /* this recovery has seen a partial ACK */
  uint64_t recover; /* NewReno: recovery (or a timeout's go-back-N) ends
                       when this is ACKed */
  bool have_rtt;
  dlcp_sim_ps srtt;
  dlcp_sim_ps rttvar;
  dlcp_sim_ps rto;
  dlcp_sim_conn_timer rto_timer;
  dctcp_tx *next_spare;
  dctcp_stream *stream; /* a persistent connection's, else NULL */
};

struct dctcp_rx {
  conn_role role;
  uint32_t flow;
  uint64_t nseg;
  uint8_t *got; /* one byte per segment; freed once all arrived */
  uint64_t cum; /* next expected segment */
  bool ce_state;
  uint32_t pending; /* packets received but not yet ACKed */
  dlcp_sim_ps echo_ps;
  dlcp_sim_conn_timer delack;
  dctcp_rx *next_spare;
  dctcp_stream *stream; /* a persistent connection's, else NULL */
  uint64_t got_base;    /* a stream's: |got| starts at this segment */
  uint64_t got_cap;
};

/* A transfer on a persistent connection: |nseg| segments of the stream
 * from |seg0|. */
typedef struct stream_msg {
  uint32_t flow;
  uint64_t seg0;
  uint64_t nseg;
} stream_msg;

/* A persistent connection (see the top of the file): tx.nseg counts every
 * segment ever queued, tx.flow and rx.flow are the last transfer's.
 * msgs[head..count) are the transfers the sender has not had ACKed whole,
 * msgs[rx_head..count) those the receiver has not had whole. */
struct dctcp_stream {
  dctcp_tx tx;
  dctcp_rx rx;
  stream_msg *msgs;
  uint32_t head, rx_head, count, cap;
  uint32_t path;
  dlcp_sim_ps idle_since; /* when the sender last held every ACK */
};

static const dlcp_sim_dctcp_config *dcfg(const dlcp_sim *sim) {
  return &sim->cfg.transport.dctcp;
}

static uint32_t seg_payload(const dlcp_sim *sim, const dlcp_sim_flow *flow,
                            uint64_t seg) {
  uint64_t mss = sim->cfg.transport.mss_bytes;
  uint64_t off = seg * mss;
  uint64_t left = flow->size_bytes - off;
  return (uint32_t)(left < mss ? left : mss);
}

/* Segments of |flow|: its bytes in mss-sized pieces, the last short. */
static uint64_t flow_segments(const dlcp_sim *sim, const dlcp_sim_flow *flow) {
  uint64_t mss = sim->cfg.transport.mss_bytes;
  return (flow->size_bytes + mss - 1) / mss;
}

/* PIAS's MLFQ: the queue of the packet that starts at byte |sent|. */
static uint8_t pias_queue(const dlcp_sim *sim, uint64_t sent) {
  const dlcp_sim_pias_config *p = &sim->cfg.transport.pias;
  uint32_t q = 0;
  while (q < p->nthresholds && sent >= p->thresholds_bytes[q]) {
    q++;
  }
  uint32_t last = sim->cfg.sw.nqueues - 1;
  return (uint8_t)(q < last ? q : last);
}

static int dctcp_host_new(dlcp_sim *sim, uint32_t host, void **pstate) {
  dctcp_host *h = sim->mem->calloc(1, sizeof(*h), sim->mem->user);
  if (!h) {
    return DLCP_ERR_NOMEM;
  }
  h->sim = sim;
  h->host = host;
  h->ecn = sim->cfg.transport.kind != DLCP_SIM_TRANSPORT_TCP;
  h->pias = sim->cfg.transport.kind == DLCP_SIM_TRANSPORT_PIAS;
  *pstate = h;
  return 0;
}

static void dctcp_host_del(dlcp_sim *sim, void *state) {
  dctcp_host *h = state;
  while (h->spare_tx) {
    dctcp_tx *tx = h->spare_tx;
    h->spare_tx = tx->next_spare;
    sim->mem->free(tx, sim->mem->user);
  }
  while (h->spare_rx) {
    dctcp_rx *rx = h->spare_rx;
    h->spare_rx = rx->next_spare;
    sim->mem->free(rx, sim->mem->user);
  }
  for (uint32_t d = 0; h->streams && d < sim->net.nhosts; d++) {
    dctcp_stream *st = h->streams[d];
    if (st) {
      sim->mem->free(st->msgs, sim->mem->user);
      sim->mem->free(st->rx.got, sim->mem->user);
      sim->mem->free(st, sim->mem->user);
    }
  }
  sim->mem->free(h->streams, sim->mem->user);
  sim->mem->free(state, sim->mem->user);
}

/* A zeroed sender state of host |h| whose RTO timer is ready, a spare one
 * if there is one (its timer reset), or NULL. */
static dctcp_tx *tx_new(dctcp_host *h) {
  dlcp_sim *sim = h->sim;
  dctcp_tx *tx = h->spare_tx;
  if (!tx) {
    tx = sim->mem->calloc(1, sizeof(*tx), sim->mem->user);
    if (tx) {
      dlcp_sim_conn_timer_init(&tx->rto_timer, sim, h->host, tx);
    }
    return tx;
  }
  h->spare_tx = tx->next_spare;
  dlcp_sim_conn_timer timer = tx->rto_timer;
  memset(tx, 0, sizeof(*tx));
  tx->rto_timer = timer;
  dlcp_sim_timer_reset(&tx->rto_timer.timer);
  return tx;
}

/* The receiver state's counterpart of tx_new. */
static dctcp_rx *rx_new(dctcp_host *h) {
  dlcp_sim *sim = h->sim;
  dctcp_rx *rx = h->spare_rx;
  if (!rx) {
    rx = sim->mem->calloc(1, sizeof(*rx), sim->mem->user);
    if (rx) {
      dlcp_sim_conn_timer_init(&rx->delack, sim, h->host, rx);
    }
    return rx;
  }
  h->spare_rx = rx->next_spare;
  dlcp_sim_conn_timer timer = rx->delack;
  memset(rx, 0, sizeof(*rx));
  rx->delack = timer;
  dlcp_sim_timer_reset(&rx->delack.timer);
  return rx;
}

/* The transfer that segment |seg| of |tx| belongs to, and the segment's
 * index within it in |*local|: the flow's own for a connection of one
 * flow, a stream's transfer not yet ACKed whole otherwise. */
static dlcp_sim_flow *seg_flow(dlcp_sim *sim, const dctcp_tx *tx, uint64_t seg,
                               uint64_t *local) {
  const dctcp_stream *st = tx->stream;
  if (!st) {
    *local = seg;
    return &sim->flows[tx->flow];
  }
  uint32_t i = st->head;
  while (i + 1 < st->count && seg >= st->msgs[i].seg0 + st->msgs[i].nseg) {
    i++;
  }
  *local = seg - st->msgs[i].seg0;
  return &sim->flows[st->msgs[i].flow];
}

static void send_segment(dctcp_host *h, dctcp_tx *tx, uint64_t seg,
                         dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  uint64_t local;
  dlcp_sim_flow *flow = seg_flow(sim, tx, seg, &local);
  dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
  if (!pkt) {
    return;
  }
  pkt->kind = DLCP_SIM_PKT_DATA;
  pkt->flow = flow->id;
  pkt->src = flow->src;
  pkt->dst = flow->dst;
  pkt->payload_bytes = seg_payload(sim, flow, local);
  pkt->size_bytes = pkt->payload_bytes + sim->cfg.transport.header_bytes;
  pkt->prio = h->pias ? pias_queue(sim, local * sim->cfg.transport.mss_bytes)
                      : (uint8_t)flow->prio;
  pkt->ecn = h->ecn ? DLCP_SIM_ECN_ECT : DLCP_SIM_ECN_NOT_ECT;
  pkt->lb = flow->lb;
  pkt->path = tx->stream ? tx->stream->path : flow->path;
  pkt->sport = tx->stream ? 1 : 0;
  pkt->seq = seg;
  pkt->tx_ps = now;
  if (seg < tx->high_tx) {
    pkt->flags |= DLCP_SIM_PKT_F_RETX;
    flow->retransmits++;
  }
  flow->pkts_sent++;
  if (!dlcp_sim_timer_armed(&tx->rto_timer.timer)) {
    dlcp_sim_timer_arm(&tx->rto_timer.timer, now + tx->rto);
  }
  dlcp_sim_send(sim, flow->src, pkt, now);
}

/* Sends new (or go-back-N) segments while the window allows. */
static void try_send(dctcp_host *h, dctcp_tx *tx, dlcp_sim_ps now) {
  double window = tx->cwnd + (tx->in_recovery ? tx->dupacks : 0);
  while (tx->snd_nxt < tx->nseg &&
         (double)(tx->snd_nxt - tx->snd_una) + 1.0 <= window) {
    send_segment(h, tx, tx->snd_nxt, now);
    tx->snd_nxt++;
    if (tx->snd_nxt > tx->high_tx) {
      tx->high_tx = tx->snd_nxt;
    }
  }
}

/* A fresh sender's congestion state: the first window, no RTT yet. */
static void tx_open(const dlcp_sim *sim, dctcp_tx *tx) {
  tx->role = ROLE_TX;
  tx->cwnd = dcfg(sim)->init_cwnd_pkts;
  tx->ssthresh = 1e18;
  tx->alpha = dcfg(sim)->alpha_init;
  tx->rto = dcfg(sim)->rto_init_ps;
}

/* |h|'s persistent connection to host |dst|, made on first use; NULL if
 * memory ran out. */
static dctcp_stream *stream_of(dctcp_host *h, uint32_t dst) {
  dlcp_sim *sim = h->sim;
  if (!h->streams) {
    h->streams =
        sim->mem->calloc(sim->net.nhosts, sizeof(*h->streams), sim->mem->user);
    if (!h->streams) {
      return NULL;
    }
  }
  dctcp_stream *st = h->streams[dst];
  if (st) {
    return st;
  }
  st = sim->mem->calloc(1, sizeof(*st), sim->mem->user);
  if (!st) {
    return NULL;
  }
  tx_open(sim, &st->tx);
  st->tx.flow = DLCP_SIM_NONE;
  st->tx.stream = st;
  dlcp_sim_conn_timer_init(&st->tx.rto_timer, sim, h->host, &st->tx);
  st->rx.role = ROLE_RX;
  st->rx.flow = DLCP_SIM_NONE;
  st->rx.stream = st;
  dlcp_sim_conn_timer_init(&st->rx.delack, sim, dst, &st->rx);
  st->path = (uint32_t)dlcp_rng_mix(sim->cfg.seed ^ 0x5354524541ull ^
                                    ((uint64_t)h->host << 32) ^ dst);
  h->streams[dst] = st;
  return st;
}

/* Queues |flow| (a collective's transfer) on its pair's persistent
 * connection and sends what the window allows. */
static int stream_start(dctcp_host *h, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dctcp_stream *st = stream_of(h, flow->dst);
  if (!st) {
    return DLCP_ERR_NOMEM;
  }
  if (st->head > 0 && st->head >= st->cap / 2) {
    /* Transfers ACKed whole are done with: move the rest down. */
    memmove(st->msgs, st->msgs + st->head,
            (st->count - st->head) * sizeof(*st->msgs));
    st->count -= st->head;
    st->rx_head -= st->head;
    st->head = 0;
  }
  if (st->count == st->cap) {
    uint32_t cap = st->cap ? 2 * st->cap : 8;
    stream_msg *m =
        sim->mem->realloc(st->msgs, cap * sizeof(*m), sim->mem->user);
    if (!m) {
      return DLCP_ERR_NOMEM;
    }
    st->msgs = m;
    st->cap = cap;
  }
  dctcp_tx *tx = &st->tx;
  bool idle = tx->snd_una == tx->nseg;
  if (idle && tx->nseg > 0 && now - st->idle_since > tx->rto &&
      tx->cwnd > dcfg(sim)->init_cwnd_pkts) {
    /* RFC 5681, section 4.1: after an RTO's idle, the restart window. */
    tx->cwnd = dcfg(sim)->init_cwnd_pkts;
  }
  uint64_t nseg = flow_segments(sim, flow);
  st->msgs[st->count++] =
      (stream_msg){.flow = flow->id, .seg0 = tx->nseg, .nseg = nseg ? nseg : 1};
  tx->nseg += nseg ? nseg : 1;
  tx->flow = flow->id;
  flow->tx = tx;
  flow->rx = &st->rx;
  try_send(h, tx, now);
  return 0;
}

static int dctcp_flow_start(void *state, dlcp_sim_flow *flow,
                            dlcp_sim_ps now) {
  dctcp_host *h = state;
  dlcp_sim *sim = h->sim;
  if (dcfg(sim)->persistent && flow->xfer != DLCP_SIM_NONE) {
    return stream_start(h, flow, now);
  }
  dctcp_tx *tx = tx_new(h);
  if (!tx) {
    return DLCP_ERR_NOMEM;
  }
  if (!flow->path_pinned) {
    /* One path per flow, as ECMP would hash it, for source routing: a
     * path id of 0 for every flow put them all on spine 0. */
    flow->path = (uint32_t)dlcp_rng_mix(sim->cfg.seed ^ 0x5041544855ull ^
                                        (uint64_t)flow->id << 20);
  }
  tx_open(sim, tx);
  tx->flow = flow->id;
  tx->nseg = flow_segments(sim, flow);
  flow->tx = tx;
  try_send(h, tx, now);
  return 0;
}

static void rtt_sample(const dlcp_sim *sim, dctcp_tx *tx, dlcp_sim_ps r) {
  /* RFC 6298 with the usual 1/8 and 1/4 gains. */
  if (!tx->have_rtt) {
    tx->srtt = r;
    tx->rttvar = r / 2;
    tx->have_rtt = true;
  } else {
    dlcp_sim_ps diff = tx->srtt > r ? tx->srtt - r : r - tx->srtt;
    tx->rttvar = (3 * tx->rttvar + diff) / 4;
    tx->srtt = (7 * tx->srtt + r) / 8;
  }
  dlcp_sim_ps rto = tx->srtt + 4 * tx->rttvar;
  if (rto < dcfg(sim)->rto_min_ps) {
    rto = dcfg(sim)->rto_min_ps;
  }
  if (rto > dcfg(sim)->rto_max_ps) {
    rto = dcfg(sim)->rto_max_ps;
  }
  tx->rto = rto;
}

/* DCTCP's reaction to ECE: at most once per window of data. */
static void ecn_cut(dctcp_tx *tx) {
  if (tx->in_recovery || tx->snd_una < tx->cwr_end) {
    return;
  }
  double c = tx->cwnd * (1.0 - tx->alpha / 2.0);
  tx->cwnd = c < 2.0 ? 2.0 : c;
  tx->ssthresh = tx->cwnd;
  tx->cwr_end = tx->snd_nxt;
}

/* Gives |flow|'s sender and receiver state back to their hosts, timers
 * disarmed (see the top of the file). */
static void release(dlcp_sim *sim, dlcp_sim_flow *flow) {
  dctcp_tx *tx = flow->tx;
  dctcp_rx *rx = flow->rx;
  if (tx && tx->stream) {
    flow->tx = flow->rx = NULL; /* the connection's, not the flow's */
    return;
  }
  if (tx) {
    dctcp_host *h = sim->host_state[flow->src];
    dlcp_sim_timer_cancel(&tx->rto_timer.timer);
    tx->next_spare = h->spare_tx;
    h->spare_tx = tx;
  }
  if (rx) {
    dctcp_host *h = sim->host_state[flow->dst];
    dlcp_sim_timer_cancel(&rx->delack.timer);
    sim->mem->free(rx->got, sim->mem->user);
    rx->got = NULL;
    rx->next_spare = h->spare_rx;
    h->spare_rx = rx;
  }
  flow->tx = flow->rx = NULL;
}

/* A persistent connection's cumulative ACK reached |ack|: every transfer
 * it covers whole is finished, the first one it does not has its bytes
 * ACKed so far. */
static void stream_acked(dlcp_sim *sim, dctcp_stream *st, uint64_t ack,
                         dlcp_sim_ps now) {
  uint64_t mss = sim->cfg.transport.mss_bytes;
  while (st->head < st->count) {
    const stream_msg *m = &st->msgs[st->head];
    dlcp_sim_flow *flow = &sim->flows[m->flow];
    if (ack < m->seg0 + m->nseg) {
      uint64_t acked = ack > m->seg0 ? (ack - m->seg0) * mss : 0;
      flow->bytes_acked = acked < flow->size_bytes ? acked : flow->size_bytes;
      return;
    }
    flow->bytes_acked = flow->size_bytes;
    st->head++;
    dlcp_sim_flow_finished(sim, flow, now);
  }
}

static void on_ack(dctcp_host *h, dctcp_tx *tx, const dlcp_sim_packet *pkt,
                   dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  /* A stream's ACK names the transfer of the segment that made it. */
  dlcp_sim_flow *flow = &sim->flows[tx->stream ? pkt->flow : tx->flow];
  bool ece = h->ecn && (pkt->flags & DLCP_SIM_PKT_F_ECE) != 0;
  uint64_t ack = pkt->ack;
  if (ece) {
    flow->ecn_echoes++;
  }
  if ((!tx->stream && flow->finish_ps != DLCP_SIM_PS_NEVER) || ack > tx->nseg) {
    return;
  }
  if (ack > tx->snd_una) {
    uint64_t newly = ack - tx->snd_una;
    bool keep_timer = false;
    if (now >= pkt->echo_ps) {
      rtt_sample(sim, tx, now - pkt->echo_ps);
    }
    tx->win_acked += newly;
    if (ece) {
      tx->win_marked += newly;
    }
    tx->snd_una = ack;
    if (tx->snd_nxt < tx->snd_una) {
      tx->snd_nxt = tx->snd_una;
    }
    if (tx->stream) {
      stream_acked(sim, tx->stream, ack, now);
    } else {
      uint64_t acked = ack * sim->cfg.transport.mss_bytes;
      flow->bytes_acked = acked < flow->size_bytes ? acked : flow->size_bytes;
    }
    if (tx->in_recovery) {
      if (ack >= tx->recover) {
        tx->in_recovery = false;
        tx->cwnd = tx->ssthresh;
        tx->dupacks = 0;
      } else {
        /* NewReno partial ACK: the next hole is lost too.  Only the first
         * one restarts the timer (RFC 6582, step 5): a recovery with many
         * holes, one per RTT, ends in a timeout instead of lasting as many
         * round trips. */
        send_segment(h, tx, tx->snd_una, now);
        keep_timer = tx->partial_acked;
        tx->partial_acked = true;
      }
    } else {
      tx->dupacks = 0;
      if (tx->cwnd < tx->ssthresh) {
        tx->cwnd += (double)newly;
      } else {
        tx->cwnd += (double)newly / tx->cwnd;
      }
    }
    if (tx->snd_una >= tx->win_end) {
      double f = tx->win_acked ? (double)tx->win_marked / (double)tx->win_acked
                               : 0.0;
      double g = dcfg(sim)->g;
      tx->alpha = (1.0 - g) * tx->alpha + g * f;
      tx->win_acked = tx->win_marked = 0;
      tx->win_end = tx->snd_nxt;
    }
    if (ece) {
      ecn_cut(tx);
    }
    if (tx->snd_una == tx->nseg && tx->stream) {
      /* Every transfer finished: the connection waits for the next. */
      dlcp_sim_timer_cancel(&tx->rto_timer.timer);
      tx->stream->idle_since = now;
      return;
    }
    if (tx->snd_una == tx->nseg) {
      dlcp_sim_flow_finished(sim, flow, now);
      release(sim, flow);
      return;
    }
    if (!keep_timer) {
      dlcp_sim_timer_arm(&tx->rto_timer.timer, now + tx->rto);
    }
  } else if (ack == tx->snd_una && tx->snd_una < tx->snd_nxt) {
    tx->dupacks++;
    if (ece) {
      ecn_cut(tx);
    }
    /* RFC 6582, section 4.1: duplicate ACKs below |recover| after a
     * timeout answer its go-back-N retransmissions and start no fast
     * retransmit (ns-3's CA_LOSS and Linux's Loss state alike): a second
     * loss among them waits for the next timeout.  ns-3 3.37 also starts
     * none while in CWR (its DupAck handles Open, Disorder and Recovery
     * only); cwr_fast_retransmit: false does the same. */
    if (!tx->in_recovery && tx->dupacks == dcfg(sim)->dupack_threshold &&
        ack >= tx->recover &&
        (dcfg(sim)->cwr_fast_retransmit || tx->snd_una >= tx->cwr_end)) {
      tx->in_recovery = true;
      tx->partial_acked = false;
      tx->recover = tx->snd_nxt;
      double half = tx->cwnd / 2.0;
      tx->ssthresh = half < 2.0 ? 2.0 : half;
      tx->cwnd = tx->ssthresh;
      send_segment(h, tx, tx->snd_una, now);
    }
  }
  try_send(h, tx, now);
}

static void on_rto(dctcp_host *h, dctcp_tx *tx, dlcp_sim_ps now) {
  if (tx->snd_una >= tx->nseg) {
    return;
  }
  uint64_t local;
  dlcp_sim_flow *flow = seg_flow(h->sim, tx, tx->snd_una, &local);
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  flow->timeouts++;
  double half = tx->cwnd / 2.0;
  tx->ssthresh = half < 2.0 ? 2.0 : half;
  tx->cwnd = 1.0;
  tx->snd_nxt = tx->snd_una;
  tx->recover = tx->high_tx;
  tx->in_recovery = false;
  tx->dupacks = 0;
  tx->cwr_end = tx->snd_una;
  /* Exponential backoff; a fresh RTT sample resets it. */
  tx->rto *= 2;
  if (tx->rto > dcfg(h->sim)->rto_max_ps) {
    tx->rto = dcfg(h->sim)->rto_max_ps;
  }
  try_send(h, tx, now);
}

/* Sends |flow|'s receiver's ACK of segments below |cum|, echoing
 * |echo_ps| and |ece|, in |pkt| (reused) or a new packet; on persistent
 * connection |st| if it is not NULL. */
static void emit_ack(dctcp_host *h, const dlcp_sim_flow *flow,
                     const dctcp_stream *st, dlcp_sim_packet *pkt, uint64_t cum,
                     dlcp_sim_ps echo_ps, bool ece, dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  if (!pkt) {
    pkt = dlcp_sim_packet_new(sim);
    if (!pkt) {
      return;
    }
  }
  memset(pkt, 0, sizeof(*pkt));
  pkt->kind = DLCP_SIM_PKT_ACK;
  pkt->flow = flow->id;
  pkt->src = flow->dst;
  pkt->dst = flow->src;
  pkt->size_bytes = sim->cfg.transport.ack_bytes;
  pkt->prio = h->pias ? 0 : (uint8_t)flow->prio;
  pkt->ecn = h->ecn ? DLCP_SIM_ECN_ECT : DLCP_SIM_ECN_NOT_ECT;
  pkt->lb = flow->lb;
  pkt->path = st ? st->path : flow->path;
  pkt->sport = st ? 1 : 0;
  pkt->ack = cum;
  pkt->echo_ps = echo_ps;
  pkt->tx_ps = now;
  if (ece) {
    pkt->flags |= DLCP_SIM_PKT_F_ECE;
  }
  dlcp_sim_send(sim, flow->dst, pkt, now);
}

static void send_ack(dctcp_host *h, dctcp_rx *rx, dlcp_sim_packet *pkt,
                     dlcp_sim_ps now) {
  rx->pending = 0;
  dlcp_sim_timer_cancel(&rx->delack.timer);
  emit_ack(h, &h->sim->flows[rx->flow], rx->stream, pkt, rx->cum, rx->echo_ps,
           rx->ce_state, now);
}

/* Data packet |pkt| came to |rx|: its CE bit and time stamp are what the
 * next ACK echoes.  With delayed ACKs a change of CE first ACKs what came
 * before with the value it carried (DCTCP's state machine), so ECE stays
 * exact. */
static void take_echo(dctcp_host *h, dctcp_rx *rx, const dlcp_sim_packet *pkt,
                      dlcp_sim_ps now) {
  bool ce = pkt->ecn == DLCP_SIM_ECN_CE;
  if (dcfg(h->sim)->delayed_ack && rx->pending > 0 && ce != rx->ce_state) {
    send_ack(h, rx, NULL, now);
  }
  rx->ce_state = ce;
  rx->echo_ps = pkt->tx_ps;
}

/* After data packet |pkt| came to |rx|: ACKs at once without delayed
 * ACKs, every second packet, out-of-order data (so the sender sees
 * dupACKs) and a transfer's completion; else drops |pkt| and lets the
 * delayed-ACK timer answer. */
static void ack_or_delay(dctcp_host *h, dctcp_rx *rx, dlcp_sim_packet *pkt,
                         bool in_order, bool complete, dlcp_sim_ps now) {
  const dlcp_sim_dctcp_config *c = dcfg(h->sim);
  if (!c->delayed_ack || rx->pending >= 2 || !in_order || complete) {
    send_ack(h, rx, pkt, now);
    return;
  }
  dlcp_sim_packet_drop(h->sim, pkt);
  if (!dlcp_sim_timer_armed(&rx->delack.timer)) {
    dlcp_sim_timer_arm(&rx->delack.timer, now + c->delayed_ack_ps);
  }
}

/* Records segment |seg| of a persistent connection's stream at its
 * receiver |rx| (|got| covers the segments from got_base, slid up to the
 * cumulative point and grown as needed) and moves the cumulative point;
 * the transfers it passes are delivered.  False if memory ran out. */
static bool stream_mark(dlcp_sim *sim, dctcp_rx *rx, uint64_t seg,
                        dlcp_sim_ps now) {
  dctcp_stream *st = rx->stream;
  if (seg < rx->cum) {
    return true; /* a copy */
  }
  if (rx->got && seg - rx->got_base >= rx->got_cap) {
    uint64_t done = rx->cum - rx->got_base;
    memmove(rx->got, rx->got + done, rx->got_cap - done);
    memset(rx->got + rx->got_cap - done, 0, done);
    rx->got_base = rx->cum;
  }
  if (seg - rx->got_base >= rx->got_cap) {
    uint64_t cap = rx->got_cap ? 2 * rx->got_cap : 64;
    while (seg - rx->got_base >= cap) {
      cap *= 2;
    }
    uint8_t *got = sim->mem->realloc(rx->got, cap, sim->mem->user);
    if (!got) {
      return false;
    }
    memset(got + rx->got_cap, 0, cap - rx->got_cap);
    rx->got = got;
    rx->got_cap = cap;
  }
  rx->got[seg - rx->got_base] = 1;
  while (rx->cum < st->tx.nseg && rx->cum - rx->got_base < rx->got_cap &&
         rx->got[rx->cum - rx->got_base]) {
    rx->cum++;
  }
  while (st->rx_head < st->count &&
         rx->cum >= st->msgs[st->rx_head].seg0 + st->msgs[st->rx_head].nseg) {
    dlcp_sim_flow *flow = &sim->flows[st->msgs[st->rx_head++].flow];
    flow->delivered_bytes = flow->size_bytes;
    dlcp_sim_flow_delivered(sim, flow, now);
  }
  return true;
}

/* A data packet of a persistent connection at its receiver: ACKed as a
 * connection of one flow's, by the stream's cumulative point. */
static void stream_on_data(dctcp_host *h, dctcp_rx *rx, dlcp_sim_packet *pkt,
                           dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  uint64_t seg = pkt->seq;
  if ((pkt->flags & DLCP_SIM_PKT_F_TRIMMED) || seg >= rx->stream->tx.nseg) {
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  take_echo(h, rx, pkt, now);
  rx->flow = pkt->flow;
  bool in_order = seg == rx->cum;
  uint32_t delivered = rx->stream->rx_head;
  if (!stream_mark(sim, rx, seg, now)) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  rx->pending++;
  ack_or_delay(h, rx, pkt, in_order, rx->stream->rx_head != delivered, now);
}

static void on_data(dctcp_host *h, dlcp_sim_flow *flow, dlcp_sim_packet *pkt,
                    dlcp_sim_ps now) {
  dlcp_sim *sim = h->sim;
  dctcp_rx *rx = flow->rx;
  if (rx && rx->stream) {
    stream_on_data(h, rx, pkt, now);
    return;
  }
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    /* A copy that was still in the network when the flow ended, its
     * state gone: answered as the receiver answers any packet once it
     * holds everything, an ACK of the whole flow at once. */
    uint64_t nseg = flow_segments(sim, flow);
    if ((pkt->flags & DLCP_SIM_PKT_F_TRIMMED) || pkt->seq >= nseg) {
      dlcp_sim_packet_drop(sim, pkt);
      return;
    }
    emit_ack(h, flow, NULL, pkt, nseg, pkt->tx_ps, pkt->ecn == DLCP_SIM_ECN_CE,
             now);
    return;
  }
  if (!rx) {
    rx = rx_new(h);
    if (!rx) {
      dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
      dlcp_sim_packet_drop(sim, pkt);
      return;
    }
    rx->role = ROLE_RX;
    rx->flow = flow->id;
    rx->nseg = flow_segments(sim, flow);
    rx->got = sim->mem->calloc(rx->nseg, 1, sim->mem->user);
    if (!rx->got) {
      rx->next_spare = h->spare_rx;
      h->spare_rx = rx;
      dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
      dlcp_sim_packet_drop(sim, pkt);
      return;
    }
    flow->rx = rx;
  }
  uint64_t seg = pkt->seq;
  if ((pkt->flags & DLCP_SIM_PKT_F_TRIMMED) || seg >= rx->nseg) {
    /* DCTCP does not use trimmed headers: the data is lost. */
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  take_echo(h, rx, pkt, now);
  bool in_order = seg == rx->cum;
  if (rx->got && !rx->got[seg]) {
    rx->got[seg] = 1;
    while (rx->cum < rx->nseg && rx->got[rx->cum]) {
      rx->cum++;
    }
  }
  rx->pending++;
  bool complete = rx->cum == rx->nseg;
  if (complete && rx->got) {
    sim->mem->free(rx->got, sim->mem->user);
    rx->got = NULL;
    flow->delivered_bytes = flow->size_bytes;
    dlcp_sim_flow_delivered(sim, flow, now);
  }
  ack_or_delay(h, rx, pkt, in_order, complete, now);
}

static void dctcp_on_packet(void *state, dlcp_sim_packet *pkt,
                            dlcp_sim_ps now) {
  dctcp_host *h = state;
  dlcp_sim *sim = h->sim;
  if (pkt->flow >= sim->nflows) {
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  dlcp_sim_flow *flow = &sim->flows[pkt->flow];
  switch ((dlcp_sim_pkt_kind)pkt->kind) {
  case DLCP_SIM_PKT_DATA:
    on_data(h, flow, pkt, now);
    return;
  case DLCP_SIM_PKT_ACK:
    if (flow->tx) {
      on_ack(h, flow->tx, pkt, now);
    } else if (h->ecn && (pkt->flags & DLCP_SIM_PKT_F_ECE)) {
      flow->ecn_echoes++; /* an ACK of a copy, after the end */
    }
    break;
  case DLCP_SIM_PKT_CTRL:
  case DLCP_SIM_PKT_NOTE:
  case DLCP_SIM_PKT_INA:
    break;
  }
  dlcp_sim_packet_drop(sim, pkt);
}

static void dctcp_on_timer(void *state, void *conn, dlcp_sim_ps now) {
  dctcp_host *h = state;
  conn_role role = *(const conn_role *)conn;
  if (role == ROLE_TX) {
    on_rto(h, conn, now);
  } else {
    dctcp_rx *rx = conn;
    if (rx->pending > 0) {
      send_ack(h, rx, NULL, now);
    }
  }
}

static void dctcp_flow_free(dlcp_sim *sim, dlcp_sim_flow *flow) {
  release(sim, flow);
}

#define DCTCP_FAMILY_OPS(label)                                                \
  {.name = label,                                                              \
   .init = NULL,                                                               \
   .fini = NULL,                                                               \
   .host_new = dctcp_host_new,                                                 \
   .host_del = dctcp_host_del,                                                 \
   .flow_start = dctcp_flow_start,                                             \
   .on_packet = dctcp_on_packet,                                               \
   .on_timer = dctcp_on_timer,                                                 \
   .flow_free = dctcp_flow_free}

const dlcp_sim_transport_ops dlcp_sim_dctcp_ops = DCTCP_FAMILY_OPS("dctcp");
const dlcp_sim_transport_ops dlcp_sim_tcp_ops = DCTCP_FAMILY_OPS("tcp");
const dlcp_sim_transport_ops dlcp_sim_pias_ops = DCTCP_FAMILY_OPS("pias");
