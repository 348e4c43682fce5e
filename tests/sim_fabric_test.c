/*
 * sim_fabric_test.c: the switch features beyond FIFO queues: RED with
 * min < max and a marking probability, per-priority PFC (PAUSE at xoff,
 * RESUME at xon, headroom, counters, head-of-line blocking), and their
 * scenario fields and errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sim/scenario.h"
#include "sim/sim.h"

#define PKT 1500u

static dlcp_sim_packet mkpkt(uint32_t seq) {
  dlcp_sim_packet p;
  memset(&p, 0, sizeof(p));
  p.kind = DLCP_SIM_PKT_DATA;
  p.prio = 2;
  p.ecn = DLCP_SIM_ECN_ECT;
  p.size_bytes = PKT;
  p.seq = seq;
  p.ingress = DLCP_SIM_NONE;
  return p;
}

/* RED with min 10 and max 30 packets, max_p 0.5: a packet that finds d
 * packets queued is marked with probability 0.5 (d - 10) / 20, so never
 * below 10 and always from 30.  Measured over 20,000 arrivals per depth at
 * a steady depth (one packet leaves per arrival), within 0.015. */
static void test_red_probability(void **state) {
  (void)state;
  dlcp_sim_port_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.nqueues = 8;
  cfg.buffer_bytes = 1000 * PKT;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg.ecn_threshold_bytes[i] = UINT64_MAX;
  }
  cfg.red_min_bytes = 10 * PKT;
  cfg.red_max_bytes = 30 * PKT;
  cfg.red_max_p = 0.5;
  const uint32_t depths[] = {0, 9, 10, 15, 20, 25, 29, 30, 40};
  static dlcp_sim_packet pk[64];
  for (size_t k = 0; k < sizeof(depths) / sizeof(depths[0]); k++) {
    uint32_t d = depths[k];
    dlcp_sim_port port;
    memset(&port, 0, sizeof(port));
    dlcp_sim_port_init(&port, &cfg, NULL);
    dlcp_rng_seed(&port.red_rng, 42 + k);
    for (uint32_t i = 0; i < d; i++) {
      pk[i] = mkpkt(i);
      dlcp_sim_port_enqueue(&port, &pk[i]);
    }
    const uint32_t trials = 20000;
    uint32_t marked = 0;
    for (uint32_t t = 0; t < trials; t++) {
      dlcp_sim_packet *slot = &pk[(d + t) % 64];
      *slot = mkpkt(t);
      dlcp_sim_verdict v = dlcp_sim_port_enqueue(&port, slot);
      marked += v == DLCP_SIM_MARKED;
      dlcp_sim_packet *out = dlcp_sim_port_dequeue(&port);
      dlcp_sim_port_release(&port, out);
    }
    double want = d < 10 ? 0.0 : d >= 30 ? 1.0 : 0.5 * (d - 10) / 20.0;
    double got = (double)marked / trials;
    print_message("RED depth %u: marked %.4f, expected %.4f\n", d, got, want);
    if (want == 0.0 || want == 1.0) {
      assert_int_equal(marked, (uint32_t)(want * trials));
    } else {
      assert_true(got > want - 0.015 && got < want + 0.015);
    }
  }
}

/*
 * PFC and head-of-line blocking.  Two ToRs under one spine, 100 Gbps and
 * 1 us links.  h0, h1, h2 (tor0) send 2 MB each to h4 (tor1): tor1's
 * port to h4 is the bottleneck.  h3 (tor0) sends 2 MB to h5 (tor1), whose
 * path is idle but shares tor0 -> spine -> tor1 with the incast.  TCP
 * without ECN, a 64-packet window, 200 KB per port.
 *   Without PFC the bottleneck overflows: packets are dropped.
 *   With PFC on priority 0 (xoff 60 KB, headroom 2 x 12.5 KB + 2 MTU
 *   rounded up to 40 KB): nothing is dropped anywhere, PAUSE frames were
 *   sent, and the victim h3 -> h5, paused behind traffic that is not its
 *   own, finishes at least 1.5x later than alone.
 */
static void pfc_net(dlcp_sim_config *cfg, bool pfc, bool incast) {
  dlcp_sim_config_default(cfg);
  cfg->topo.tors = 2;
  cfg->topo.hosts_per_tor = 4;
  cfg->topo.spines = 1;
  cfg->topo.link_delay_ps = dlcp_sim_time_from_us(1);
  cfg->transport.kind = DLCP_SIM_TRANSPORT_TCP;
  cfg->transport.dctcp.init_cwnd_pkts = 64;
  cfg->sw.port_buffer_bytes = 200000;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg->sw.ecn_threshold_bytes[i] = UINT64_MAX;
  }
  if (pfc) {
    cfg->sw.pfc.prio_mask = 1;
    cfg->sw.pfc.xoff_bytes = 60000;
    cfg->sw.pfc.xon_bytes = 57000;
    cfg->sw.pfc.headroom_bytes = 40000;
  }
  if (incast) {
    const char *senders[] = {"h0", "h1", "h2"};
    for (int i = 0; i < 3; i++) {
      assert_int_equal(
          dlcp_sim_config_add_flow(cfg, senders[i], "h4", 2000000, 0, 0), 0);
    }
  }
  assert_int_equal(dlcp_sim_config_add_flow(cfg, "h3", "h5", 2000000, 0, 0),
                   0);
}

typedef struct pfc_result {
  dlcp_sim_ps victim_fct;
  uint64_t drops;
  uint64_t pauses;
  uint64_t headroom_drops;
  dlcp_sim_ps paused_ps;
} pfc_result;

static pfc_result run_pfc(bool pfc, bool incast) {
  dlcp_sim_config cfg;
  pfc_net(&cfg, pfc, incast);
  dlcp_sim *sim = NULL;
  char err[256];
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  pfc_result r;
  memset(&r, 0, sizeof(r));
  const dlcp_sim_flow *v = &sim->flows[sim->nflows - 1];
  r.victim_fct = v->finish_ps - v->start_ps;
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    for (uint32_t q = 0; q < DLCP_SIM_MAX_QUEUES; q++) {
      r.drops += sim->net.ports[p].q[q].drops_buffer +
                 sim->net.ports[p].q[q].drops_selective;
    }
    if (sim->net.pfc_in) {
      r.pauses += sim->net.pfc_in[p].pauses;
      r.headroom_drops += sim->net.pfc_in[p].headroom_drops;
      r.paused_ps += sim->net.pfc_in[p].paused_ps;
      /* Every PAUSE was followed by a RESUME: nothing stays paused. */
      assert_int_equal(sim->net.pfc_in[p].xoff_sent, 0);
      assert_int_equal(sim->net.ports[p].pfc_paused, 0);
    }
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  return r;
}

static void test_pfc_lossless_and_hol(void **state) {
  (void)state;
  pfc_result off = run_pfc(false, true);
  pfc_result on = run_pfc(true, true);
  pfc_result alone = run_pfc(true, false);
  print_message("no PFC: %llu drops; PFC: %llu drops, %llu pauses, "
                "%.1f us paused; victim %.1f us (alone %.1f us)\n",
                (unsigned long long)off.drops, (unsigned long long)on.drops,
                (unsigned long long)on.pauses, (double)on.paused_ps / 1e6,
                (double)on.victim_fct / 1e6, (double)alone.victim_fct / 1e6);
  assert_true(off.drops > 0);
  assert_int_equal(on.drops, 0);
  assert_int_equal(on.headroom_drops, 0);
  assert_true(on.pauses > 0);
  assert_true(on.paused_ps > 0);
  assert_int_equal(alone.pauses, 0);
  assert_true((double)on.victim_fct >= 1.5 * (double)alone.victim_fct);
}

/* PFC pauses one priority only: with the incast on lossless queue 1 and
 * the victim on queue 0 (not lossless), PAUSEs stop queue 1 on the shared
 * links while the victim's packets keep leaving; a port-wide pause would
 * hold them too.  The victim finishes within 5% of its time alone. */
static void test_pfc_per_priority(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  pfc_net(&cfg, true, true);
  for (uint32_t i = 0; i + 1 < cfg.nflows; i++) {
    cfg.flows[i].prio = 1;
  }
  cfg.sw.pfc.prio_mask = 1u << 1;
  dlcp_sim *sim = NULL;
  char err[256];
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  const dlcp_sim_flow *v = &sim->flows[sim->nflows - 1];
  dlcp_sim_ps fct = v->finish_ps - v->start_ps;
  uint64_t pauses = 0;
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    pauses += sim->net.pfc_in[p].pauses;
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  pfc_result alone = run_pfc(true, false);
  print_message("queue-0 victim beside paused queue 1: %.1f us (alone "
                "%.1f us), %llu pauses\n", (double)fct / 1e6,
                (double)alone.victim_fct / 1e6, (unsigned long long)pauses);
  assert_true(pauses > 0);
  assert_true((double)fct <= 1.05 * (double)alone.victim_fct);
}

static void expect_error(const char *text, const char *want) {
  dlcp_sim_config cfg;
  char err[512];
  int rv = dlcp_sim_scenario_load(&cfg, text, strlen(text), "t.yaml", NULL, 0,
                                  err, sizeof(err));
  assert_int_equal(rv, DLCP_ERR_CONFIG);
  if (strcmp(err, want) != 0) {
    print_error("got  '%s'\nwant '%s'\n", err, want);
  }
  assert_string_equal(err, want);
}

static void test_scenario_fields(void **state) {
  (void)state;
  const char *ok = "switch:\n"
                   "  red: {min: 20pkts, max: 60pkts, max_p: 0.2}\n"
                   "  pfc: {priorities: [0, 3], xoff: 60KB, headroom: 40KB}\n"
                   "transport:\n"
                   "  kind: pias\n"
                   "  pias: {thresholds: [100KB, 1MB]}\n";
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(dlcp_sim_scenario_load(&cfg, ok, strlen(ok), "t.yaml",
                                          NULL, 0, err, sizeof(err)),
                   0);
  assert_int_equal(cfg.sw.red_min_bytes, 30000);
  assert_int_equal(cfg.sw.red_max_bytes, 90000);
  assert_int_equal(cfg.sw.pfc.prio_mask, 0x9);
  assert_int_equal(cfg.sw.pfc.xoff_bytes, 60000);
  assert_int_equal(cfg.sw.pfc.xon_bytes, 57000); /* xoff - 2 MTU */
  assert_int_equal(cfg.sw.pfc.headroom_bytes, 40000);
  assert_int_equal(cfg.transport.kind, DLCP_SIM_TRANSPORT_PIAS);
  assert_int_equal(cfg.transport.pias.nthresholds, 2);
  assert_int_equal(cfg.transport.pias.thresholds_bytes[1], 1000000);
  dlcp_sim_config_free(&cfg);

  expect_error("switch:\n  red: {min: 60pkts, max: 20pkts, max_p: 0.2}\n",
               "t.yaml:2: field 'switch.red.max': expected max > min");
  expect_error("switch:\n  red: {min: 1pkts, max: 2pkts}\n",
               "t.yaml:2: field 'switch.red.max_p': expected this field to "
               "be present");
  expect_error("switch:\n  pfc: {priorities: [9], xoff: 1KB, headroom: 1KB}\n",
               "t.yaml:2: field 'switch.pfc.priorities[]': expected a queue "
               "index in [0, 7], got '9'");
  expect_error("transport:\n  pias:\n    thresholds: [1MB, 100KB]\n",
               "t.yaml:3: field 'transport.pias.thresholds[]': expected "
               "increasing thresholds");
  expect_error("switch:\n  scheduling: fifo\n",
               "t.yaml:2: field 'switch.scheduling': expected one of strict, "
               "pfabric, got 'fifo'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_red_probability),
      cmocka_unit_test(test_pfc_lossless_and_hol),
      cmocka_unit_test(test_pfc_per_priority),
      cmocka_unit_test(test_scenario_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
