/*
 * sim_baseline_test.c: the simulator's baseline transports and pFabric's
 * switch port: TCP NewReno without ECN, PIAS's MLFQ demotion, pFabric's
 * rank scheduling and dropping (in isolation and end to end), NDP's
 * trimming, NACKs and pulls, and every baseline finishing a PS job
 * deterministically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim.h"

static dlcp_sim *build(const dlcp_sim_config *cfg) {
  dlcp_sim *sim = NULL;
  char err[512];
  int rv = dlcp_sim_new(&sim, cfg, NULL, err, sizeof(err));
  if (rv != 0) {
    print_error("dlcp_sim_new: %s\n", err);
  }
  assert_int_equal(rv, 0);
  return sim;
}

static void run_all(dlcp_sim *sim) {
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
}

static dlcp_sim_port *port_between(dlcp_sim *sim, const char *from,
                                   const char *to) {
  uint32_t a = dlcp_sim_net_find_node(&sim->net, from);
  uint32_t b = dlcp_sim_net_find_node(&sim->net, to);
  uint32_t p = dlcp_sim_net_find_port(&sim->net, a, b);
  assert_int_not_equal(p, DLCP_SIM_NONE);
  return &sim->net.ports[p];
}

typedef struct totals {
  uint64_t marks, drops_selective, drops_buffer, trims;
} totals;

static totals net_totals(const dlcp_sim *sim) {
  totals t = {0, 0, 0, 0};
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    for (uint32_t q = 0; q < DLCP_SIM_MAX_QUEUES; q++) {
      const dlcp_sim_queue *qu = &sim->net.ports[p].q[q];
      t.marks += qu->marks;
      t.drops_selective += qu->drops_selective;
      t.drops_buffer += qu->drops_buffer;
      t.trims += qu->trims;
    }
  }
  return t;
}

static dlcp_sim_ps fct(const dlcp_sim *sim, uint32_t id) {
  const dlcp_sim_flow *f = &sim->flows[id];
  assert_int_not_equal(f->finish_ps, DLCP_SIM_PS_NEVER);
  return f->finish_ps - f->start_ps;
}

/* One ToR with |hosts| hosts at 100 Gbps, 3 us links (base RTT 12 us). */
static void one_rack(dlcp_sim_config *cfg, dlcp_sim_transport_kind kind,
                     uint32_t hosts) {
  dlcp_sim_config_default(cfg);
  cfg->topo.tors = 1;
  cfg->topo.hosts_per_tor = hosts;
  cfg->transport.kind = kind;
}

static void add_incast(dlcp_sim_config *cfg, uint32_t senders,
                       uint64_t size) {
  char name[16];
  for (uint32_t i = 1; i <= senders; i++) {
    snprintf(name, sizeof(name), "h%u", i);
    assert_int_equal(dlcp_sim_config_add_flow(cfg, name, "h0", size, 0, 0),
                     0);
  }
}

/* Plain TCP is not ECN-capable: on an unloaded path it behaves exactly as
 * DCTCP (same FCT to the picosecond); in an incast against a switch
 * with an ECN threshold its packets are dropped there, not marked, and
 * every flow still completes through fast retransmit and timeouts. */
static void test_tcp_newreno(void **state) {
  (void)state;
  dlcp_sim_ps alone[2];
  dlcp_sim_transport_kind kinds[2] = {DLCP_SIM_TRANSPORT_DCTCP,
                                      DLCP_SIM_TRANSPORT_TCP};
  for (int i = 0; i < 2; i++) {
    dlcp_sim_config cfg;
    one_rack(&cfg, kinds[i], 2);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h1", 1000000, 0, 0),
                     0);
    dlcp_sim *sim = build(&cfg);
    run_all(sim);
    alone[i] = fct(sim, 0);
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
  assert_int_equal(alone[0], alone[1]);

  dlcp_sim_config cfg;
  one_rack(&cfg, DLCP_SIM_TRANSPORT_TCP, 9);
  add_incast(&cfg, 8, 1000000);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  totals t = net_totals(sim);
  assert_int_equal(t.marks, 0);
  assert_true(t.drops_selective > 0);
  uint64_t retx = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    retx += sim->flows[i].retransmits;
    assert_int_equal(sim->flows[i].ecn_echoes, 0);
    assert_int_equal(sim->flows[i].delivered_bytes, 1000000);
  }
  /* Every dropped data packet was sent again (ACKs are not dropped: the
   * reverse queues stay empty). */
  assert_true(retx >= t.drops_selective);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* An incast under DCTCP: 32 senders of 300 KB into a 512 KB port that
 * marks at 65 packets, so flows lose packets while an ECN cut's window is
 * in flight (CWR).  With cwr_fast_retransmit (Linux) their duplicate ACKs
 * start fast retransmits; without it (ns-3 3.37) only timeouts repair
 * those losses: more flows time out and the incast ends later.  Every
 * byte arrives either way. */
static void incast_timeouts(bool cwr_fast_retransmit, uint32_t *flows_timed_out,
                            dlcp_sim_ps *end) {
  dlcp_sim_config cfg;
  one_rack(&cfg, DLCP_SIM_TRANSPORT_DCTCP, 33);
  cfg.transport.dctcp.cwr_fast_retransmit = cwr_fast_retransmit;
  add_incast(&cfg, 32, 300000);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  *flows_timed_out = 0;
  *end = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    assert_int_equal(f->delivered_bytes, 300000);
    *flows_timed_out += f->timeouts > 0;
    *end = f->finish_ps > *end ? f->finish_ps : *end;
  }
  assert_true(net_totals(sim).drops_buffer > 0);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

static void test_dctcp_fast_retransmit_in_cwr(void **state) {
  (void)state;
  uint32_t linux_timeouts, ns3_timeouts;
  dlcp_sim_ps linux_end, ns3_end;
  incast_timeouts(true, &linux_timeouts, &linux_end);
  incast_timeouts(false, &ns3_timeouts, &ns3_end);
  print_message("flows timed out: %u with, %u without; end %.1f / %.1f us\n",
                linux_timeouts, ns3_timeouts, dlcp_sim_time_to_us(linux_end),
                dlcp_sim_time_to_us(ns3_end));
  assert_true(ns3_timeouts > linux_timeouts);
  assert_true(ns3_end > linux_end);
}

/* PIAS tags a 3 MB flow's segments by the bytes sent before them with
 * thresholds 100 KB and 1 MB: segment s (offset 1460 s) joins queue 0
 * while 1460 s < 100000 (s <= 68: 69 packets), queue 1 while
 * 1460 s < 1e6 (s <= 684: 616 packets), and queue 2 after that; ACKs
 * ride queue 0 the other way.  Counted exactly at the ToR's port to h1. */
static void test_pias_demotion(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  one_rack(&cfg, DLCP_SIM_TRANSPORT_PIAS, 2);
  cfg.transport.pias.nthresholds = 2;
  cfg.transport.pias.thresholds_bytes[0] = 100000;
  cfg.transport.pias.thresholds_bytes[1] = 1000000;
  const uint64_t size = 3000000;
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h1", size, 0, 0), 0);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  const uint64_t nseg = (size + 1459) / 1460;
  const dlcp_sim_port *down = port_between(sim, "tor0", "h1");
  assert_int_equal(down->q[0].enq_pkts, 69);
  assert_int_equal(down->q[1].enq_pkts, 616);
  assert_int_equal(down->q[2].enq_pkts, nseg - 685);
  assert_int_equal(down->q[3].enq_pkts, 0);
  const dlcp_sim_port *up = port_between(sim, "tor0", "h0");
  assert_int_equal(up->q[0].enq_pkts, nseg);
  assert_int_equal(sim->flows[0].retransmits, 0);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* A 100 KB flow starting while a 20 MB flow occupies the same receiver:
 * PIAS serves the short flow from the high-priority queue, DCTCP queues
 * it behind the long flow's packets (they share one queue). */
static dlcp_sim_ps short_behind_long(dlcp_sim_transport_kind kind) {
  dlcp_sim_config cfg;
  one_rack(&cfg, kind, 3);
  cfg.transport.pias.nthresholds = 1;
  cfg.transport.pias.thresholds_bytes[0] = 200000;
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h1", "h0", 20000000, 0, 0),
                   0);
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h2", "h0", 100000,
                                            dlcp_sim_time_from_us(300), 0),
                   0);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  dlcp_sim_ps f = fct(sim, 1);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  return f;
}

static void test_pias_short_first(void **state) {
  (void)state;
  dlcp_sim_ps pias = short_behind_long(DLCP_SIM_TRANSPORT_PIAS);
  dlcp_sim_ps dctcp = short_behind_long(DLCP_SIM_TRANSPORT_DCTCP);
  print_message("short flow FCT: PIAS %.2f us, DCTCP %.2f us\n",
                (double)pias / 1e6, (double)dctcp / 1e6);
  assert_true(pias < dctcp);
}

/* pFabric's port in isolation. */
static dlcp_sim_packet *pf_pkt(dlcp_sim_packet_pool *pool, uint32_t flow,
                               uint64_t rank, uint64_t seq) {
  dlcp_sim_packet *p = dlcp_sim_packet_alloc(pool);
  assert_non_null(p);
  p->kind = DLCP_SIM_PKT_DATA;
  p->flow = flow;
  p->size_bytes = 1500;
  p->rank = rank;
  p->seq = seq;
  return p;
}

/* Dequeue serves the most urgent packet's flow by its earliest packet;
 * a full buffer drops its least urgent packet for a more urgent arrival
 * and drops a less urgent arrival itself. */
static void test_pfabric_port(void **state) {
  (void)state;
  dlcp_sim_packet_pool pool;
  dlcp_sim_packet_pool_init(&pool, NULL);
  dlcp_sim_net net;
  memset(&net, 0, sizeof(net));
  net.pool = &pool;
  dlcp_sim_port_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.nqueues = 8;
  cfg.buffer_bytes = 4 * 1500;
  cfg.pfabric = true;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg.ecn_threshold_bytes[i] = UINT64_MAX;
  }
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  port.net = &net;
  dlcp_sim_port_init(&port, &cfg, NULL);
  /* Flow 1 (rank 9000, then 7500: it progressed), flow 2 (rank 3000),
   * flow 3 (rank 20000). */
  assert_int_equal(dlcp_sim_port_enqueue(&port, pf_pkt(&pool, 1, 9000, 10)),
                   DLCP_SIM_ENQUEUED);
  assert_int_equal(dlcp_sim_port_enqueue(&port, pf_pkt(&pool, 3, 20000, 30)),
                   DLCP_SIM_ENQUEUED);
  assert_int_equal(dlcp_sim_port_enqueue(&port, pf_pkt(&pool, 1, 7500, 11)),
                   DLCP_SIM_ENQUEUED);
  assert_int_equal(dlcp_sim_port_enqueue(&port, pf_pkt(&pool, 2, 3000, 20)),
                   DLCP_SIM_ENQUEUED);
  /* Full: a rank-25000 arrival is the least urgent and is dropped. */
  dlcp_sim_packet *late = pf_pkt(&pool, 4, 25000, 40);
  assert_int_equal(dlcp_sim_port_enqueue(&port, late), DLCP_SIM_DROP_BUFFER);
  dlcp_sim_packet_free(&pool, late);
  /* A rank-100 arrival evicts flow 3's rank-20000 packet. */
  assert_int_equal(dlcp_sim_port_enqueue(&port, pf_pkt(&pool, 5, 100, 50)),
                   DLCP_SIM_ENQUEUED);
  assert_int_equal(port.q[0].drops_buffer, 2);
  assert_int_equal(port.q[0].pkts, 4);
  /* Order: 50 (rank 100), 20 (3000), then flow 1 by its earliest packet
   * although the later one has the smaller rank: 10, 11. */
  uint64_t want[] = {50, 20, 10, 11};
  for (uint32_t i = 0; i < 4; i++) {
    dlcp_sim_packet *p = dlcp_sim_port_dequeue(&port);
    assert_non_null(p);
    assert_int_equal(p->seq, want[i]);
    dlcp_sim_port_release(&port, p);
    dlcp_sim_packet_free(&pool, p);
  }
  assert_null(dlcp_sim_port_dequeue(&port));
  assert_int_equal(port.bytes, 0);
  assert_int_equal(pool.live, 0);
  dlcp_sim_packet_pool_free(&pool);
}

/* pFabric end to end: a 100 KB flow arriving while a 20 MB flow fills
 * the receiver's link finishes within 10% of its FCT alone (the switch
 * serves it first), where DCTCP makes it wait behind the long flow; all
 * flows complete despite the small buffer's drops. */
static dlcp_sim_ps pfabric_short(bool with_long, uint64_t *drops) {
  dlcp_sim_config cfg;
  one_rack(&cfg, DLCP_SIM_TRANSPORT_PFABRIC, 3);
  cfg.sw.pfabric = true;
  cfg.sw.port_buffer_bytes = 300000; /* 2 BDP at 100 Gbps x 12 us */
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg.sw.ecn_threshold_bytes[i] = UINT64_MAX;
  }
  if (with_long) {
    assert_int_equal(
        dlcp_sim_config_add_flow(&cfg, "h1", "h0", 20000000, 0, 0), 0);
  }
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h2", "h0", 100000,
                                            dlcp_sim_time_from_us(300), 0),
                   0);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  dlcp_sim_ps f = fct(sim, with_long ? 1 : 0);
  *drops = net_totals(sim).drops_buffer;
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  return f;
}

static void test_pfabric_short_first(void **state) {
  (void)state;
  uint64_t drops_alone, drops_mixed;
  dlcp_sim_ps alone = pfabric_short(false, &drops_alone);
  dlcp_sim_ps mixed = pfabric_short(true, &drops_mixed);
  dlcp_sim_ps dctcp = short_behind_long(DLCP_SIM_TRANSPORT_DCTCP);
  print_message("pFabric short flow: alone %.2f us, beside a long flow "
                "%.2f us (DCTCP %.2f us)\n",
                (double)alone / 1e6, (double)mixed / 1e6,
                (double)dctcp / 1e6);
  assert_int_equal(drops_alone, 0);
  assert_true((double)mixed <= 1.10 * (double)alone);
  assert_true(mixed < dctcp);
}

/* One rack of NDP hosts whose switch trims at 8 packets (queue 1). */
static void ndp_rack(dlcp_sim_config *cfg, uint32_t hosts) {
  one_rack(cfg, DLCP_SIM_TRANSPORT_NDP, hosts);
  cfg->sw.trimming = true;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg->sw.ecn_threshold_bytes[i] = i == 1 ? 8 * 1500 : UINT64_MAX;
  }
}

/* NDP under a 16-to-1 incast: no packet is dropped, data that overflows
 * the 8-packet data queue is trimmed, each trimmed packet is NACKed and
 * sent again exactly once, and the receiver's pulls keep its link busy:
 * the last flow finishes within 2% of (all wire bytes / line rate + one
 * base RTT). */
static void test_ndp_trims(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  ndp_rack(&cfg, 17);
  const uint64_t size = 1000000;
  add_incast(&cfg, 16, size);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  totals t = net_totals(sim);
  assert_int_equal(t.drops_buffer, 0);
  assert_int_equal(t.drops_selective, 0);
  assert_true(t.trims > 0);
  uint64_t retx = 0, timeouts = 0;
  dlcp_sim_ps last = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    retx += sim->flows[i].retransmits;
    timeouts += sim->flows[i].timeouts;
    assert_int_equal(sim->flows[i].delivered_bytes, size);
    last = fct(sim, i) > last ? fct(sim, i) : last;
  }
  assert_int_equal(retx, t.trims);
  assert_int_equal(timeouts, 0);
  double wire = 16.0 * (double)((size + 1459) / 1460) * 1500.0;
  double ideal = wire * 8.0 / 100e9 * 1e12 + 12e6;
  print_message("NDP incast: %llu trims, last FCT %.2f us, ideal %.2f us\n",
                (unsigned long long)t.trims, (double)last / 1e6,
                ideal / 1e6);
  assert_true((double)last <= 1.02 * ideal);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* A host that starts 8 flows of 1 MB at once queues their first windows
 * (one BDP each, 96 us of its link) in its NIC, longer than a 20 us
 * timeout: the timeout runs from when a packet leaves the host, so
 * nothing is sent twice and the host's link stays busy.  (Timed from the
 * send, 6,856 packets went twice and the flows took 1,412 us instead of
 * 634.) */
static void test_ndp_timeout_after_nic(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  ndp_rack(&cfg, 9);
  cfg.transport.ndp.rto_ps = dlcp_sim_time_from_us(20);
  const uint64_t size = 1000000;
  char name[16];
  for (uint32_t i = 1; i <= 8; i++) {
    snprintf(name, sizeof(name), "h%u", i);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", name, size, 0, 0), 0);
  }
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  dlcp_sim_ps last = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    assert_int_equal(sim->flows[i].retransmits, 0);
    assert_int_equal(sim->flows[i].timeouts, 0);
    assert_int_equal(sim->flows[i].delivered_bytes, size);
    last = fct(sim, i) > last ? fct(sim, i) : last;
  }
  double wire = 8.0 * (double)((size + 1459) / 1460) * 1500.0;
  double ideal = wire * 8.0 / 100e9 * 1e12 + 12e6;
  print_message("NDP fan-out: last FCT %.2f us, ideal %.2f us\n",
                (double)last / 1e6, ideal / 1e6);
  assert_true((double)last <= 1.02 * ideal);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* The FCT of one 2 MB NDP flow across a rack, with |loss| on every
 * cable; |retx| gets its retransmissions. */
static dlcp_sim_ps ndp_lossy_flow(double loss, uint64_t *retx) {
  dlcp_sim_config cfg;
  ndp_rack(&cfg, 2);
  const uint64_t size = 2000000;
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h1", size, 0, 0), 0);
  cfg.faults = calloc(1, sizeof(*cfg.faults));
  assert_non_null(cfg.faults);
  cfg.nfaults = 1;
  cfg.faults[0].kind = DLCP_SIM_FAULT_LOSS;
  snprintf(cfg.faults[0].a, sizeof(cfg.faults[0].a), "*");
  cfg.faults[0].loss = loss;
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  assert_int_equal(sim->flows[0].delivered_bytes, size);
  dlcp_sim_ps t = fct(sim, 0);
  *retx = sim->flows[0].retransmits;
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  return t;
}

/* Random loss takes data, ACKs and PULLs alike, and no later packet
 * reveals a lost one.  A PULL's cumulative number makes up for the ones
 * lost before it, and a packet unanswered for the timeout goes again at
 * once: at 1 % loss on each cable a 2 MB flow takes under 3x its
 * lossless time (1.7x here; in scenarios/ndp-incast.yaml's rack it took
 * 9.4x when a timeout resent one packet and the rest waited for PULLs
 * that the lost packets had taken with them). */
static void test_ndp_random_loss(void **state) {
  (void)state;
  uint64_t retx_clean, retx_lossy;
  dlcp_sim_ps clean = ndp_lossy_flow(0.0, &retx_clean);
  dlcp_sim_ps lossy = ndp_lossy_flow(0.01, &retx_lossy);
  print_message("NDP at 1 %% loss: FCT %.2f us against %.2f lossless, %llu "
                "retransmissions\n",
                (double)lossy / 1e6, (double)clean / 1e6,
                (unsigned long long)retx_lossy);
  assert_int_equal(retx_clean, 0);
  assert_true(retx_lossy > 0);
  assert_true(lossy > clean);
  assert_true((double)lossy < 3.0 * (double)clean);
}

/* Every baseline finishes a PS job (8 workers, 4 servers, 2 iterations)
 * on a 2:1 oversubscribed leaf-spine, and the same seed reproduces every
 * flow's finish time. */
static void run_ps(dlcp_sim_transport_kind kind, dlcp_sim_ps *finish,
                   uint32_t nflows) {
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.tors = 4;
  cfg.topo.hosts_per_tor = 4;
  cfg.topo.spines = 2;
  cfg.topo.fabric_rate_bps = dlcp_sim_speed_from_gbps(100);
  cfg.transport.kind = kind;
  cfg.transport.dctcp.rto_min_ps = dlcp_sim_time_from_us(200);
  if (kind == DLCP_SIM_TRANSPORT_PFABRIC) {
    cfg.sw.pfabric = true;
    cfg.sw.port_buffer_bytes = 600000;
  }
  if (kind == DLCP_SIM_TRANSPORT_NDP) {
    cfg.sw.trimming = true;
  }
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    if (kind == DLCP_SIM_TRANSPORT_PFABRIC ||
        (kind == DLCP_SIM_TRANSPORT_NDP && i != 1)) {
      cfg.sw.ecn_threshold_bytes[i] = UINT64_MAX;
    } else if (kind == DLCP_SIM_TRANSPORT_NDP) {
      cfg.sw.ecn_threshold_bytes[i] = 8 * 1500;
    }
  }
  cfg.ps = calloc(1, sizeof(*cfg.ps));
  assert_non_null(cfg.ps);
  cfg.nps = 1;
  cfg.ps[0].workers = 8;
  cfg.ps[0].servers = 4;
  cfg.ps[0].model_bytes = 4000000;
  cfg.ps[0].iterations = 2;
  cfg.ps[0].compute_ps = dlcp_sim_time_from_us(50);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  assert_int_equal(sim->nflows, nflows);
  for (uint32_t i = 0; i < nflows; i++) {
    finish[i] = sim->flows[i].finish_ps;
    assert_int_equal(sim->flows[i].delivered_bytes, sim->flows[i].size_bytes);
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

static void test_all_baselines_ps(void **state) {
  (void)state;
  const dlcp_sim_transport_kind kinds[] = {
      DLCP_SIM_TRANSPORT_TCP, DLCP_SIM_TRANSPORT_PIAS,
      DLCP_SIM_TRANSPORT_PFABRIC, DLCP_SIM_TRANSPORT_NDP};
  enum { NFLOWS = 2 * 2 * 8 * 4 };
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    dlcp_sim_ps a[NFLOWS], b[NFLOWS];
    run_ps(kinds[k], a, NFLOWS);
    run_ps(kinds[k], b, NFLOWS);
    assert_memory_equal(a, b, sizeof(a));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_newreno),
      cmocka_unit_test(test_dctcp_fast_retransmit_in_cwr),
      cmocka_unit_test(test_pias_demotion),
      cmocka_unit_test(test_pias_short_first),
      cmocka_unit_test(test_pfabric_port),
      cmocka_unit_test(test_pfabric_short_first),
      cmocka_unit_test(test_ndp_trims),
      cmocka_unit_test(test_ndp_timeout_after_nic),
      cmocka_unit_test(test_ndp_random_loss),
      cmocka_unit_test(test_all_baselines_ps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
