/*
 * sim_network_test.c: whole-network checks of the simulator against
 * numbers derived by hand: single-flow FCT, incast fairness, strict
 * priority, spraying balance, failures under ECMP and source routing, and
 * the parameter-server cross-rack volume.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sim/sim.h"

#define GBPS100 100000000000ull

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
}

static uint64_t port_payload(const dlcp_sim *sim, const char *from,
                             const char *to) {
  uint32_t a = dlcp_sim_net_find_node(&sim->net, from);
  uint32_t b = dlcp_sim_net_find_node(&sim->net, to);
  uint32_t p = dlcp_sim_net_find_port(&sim->net, a, b);
  assert_int_not_equal(p, DLCP_SIM_NONE);
  return sim->net.ports[p].tx_data_payload_bytes;
}

/*
 * One flow across a 2-ToR, 2-spine leaf-spine at 100 Gbps, 3 us per link
 * (base RTT 8 * 3 = 24 us).  The window (init_cwnd) is set above the
 * flow's size so the sender is never window-limited: this measures the
 * network model, not slow start.  All links run at the same rate, so the
 * packets leave the NIC back to back and never queue again.  Exactly:
 *   last data bit leaves the NIC   n * T          (T = 1500 B at 100 Gbps)
 *   3 more store-and-forward hops  + 3 * T
 *   4 propagation delays           + 4 * d
 *   ACK back: 4 hops of 64 B + 4 d + 4 * Ta + 4 * d
 * so FCT = n*T + 3*T + 4*Ta + 8*d, and the textbook size/rate + base RTT
 * (n*T + 8*d) is within 1%.
 */
static void test_single_flow_fct(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 1;
  cfg.topo.tors = 2;
  cfg.topo.spines = 2;
  cfg.topo.link_delay_ps = dlcp_sim_time_from_us(3);
  const uint64_t n = 2000; /* segments */
  const uint64_t size = n * cfg.transport.mss_bytes;
  cfg.transport.dctcp.init_cwnd_pkts = 4000;
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h1", size, 0, 0), 0);
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  const dlcp_sim_flow *f = &sim->flows[0];
  assert_int_not_equal(f->finish_ps, DLCP_SIM_PS_NEVER);
  dlcp_sim_ps fct = f->finish_ps - f->start_ps;

  uint64_t wire = cfg.transport.mss_bytes + cfg.transport.header_bytes;
  dlcp_sim_ps T = dlcp_sim_serialization_ps(wire, GBPS100);
  dlcp_sim_ps Ta = dlcp_sim_serialization_ps(cfg.transport.ack_bytes,
                                             GBPS100);
  dlcp_sim_ps d = cfg.topo.link_delay_ps;
  dlcp_sim_ps exact = n * T + 3 * T + 4 * Ta + 8 * d;
  assert_int_equal(fct, exact);

  double textbook = (double)(n * wire) * 8.0 / 100e9 * 1e12 + 8.0 * (double)d;
  double rel = ((double)fct - textbook) / textbook;
  print_message("single flow: FCT %.3f us, size/rate + RTT %.3f us (%+.3f%%)\n",
                (double)fct / 1e6, textbook / 1e6, rel * 100);
  assert_true(rel >= 0 && rel < 0.01);
  assert_int_equal(f->retransmits, 0);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/*
 * 16 DCTCP senders to one receiver under one ToR (100 Gbps, 512 KB per
 * port, ECN at 65 packets, default init window 20).  Throughput over the
 * middle of the run, while every flow is active, is shared fairly: Jain's
 * index (sum x)^2 / (n * sum x^2) >= 0.95.
 */
static void test_incast_fairness(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 17;
  cfg.topo.tors = 1;
  const uint32_t n = 16;
  char src[16];
  for (uint32_t i = 1; i <= n; i++) {
    snprintf(src, sizeof(src), "h%u", i);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, src, "h0", 4000000, 0, 0),
                     0);
  }
  dlcp_sim *sim = build(&cfg);
  const dlcp_sim_ps t1 = dlcp_sim_time_from_us(500);
  const dlcp_sim_ps t2 = dlcp_sim_time_from_us(4500);
  uint64_t before[16], after[16];
  assert_int_equal(dlcp_sim_run(sim, t1), 0);
  for (uint32_t i = 0; i < n; i++) {
    before[i] = sim->flows[i].bytes_acked;
  }
  assert_int_equal(dlcp_sim_run(sim, t2), 0);
  double sum = 0, sq = 0;
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(sim->flows[i].finish_ps, DLCP_SIM_PS_NEVER);
    after[i] = sim->flows[i].bytes_acked;
    double x = (double)(after[i] - before[i]);
    sum += x;
    sq += x * x;
  }
  double jain = sum * sum / (n * sq);
  /* The bottleneck stays busy: at least 90% of line rate goes to goodput. */
  double goodput = sum * 8.0 / ((double)(t2 - t1) / 1e12);
  print_message("incast: Jain %.4f, goodput %.1f Gbps\n", jain,
                goodput / 1e9);
  assert_true(jain >= 0.95);
  assert_true(goodput >= 0.9 * 100e9 * 1460.0 / 1500.0);
  run_all(sim);
  assert_int_equal(sim->flows_done, n);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/*
 * Strict priority at the flow level: a low-priority (7) flow is running
 * when a high-priority (0) flow to the same receiver starts.  The high
 * flow sees an almost empty network: its FCT is within 2% of what it gets
 * alone (the only extra wait is a low packet already being serialized at
 * each hop), and the low flow makes no progress in the meantime.
 */
static void test_strict_priority_flows(void **state) {
  (void)state;
  dlcp_sim_ps alone = 0;
  const uint64_t size = 1000ull * 1460;
  for (int pass = 0; pass < 2; pass++) {
    dlcp_sim_config cfg;
    dlcp_sim_config_default(&cfg);
    cfg.topo.hosts_per_tor = 3;
    cfg.topo.tors = 1;
    cfg.transport.dctcp.init_cwnd_pkts = 2000;
    cfg.sw.port_buffer_bytes = 8000000; /* no drops: this is about order */
    if (pass == 1) {
      assert_int_equal(
          dlcp_sim_config_add_flow(&cfg, "h2", "h0", 20 * size, 0, 7), 0);
    }
    assert_int_equal(dlcp_sim_config_add_flow(
                         &cfg, "h1", "h0", size, dlcp_sim_time_from_us(50), 0),
                     0);
    dlcp_sim *sim = build(&cfg);
    uint32_t hi = pass == 1 ? 1 : 0;
    run_all(sim);
    const dlcp_sim_flow *h = &sim->flows[hi];
    dlcp_sim_ps fct = h->finish_ps - h->start_ps;
    if (pass == 0) {
      alone = fct;
    } else {
      const dlcp_sim_flow *lo = &sim->flows[0];
      print_message("priority: high FCT %.3f us (alone %.3f us), low FCT "
                    "%.3f us\n", (double)fct / 1e6, (double)alone / 1e6,
                    (double)(lo->finish_ps - lo->start_ps) / 1e6);
      assert_true((double)fct <= 1.02 * (double)alone);
      assert_true(lo->finish_ps > h->finish_ps);
      /* The ToR->h0 port served queue 0 entirely before queue 7 drained. */
      uint32_t tor = dlcp_sim_net_find_node(&sim->net, "tor0");
      uint32_t p = dlcp_sim_net_find_port(&sim->net, tor, 0);
      assert_true(sim->net.ports[p].q[7].max_bytes > 0);
    }
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
}

/*
 * Per-packet spraying of one flow over 4 spines: the data bytes each ToR
 * uplink carries are within 5% of the mean.  Flow ECMP on the same flow,
 * for contrast, puts everything on one spine.
 */
static void test_spraying_balance(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    dlcp_sim_config cfg;
    dlcp_sim_config_default(&cfg);
    cfg.topo.hosts_per_tor = 1;
    cfg.topo.tors = 2;
    cfg.topo.spines = 4;
    cfg.transport.lb = mode == 0 ? DLCP_SIM_LB_SPRAY : DLCP_SIM_LB_ECMP;
    assert_int_equal(
        dlcp_sim_config_add_flow(&cfg, "h0", "h1", 30000ull * 1460, 0, 0), 0);
    dlcp_sim *sim = build(&cfg);
    run_all(sim);
    uint64_t bytes[4], total = 0, nonzero = 0;
    char spine[16];
    for (int s = 0; s < 4; s++) {
      snprintf(spine, sizeof(spine), "spine%d", s);
      bytes[s] = port_payload(sim, "tor0", spine);
      total += bytes[s];
      nonzero += bytes[s] > 0;
    }
    assert_true(total >= 30000ull * 1460);
    if (mode == 0) {
      double mean = (double)total / 4;
      for (int s = 0; s < 4; s++) {
        double dev = ((double)bytes[s] - mean) / mean;
        print_message("spray: spine%d %+.2f%%\n", s, dev * 100);
        assert_true(dev < 0.05 && dev > -0.05);
      }
    } else {
      assert_int_equal(nonzero, 1);
    }
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
}

/*
 * DCTCP with source routing and flows whose workload names no path: each
 * flow draws its own path id, as ECMP would hash it, so 8 flows across a
 * 4-spine leaf-spine spread over the spines (3 of 4 here, as a hash may
 * leave one idle), each flow on one.  With path 0 for every flow all 8
 * took spine0.
 */
static void test_source_routing_unpinned_flows(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 8;
  cfg.topo.tors = 2;
  cfg.topo.spines = 4;
  cfg.transport.lb = DLCP_SIM_LB_SOURCE;
  for (int i = 0; i < 8; i++) {
    char src[8], dst[8];
    snprintf(src, sizeof(src), "h%d", i);
    snprintf(dst, sizeof(dst), "h%d", 8 + i);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, src, dst, 100 * 1460, 0, 0),
                     0);
  }
  dlcp_sim *sim = build(&cfg);
  run_all(sim);
  uint64_t total = 0;
  int used = 0;
  char spine[16];
  for (int sp = 0; sp < 4; sp++) {
    snprintf(spine, sizeof(spine), "spine%d", sp);
    uint64_t b = port_payload(sim, "tor0", spine);
    print_message("spine%d: %llu payload bytes\n", sp, (unsigned long long)b);
    assert_int_equal(b % (100 * 1460), 0);
    used += b > 0;
    total += b;
  }
  assert_int_equal(total, 8 * 100 * 1460);
  assert_true(used >= 3);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/*
 * The link tor1-spine0 goes down.  ECMP flows (some of which hash onto
 * spine0, before and after the failure) all finish and the dead link
 * carries nothing after it failed; a source-routed flow pinned to spine0
 * (path 0) is lost there and never finishes, while one pinned to spine1
 * (path 1) finishes untouched.
 */
static void test_link_down_ecmp_vs_source(void **state) {
  (void)state;
  /* ECMP, failure mid-run while traffic is on the link. */
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 4;
  cfg.topo.tors = 2;
  cfg.topo.spines = 2;
  cfg.transport.dctcp.rto_min_ps = dlcp_sim_time_from_us(200);
  cfg.transport.dctcp.rto_init_ps = dlcp_sim_time_from_us(200);
  char src[8], dst[8];
  for (int i = 0; i < 4; i++) {
    snprintf(src, sizeof(src), "h%d", i);
    snprintf(dst, sizeof(dst), "h%d", 4 + i);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, src, dst, 2000000, 0, 0),
                     0);
  }
  assert_int_equal(dlcp_sim_config_add_fault(&cfg, DLCP_SIM_FAULT_DOWN,
                                             "tor1", "spine0", 0,
                                             dlcp_sim_time_from_us(60)),
                   0);
  dlcp_sim *sim = build(&cfg);
  assert_int_equal(dlcp_sim_run(sim, dlcp_sim_time_from_us(60)), 0);
  uint64_t used_before = port_payload(sim, "spine0", "tor1");
  run_all(sim);
  assert_int_equal(sim->flows_done, 4);
  assert_true(used_before > 0); /* some flow did use the link */
  assert_int_equal(port_payload(sim, "spine0", "tor1"), used_before);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);

  /* Source routing, link down from the start. */
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 2;
  cfg.topo.tors = 2;
  cfg.topo.spines = 2;
  cfg.stop_ps = dlcp_sim_time_from_ms(20);
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h2", 200000,
                                            dlcp_sim_time_from_us(1), 0),
                   0);
  assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h1", "h3", 200000,
                                            dlcp_sim_time_from_us(1), 0),
                   0);
  cfg.flows[0].lb = DLCP_SIM_LB_SOURCE;
  cfg.flows[0].path = 0; /* spine0 */
  cfg.flows[1].lb = DLCP_SIM_LB_SOURCE;
  cfg.flows[1].path = 1; /* spine1 */
  assert_int_equal(dlcp_sim_config_add_fault(&cfg, DLCP_SIM_FAULT_DOWN,
                                             "spine0", "tor1", 0, 0),
                   0);
  sim = build(&cfg);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows[0].finish_ps, DLCP_SIM_PS_NEVER);
  assert_int_not_equal(sim->flows[1].finish_ps, DLCP_SIM_PS_NEVER);
  assert_true(sim->flows[0].timeouts > 0);
  uint32_t s0 = dlcp_sim_net_find_node(&sim->net, "spine0");
  uint32_t t1 = dlcp_sim_net_find_node(&sim->net, "tor1");
  uint32_t p = dlcp_sim_net_find_port(&sim->net, s0, t1);
  assert_true(sim->net.ports[p].drops_down > 0);
  assert_int_equal(port_payload(sim, "tor0", "spine1"), 200000);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/*
 * PS pattern: 12 workers and 4 servers (3:1) on 4 racks of 4 hosts, model
 * M bytes.  Every worker pushes M/4 to each server and pulls it back, and
 * the placement puts one server and three workers in every rack, so per
 * iteration the payload crossing ToR uplinks is exactly
 *   2 * W * M * (1 - 1/r) = 2 * 12 * M * 3/4.
 * Each cross-rack data packet crosses exactly one ToR->spine link; the run
 * has no retransmissions, so the counted bytes are first transmissions.
 */
static void test_ps_cross_rack_volume(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.hosts_per_tor = 4;
  cfg.topo.tors = 4;
  cfg.topo.spines = 2;
  dlcp_sim_ps_spec ps;
  memset(&ps, 0, sizeof(ps));
  ps.workers = 12;
  ps.servers = 4;
  ps.model_bytes = 400000;
  ps.iterations = 2;
  ps.compute_ps = dlcp_sim_time_from_us(10);
  cfg.ps = &ps;
  cfg.nps = 1;
  dlcp_sim *sim = build(&cfg);
  cfg.ps = NULL;
  cfg.nps = 0;
  run_all(sim);
  assert_int_equal(sim->nflows, 2u * 2 * 12 * 4);
  assert_int_equal(sim->flows_done, sim->nflows);
  uint64_t retx = 0, cross = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    retx += sim->flows[i].retransmits;
  }
  assert_int_equal(retx, 0);
  char tor[16], spine[16];
  for (int t = 0; t < 4; t++) {
    for (int s = 0; s < 2; s++) {
      snprintf(tor, sizeof(tor), "tor%d", t);
      snprintf(spine, sizeof(spine), "spine%d", s);
      cross += port_payload(sim, tor, spine);
    }
  }
  uint64_t expect = 2 /* iterations */ * 2 * 12 * 400000 * 3 / 4;
  print_message("ps: cross-rack payload %llu B, formula %llu B\n",
                (unsigned long long)cross, (unsigned long long)expect);
  assert_int_equal(cross, expect);
  /* Iteration 1's pushes start only after the worker's pulls + compute. */
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->iteration == 1 && f->group == DLCP_SIM_GROUP_PS_PUSH) {
      for (uint32_t j = 0; j < sim->nflows; j++) {
        const dlcp_sim_flow *g = &sim->flows[j];
        if (g->iteration == 0 && g->group == DLCP_SIM_GROUP_PS_PULL &&
            g->dst == f->src) {
          assert_true(f->start_ps >= g->finish_ps + dlcp_sim_time_from_us(10));
        }
      }
    }
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* A 3-tier fat-tree (k = 4): 16 hosts, 20 switches; an all-to-one-pod
 * exchange completes, and source routing reaches every core by path id. */
static void test_fat_tree(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  dlcp_sim_config_default(&cfg);
  cfg.topo.kind = DLCP_SIM_TOPO_FAT_TREE;
  cfg.topo.k = 4;
  for (uint32_t path = 0; path < 4; path++) {
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, "h0", "h15", 14600, 0, 0),
                     0);
    cfg.flows[path].lb = DLCP_SIM_LB_SOURCE;
    cfg.flows[path].path = path;
  }
  dlcp_sim *sim = build(&cfg);
  assert_int_equal(sim->net.nhosts, 16);
  assert_int_equal(sim->net.nnodes, 16 + 8 + 8 + 4);
  /* Each switch keeps each distinct candidate list once: an edge switch
   * its 2 up ports (for the 7 other edges' classes), an aggregation
   * switch 1 port down to each of its pod's 2 edges and its 2 core ports,
   * a core switch 1 port down to each of the 4 pods: 8 x 2 + 8 x 4 + 4 x 4
   * port ids, where a copy per (switch, class) took 256. */
  assert_int_equal(sim->net.live.nports, 64);
  assert_int_equal(sim->net.fixed.nports, 64);
  run_all(sim);
  assert_int_equal(sim->flows_done, 4);
  /* Each path id used a different core: every core carried 14600 B. */
  char core[16], agg[16];
  for (int c = 0; c < 4; c++) {
    snprintf(core, sizeof(core), "core%d", c);
    snprintf(agg, sizeof(agg), "agg3_%d", c / 2);
    assert_int_equal(port_payload(sim, core, agg), 14600);
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_flow_fct),
      cmocka_unit_test(test_incast_fairness),
      cmocka_unit_test(test_strict_priority_flows),
      cmocka_unit_test(test_spraying_balance),
      cmocka_unit_test(test_source_routing_unpinned_flows),
      cmocka_unit_test(test_link_down_ecmp_vs_source),
      cmocka_unit_test(test_ps_cross_rack_volume),
      cmocka_unit_test(test_fat_tree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
