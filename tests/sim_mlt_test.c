/*
 * sim_mlt_test.c: MLT running through the src/proto core inside the
 * simulator (src/sim/mlt_host.c): FCT on a clean fabric against the closed
 * form, a pushed flow shortened by half a round trip when its server
 * posts the receive ahead, no timeout tail under random loss where DCTCP
 * has one, full
 * delivery at p = 0, loss-bounded delivery at p > 0, path ids spreading
 * packets across spines, selective dropping of unimportant packets, the
 * control channel's own priority, and determinism.
 */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/scenario.h"
#include "sim/sim.h"

#define GBPS100 100000000000ull

static dlcp_sim *build_yaml(const char *yaml, const char *const *sets,
                            size_t nsets) {
  dlcp_sim_config cfg;
  char err[512];
  int rv = dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml), "test.yaml", sets,
                                  nsets, err, sizeof(err));
  if (rv != 0) {
    print_error("%s\n", err);
  }
  assert_int_equal(rv, 0);
  dlcp_sim *sim = NULL;
  rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
  if (rv != 0) {
    print_error("dlcp_sim_new: %s\n", err);
  }
  assert_int_equal(rv, 0);
  dlcp_sim_config_free(&cfg);
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
 * One 10 MB flow over a 2-ToR leaf-spine at 100 Gbps, 3 us per link (base
 * RTT 24 us).  The sender paces at exactly the wire rate (1500-byte
 * packets: 1428 B payload + 44 B MLT + 28 B IPv4/UDP), so
 *   FCT = START one way + n * T + base RTT / 2 + STOP one way + a few
 *         store-and-forward hops,
 * i.e. wire bytes / rate + 1.5 base RTTs: the extra half RTT is the START
 * that a pre-posted receive would hide.  It must be within 2% of
 * wire/rate + base RTT (and not below it).
 */
static const char clean_yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 1, spines: 2,\n"
    "           link_delay: 3us}\n"
    "transport: {kind: mlt, loss_bound: 0.1, paths: 4,\n"
    "            load_balancing: source}\n"
    "workload:\n"
    "  flows: [{src: h0, dst: h1, size: 10MB}]\n";

static void test_clean_fct(void **state) {
  (void)state;
  dlcp_sim *sim = build_yaml(clean_yaml, NULL, 0);
  run_all(sim);
  const dlcp_sim_flow *f = &sim->flows[0];
  assert_int_equal(f->status, 0);
  assert_int_not_equal(f->finish_ps, DLCP_SIM_PS_NEVER);
  assert_int_equal(f->delivered_bytes, f->size_bytes);
  assert_int_equal(f->retransmits, 0);
  uint64_t seg = 1500 - 28 - 44;
  uint64_t npkts = (f->size_bytes + seg - 1) / seg;
  assert_int_equal(f->pkts_sent, npkts);
  uint64_t wire = f->size_bytes + npkts * (28 + 44);
  dlcp_sim_ps ideal = dlcp_sim_serialization_ps(wire, GBPS100) +
                      dlcp_sim_time_from_us(24);
  dlcp_sim_ps fct = f->finish_ps - f->start_ps;
  double ratio = (double)fct / (double)ideal;
  print_message("mlt clean: fct %.3f us, wire/rate + RTT %.3f us (%+.2f%%)\n",
                dlcp_sim_time_to_us(fct), dlcp_sim_time_to_us(ideal),
                (ratio - 1) * 100);
  assert_true(fct >= ideal);
  assert_true(ratio < 1.02);
  dlcp_sim_del(sim);
}

/*
 * transport.eager_bytes (the runtime's DLCP_EAGER_BYTES): a flow of at
 * most that size goes as one EAGER control message, so its FCT is one
 * one-way trip (12 us of propagation over 4 links plus the fragments'
 * store-and-forward), where without it the START, the data and the STOP
 * make three.  A flow above the size goes the usual way in the same run.
 */
static const char eager_yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 1, spines: 2,\n"
    "           link_delay: 3us}\n"
    "transport: {kind: mlt, paths: 2, load_balancing: source}\n"
    "workload:\n"
    "  flows: [{src: h0, dst: h1, size: 4KB},\n"
    "          {src: h1, dst: h0, size: 200KB, start: 100us}]\n";

static void test_eager_flows(void **state) {
  (void)state;
  dlcp_sim_ps fct[2][2];
  for (int eager = 0; eager < 2; eager++) {
    const char *set[] = {"transport.eager_bytes=65536"};
    dlcp_sim *sim = build_yaml(eager_yaml, set, eager ? 1 : 0);
    run_all(sim);
    for (int i = 0; i < 2; i++) {
      const dlcp_sim_flow *f = &sim->flows[i];
      assert_int_equal(f->status, 0);
      assert_int_equal(f->delivered_bytes, f->size_bytes);
      assert_int_not_equal(f->finish_ps, DLCP_SIM_PS_NEVER);
      assert_true(f->rx_done_ps <= f->finish_ps);
      fct[eager][i] = f->finish_ps - f->start_ps;
    }
    print_message("eager_bytes %s: 4 KB flow %.3f us, 200 KB flow %.3f us\n",
                  eager ? "65536" : "0", dlcp_sim_time_to_us(fct[eager][0]),
                  dlcp_sim_time_to_us(fct[eager][1]));
    dlcp_sim_del(sim);
  }
  dlcp_sim_ps one_way = dlcp_sim_time_from_us(12);
  assert_true(fct[1][0] >= one_way && fct[1][0] < one_way * 11 / 10);
  assert_true(fct[0][0] >= 3 * one_way);
  assert_true(fct[1][1] == fct[0][1]); /* above the size: untouched */
}

/*
 * A server that posts its receives ahead (workload.ps.post_ahead, the
 * default) has its START at the worker before the push begins, so the
 * push's data leaves at once: its FCT is the one without posting ahead
 * less the START's one-way trip (12 us of propagation and the START's
 * store-and-forward at each of 4 hops, under a full packet's).  The
 * pulls, whose receives the worker posts when they start, are the same
 * to the picosecond.
 */
static const char ahead_yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 1, spines: 2,\n"
    "           link_delay: 3us}\n"
    "transport: {kind: mlt, loss_bound: 0, paths: 2,\n"
    "            load_balancing: source}\n"
    "workload:\n"
    "  ps: {workers: 1, servers: 1, model_size: 256KB, iterations: 3,\n"
    "       compute_time: 20us, start: 50us}\n";

static void ps_fcts(const dlcp_sim *sim, dlcp_sim_flow_group g,
                    dlcp_sim_ps *fct) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == g) {
      assert_int_equal(f->status, 0);
      assert_int_not_equal(f->finish_ps, DLCP_SIM_PS_NEVER);
      fct[f->iteration] = f->finish_ps - f->start_ps;
      n++;
    }
  }
  assert_int_equal(n, 3);
}

static void test_server_posts_ahead(void **state) {
  (void)state;
  const char *off[] = {"workload.ps.post_ahead=false"};
  dlcp_sim *ahead = build_yaml(ahead_yaml, NULL, 0);
  dlcp_sim *late = build_yaml(ahead_yaml, off, 1);
  run_all(ahead);
  run_all(late);
  dlcp_sim_ps push_a[3], push_l[3], pull_a[3], pull_l[3];
  ps_fcts(ahead, DLCP_SIM_GROUP_PS_PUSH, push_a);
  ps_fcts(late, DLCP_SIM_GROUP_PS_PUSH, push_l);
  ps_fcts(ahead, DLCP_SIM_GROUP_PS_PULL, pull_a);
  ps_fcts(late, DLCP_SIM_GROUP_PS_PULL, pull_l);
  for (int it = 0; it < 3; it++) {
    print_message("iteration %d: push %.3f / %.3f us, pull %.3f / %.3f us "
                  "(ahead / not)\n", it, dlcp_sim_time_to_us(push_a[it]),
                  dlcp_sim_time_to_us(push_l[it]),
                  dlcp_sim_time_to_us(pull_a[it]),
                  dlcp_sim_time_to_us(pull_l[it]));
    dlcp_sim_ps one_way = dlcp_sim_time_from_us(12);
    assert_true(push_l[it] - push_a[it] >= one_way);
    assert_true(push_l[it] - push_a[it] <
                one_way + 4 * dlcp_sim_serialization_ps(1500, GBPS100));
    assert_int_equal(pull_a[it], pull_l[it]);
  }
  dlcp_sim_del(ahead);
  dlcp_sim_del(late);
}

/* Eight 1 MB flows between two racks over 4 spines (no oversubscription),
 * 1% random loss on every link (about 4% per path). */
static const char loss_yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4, spines: 4,\n"
    "           link_delay: 3us}\n"
    "transport: {kind: mlt, loss_bound: 0.1, paths: 4,\n"
    "            load_balancing: source, rto_min: 1ms}\n"
    "workload:\n"
    "  flows:\n"
    "    - {src: h0, dst: h4, size: 1MB}\n"
    "    - {src: h1, dst: h5, size: 1MB}\n"
    "    - {src: h2, dst: h6, size: 1MB}\n"
    "    - {src: h3, dst: h7, size: 1MB}\n"
    "    - {src: h4, dst: h0, size: 1MB}\n"
    "    - {src: h5, dst: h1, size: 1MB}\n"
    "    - {src: h6, dst: h2, size: 1MB}\n"
    "    - {src: h7, dst: h3, size: 1MB}\n"
    "faults:\n"
    "  - {link: \"*\", loss: 0.01}\n";

static double p99_us(const dlcp_sim *sim) {
  dlcp_sim_fct_stats st;
  assert_int_equal(dlcp_sim_fct_stats_get(sim, -1, &st), 0);
  assert_int_equal(st.count, sim->nflows);
  return st.p99_us;
}

static void test_loss_no_timeout_tail(void **state) {
  (void)state;
  dlcp_sim *mlt = build_yaml(loss_yaml, NULL, 0);
  run_all(mlt);
  assert_int_equal(mlt->flows_done, mlt->nflows);
  uint64_t lost = 0;
  for (uint32_t p = 0; p < mlt->net.nports; p++) {
    lost += mlt->net.ports[p].drops_loss;
  }
  assert_true(lost > 0);
  for (uint32_t i = 0; i < mlt->nflows; i++) {
    const dlcp_sim_flow *f = &mlt->flows[i];
    assert_int_equal(f->status, 0);
    /* The loss bound covers the losses: one round, no retransmission. */
    assert_int_equal(f->retransmits, 0);
    assert_true((double)f->delivered_bytes >= 0.9 * (double)f->size_bytes);
    assert_true(f->delivered_bytes < f->size_bytes);
  }
  double mlt_p99 = p99_us(mlt);
  /* The connections' window timeouts are charged to the flows whose
   * packets they let go (one that let none go is charged to none). */
  dlcp_mlt_stats mc;
  uint64_t charged = 0;
  assert_true(dlcp_sim_mlt_sum(mlt, &mc));
  for (uint32_t i = 0; i < mlt->nflows; i++) {
    charged += mlt->flows[i].timeouts;
  }
  assert_true(mc.window_timeouts >= charged);
  assert_int_equal(mc.bitmaps_early + mc.bitmaps_unprompted, 0);

  const char *dctcp_set[] = {"transport.kind=dctcp"};
  dlcp_sim *tcp = build_yaml(loss_yaml, dctcp_set, 1);
  run_all(tcp);
  double tcp_p99 = p99_us(tcp);
  uint64_t timeouts = 0;
  for (uint32_t i = 0; i < tcp->nflows; i++) {
    timeouts += tcp->flows[i].timeouts;
  }
  print_message("1%% loss: p99 FCT mlt(p=0.1) %.1f us, dctcp %.1f us "
                "(%.1fx, %llu RTOs)\n",
                mlt_p99, tcp_p99, tcp_p99 / mlt_p99,
                (unsigned long long)timeouts);
  /* 1 MB at 100 Gbps is 84 us on the wire: MLT stays near that while
   * DCTCP's p99 is dominated by retransmission timeouts (RTO_min 1 ms). */
  assert_true(mlt_p99 < 250.0);
  assert_true(timeouts > 0);
  assert_true(tcp_p99 > 10.0 * mlt_p99);
  assert_false(dlcp_sim_mlt_sum(tcp, &mc)); /* not MLT */
  dlcp_sim_del(mlt);
  dlcp_sim_del(tcp);
}

/* p = 0 is fully reliable: under the same loss every byte arrives, the
 * missing packets are retransmitted after PROBE/BITMAP, never by timeout. */
static void test_reliable_p0(void **state) {
  (void)state;
  const char *sets[] = {"transport.loss_bound=0"};
  dlcp_sim *sim = build_yaml(loss_yaml, sets, 1);
  run_all(sim);
  assert_int_equal(sim->flows_done, sim->nflows);
  uint64_t retx = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    assert_int_equal(f->status, 0);
    assert_int_equal(f->delivered_bytes, f->size_bytes);
    assert_int_not_equal(f->rx_done_ps, DLCP_SIM_PS_NEVER);
    retx += f->retransmits;
  }
  assert_true(retx > 0);
  assert_true(p99_us(sim) < 500.0);
  dlcp_sim_del(sim);
}

/*
 * The core's path ids, round-robin over 4 paths, select the spine by
 * source routing: one flow over 4 spines puts a quarter of its bytes on
 * each ToR uplink (within 5%), packet by packet or 32 packets a path (the
 * runtime's path_burst); per-packet spraying does too.  ECMP hashes each
 * path's UDP socket, as a switch hashes the runtime's ports: every path
 * stays on one spine, so each spine carries a whole number of quarters
 * (within 5%) and, with one path, the flow keeps one spine.
 */
static void spine_shares(const char *lb, uint32_t path_burst, uint32_t paths,
                         uint64_t bytes[4], double *max_dev, int *used) {
  char set[64], burst[64], npaths[64];
  snprintf(set, sizeof(set), "transport.load_balancing=%s", lb);
  snprintf(burst, sizeof(burst), "transport.path_burst=%u", path_burst);
  snprintf(npaths, sizeof(npaths), "transport.paths=%u", paths);
  const char *sets[] = {set, "topology.spines=4", burst, npaths};
  dlcp_sim *sim = build_yaml(clean_yaml, sets, 4);
  run_all(sim);
  uint64_t total = 0;
  for (int s = 0; s < 4; s++) {
    char spine[16];
    snprintf(spine, sizeof(spine), "spine%d", s);
    bytes[s] = port_payload(sim, "tor0", spine);
    total += bytes[s];
  }
  assert_int_equal(total, sim->flows[0].size_bytes);
  *max_dev = 0;
  *used = 0;
  for (int s = 0; s < 4; s++) {
    double dev = (double)bytes[s] / ((double)total / 4) - 1;
    dev = dev < 0 ? -dev : dev;
    *max_dev = dev > *max_dev ? dev : *max_dev;
    *used += bytes[s] > 0;
  }
  dlcp_sim_del(sim);
}

static void test_paths_spread_over_spines(void **state) {
  (void)state;
  uint64_t bytes[4];
  double dev;
  int used;
  spine_shares("source", 1, 4, bytes, &dev, &used);
  print_message("source routing: max deviation %.2f%%\n", dev * 100);
  assert_int_equal(used, 4);
  assert_true(dev < 0.05);
  spine_shares("source", 32, 4, bytes, &dev, &used);
  print_message("source routing, 32 packets a path: max deviation %.2f%%\n",
                dev * 100);
  assert_int_equal(used, 4);
  assert_true(dev < 0.05);
  spine_shares("spray", 1, 4, bytes, &dev, &used);
  print_message("spraying: max deviation %.2f%%\n", dev * 100);
  assert_int_equal(used, 4);
  assert_true(dev < 0.05);
  spine_shares("ecmp", 1, 4, bytes, &dev, &used);
  uint64_t total = bytes[0] + bytes[1] + bytes[2] + bytes[3];
  for (int s = 0; s < 4; s++) {
    double quarters = (double)bytes[s] / ((double)total / 4);
    print_message("ECMP, 4 paths: spine%d %.3f quarters\n", s, quarters);
    double off = quarters - (double)llround(quarters);
    assert_true(off < 0.05 && off > -0.05);
  }
  /* This seed's hash puts the 4 sockets on 2 spines, two each (all on
   * one spine would be 4 seeds in 256). */
  assert_true(used > 1);
  spine_shares("ecmp", 1, 1, bytes, &dev, &used);
  assert_int_equal(used, 1);
}

/*
 * Source routing on a k = 4 fat tree with 2 paths per connection: a path
 * id's first digit picks the aggregation switch and its second the core
 * switch.  The core numbers paths 0 and 1, so without a per-pair offset
 * every pair's second digit was 0 and only core0 and core2 carried data
 * (on a k = 16 fat tree with 8 paths, one core switch in eight).  Each host
 * pair adds its own multiple of npaths, and 16 flows across pods reach
 * all four cores.
 */
static const char fat_tree_yaml[] =
    "topology: {kind: fat_tree, k: 4, link_delay: 1us}\n"
    "transport: {kind: mlt, loss_bound: 0, load_balancing: source, "
    "paths: 2}\n";

static void test_pairs_spread_over_fat_tree_cores(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(dlcp_sim_scenario_load(&cfg, fat_tree_yaml,
                                          strlen(fat_tree_yaml), "test.yaml",
                                          NULL, 0, err, sizeof(err)),
                   0);
  for (uint32_t h = 0; h < 16; h++) {
    char src[8], dst[8];
    snprintf(src, sizeof(src), "h%u", h);
    snprintf(dst, sizeof(dst), "h%u", (h + 8) % 16);
    assert_int_equal(dlcp_sim_config_add_flow(&cfg, src, dst, 200000, 0, 0), 0);
  }
  dlcp_sim *sim = NULL;
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  dlcp_sim_config_free(&cfg);
  run_all(sim);
  uint64_t into_core[4] = {0, 0, 0, 0}, total = 0;
  for (uint32_t c = 0; c < 4; c++) {
    for (uint32_t pod = 0; pod < 4; pod++) {
      char agg[16], core[16];
      snprintf(agg, sizeof(agg), "agg%u_%u", pod, c / 2);
      snprintf(core, sizeof(core), "core%u", c);
      into_core[c] += port_payload(sim, agg, core);
    }
    total += into_core[c];
    print_message("core%u: %llu payload bytes in\n", c,
                  (unsigned long long)into_core[c]);
  }
  /* Every flow crosses pods, so through exactly one core switch. */
  assert_int_equal(total, 16 * 200000);
  for (uint32_t c = 0; c < 4; c++) {
    assert_true(into_core[c] > 0);
  }
  dlcp_sim_del(sim);
}

/*
 * Incast of 8 senders into one receiver, with magnitude tagging (about
 * half the packets important, sent ECT) and a low ECN threshold: the
 * receiver's ToR port drops only non-ECT packets above the threshold
 * (selective drop) and marks the ECT ones.  Every flow still gets at least
 * (1 - p) of its bytes, and control packets on queue 0 are never dropped.
 */
static const char incast_yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 8, spines: 4,\n"
    "           link_delay: 3us}\n"
    "switch: {ecn_threshold: [10pkts, 20pkts, 20pkts, 20pkts, 20pkts,\n"
    "                         40pkts, 40pkts, 40pkts]}\n"
    "transport: {kind: mlt, loss_bound: 0.2, paths: 4,\n"
    "            load_balancing: source, importance: magnitude,\n"
    "            t_low: 30us, t_high: 60us}\n"
    "workload:\n"
    "  incast: {receiver: h0, senders: [h8, h9, h10, h11, h12, h13, h14,\n"
    "                                   h15], size: 500KB}\n";

static void test_selective_drop(void **state) {
  (void)state;
  dlcp_sim *sim = build_yaml(incast_yaml, NULL, 0);
  run_all(sim);
  assert_int_equal(sim->flows_done, sim->nflows);
  uint64_t selective = 0, buffer = 0, marks = 0, ctrl_q0 = 0;
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    const dlcp_sim_port *port = &sim->net.ports[p];
    ctrl_q0 += port->q[0].enq_pkts;
    assert_int_equal(port->q[0].drops_buffer + port->q[0].drops_selective, 0);
    for (uint32_t q = 0; q < DLCP_SIM_MAX_QUEUES; q++) {
      selective += port->q[q].drops_selective;
      buffer += port->q[q].drops_buffer;
      marks += port->q[q].marks;
    }
  }
  print_message("incast: %llu selective drops, %llu buffer drops, %llu "
                "marks, %llu control packets\n",
                (unsigned long long)selective, (unsigned long long)buffer,
                (unsigned long long)marks, (unsigned long long)ctrl_q0);
  assert_true(selective > 0);
  assert_true(marks > 0);
  /* START, PROBE, STOP at least, per flow. */
  assert_true(ctrl_q0 >= 3 * sim->nflows);
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    assert_int_equal(f->status, 0);
    assert_true((double)f->delivered_bytes >= 0.8 * (double)f->size_bytes);
  }
  dlcp_sim_del(sim);
}

static char *run_csv(uint64_t seed, size_t *len) {
  char set[64];
  snprintf(set, sizeof(set), "seed=%llu", (unsigned long long)seed);
  const char *sets[] = {set, "transport.load_balancing=spray"};
  dlcp_sim *sim = build_yaml(loss_yaml, sets, 2);
  run_all(sim);
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  assert_non_null(f);
  assert_int_equal(dlcp_sim_write_flows_csv(sim, f), 0);
  fclose(f);
  dlcp_sim_del(sim);
  return buf;
}

static void test_determinism(void **state) {
  (void)state;
  size_t la, lb, lc;
  char *a = run_csv(7, &la);
  char *b = run_csv(7, &lb);
  char *c = run_csv(8, &lc);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, la);
  assert_true(la != lc || memcmp(a, c, la) != 0);
  free(a);
  free(b);
  free(c);
}

/*
 * A 32-to-1 incast under one switch at 100 Gbps through the receiver's
 * 512 KB port (ECN at 65 packets): 32 senders of 1 MB each start at once,
 * p = 0.  The receiver's grants (2 BDPs of its link shared among the 32)
 * and the ECN-driven windows keep the port from overflowing: buffer drops
 * stay under 1 % of the data packets (the senders' first windows, before
 * any grant, are the only burst), every byte arrives, and the last flow
 * finishes within 1.2x the ideal (32 MB of wire bytes at line rate plus
 * two base RTTs).
 */
/*
 * With srpt a host's NIC serves its waiting connections shortest
 * remaining first: h0 starts three 1 MB flows and a 100 KB one to four
 * idle hosts at once, so its own link is the only bottleneck.  The 100 KB
 * flow ends within 2.25x of its time alone (53.9 against 26.6 us; served
 * in turn 74.8 us, 2.8x: the connections pacing below the NIC's turn
 * still share it), the 1 MB flows one after another (the first before
 * 0.6x of the last, where in turn they end together: 265, 265, 279 us),
 * and the last within 1.2x of the host's whole output at line rate plus
 * the base RTT (12 us): nothing is held back.
 */
static const char fanout_yaml[] =
    "topology: {kind: leaf_spine, tors: 1, hosts_per_tor: 5,\n"
    "           host_rate: 100Gbps, link_delay: 3us}\n"
    "transport: {kind: mlt, loss_bound: 0, srpt: true}\n"
    "workload:\n"
    "  flows: [{src: h0, dst: h1, size: 1MB}, {src: h0, dst: h2, size: 1MB},\n"
    "          {src: h0, dst: h3, size: 100KB},\n"
    "          {src: h0, dst: h4, size: 1MB}]\n";

static const char alone_yaml[] =
    "topology: {kind: leaf_spine, tors: 1, hosts_per_tor: 5,\n"
    "           host_rate: 100Gbps, link_delay: 3us}\n"
    "transport: {kind: mlt, loss_bound: 0, srpt: true}\n"
    "workload:\n"
    "  flows: [{src: h0, dst: h3, size: 100KB}]\n";

static double fct_us(const dlcp_sim_flow *f) {
  assert_int_equal(f->status, 0);
  assert_int_equal(f->delivered_bytes, f->size_bytes);
  return dlcp_sim_time_to_us(f->finish_ps - f->start_ps);
}

static void test_host_serves_shortest_first(void **state) {
  (void)state;
  dlcp_sim *alone = build_yaml(alone_yaml, NULL, 0);
  run_all(alone);
  double small_alone = fct_us(&alone->flows[0]);
  dlcp_sim_del(alone);

  dlcp_sim *sim = build_yaml(fanout_yaml, NULL, 0);
  run_all(sim);
  double small = fct_us(&sim->flows[2]);
  double big[3] = {fct_us(&sim->flows[0]), fct_us(&sim->flows[1]),
                   fct_us(&sim->flows[3])};
  double first = big[0], last = big[0];
  for (int i = 1; i < 3; i++) {
    first = big[i] < first ? big[i] : first;
    last = big[i] > last ? big[i] : last;
  }
  uint64_t seg = 1500 - 28 - 44;
  uint64_t bytes = 3 * 1000000ull + 100000;
  uint64_t npkts = 3 * ((1000000 + seg - 1) / seg) + (100000 + seg - 1) / seg;
  double ideal = dlcp_sim_time_to_us(dlcp_sim_serialization_ps(
                     bytes + npkts * (28 + 44), GBPS100)) +
                 12.0;
  print_message("fan-out: 100 KB %.1f us (alone %.1f), 1 MB first %.1f, "
                "last %.1f us, ideal %.1f us\n",
                small, small_alone, first, last, ideal);
  assert_true(small <= 2.25 * small_alone);
  assert_true(first <= 0.6 * last);
  assert_true(last <= 1.2 * ideal);
  dlcp_sim_del(sim);
}

static const char incast32_yaml[] =
    "topology: {kind: leaf_spine, tors: 1, hosts_per_tor: 33,\n"
    "           host_rate: 100Gbps, link_delay: 3us}\n"
    "switch: {port_buffer: 512KB, ecn_threshold: 65pkts}\n"
    "transport: {kind: mlt, loss_bound: 0}\n"
    "workload:\n"
    "  incast: {receiver: h0, senders: 32, size: 1MB, start: 0us}\n";

static void test_incast_32_to_1(void **state) {
  (void)state;
  dlcp_sim *sim = build_yaml(incast32_yaml, NULL, 0);
  run_all(sim);
  uint64_t pkts = 0;
  dlcp_sim_ps last = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    assert_int_equal(f->status, 0);
    assert_int_equal(f->delivered_bytes, f->size_bytes);
    pkts += f->pkts_sent;
    if (f->finish_ps > last) {
      last = f->finish_ps;
    }
  }
  assert_int_equal(sim->nflows, 32);
  uint32_t sw = dlcp_sim_net_find_node(&sim->net, "tor0");
  uint32_t h0 = dlcp_sim_net_find_node(&sim->net, "h0");
  const dlcp_sim_port *port =
      &sim->net.ports[dlcp_sim_net_find_port(&sim->net, sw, h0)];
  uint64_t drops = 0;
  for (uint32_t q = 0; q < DLCP_SIM_MAX_QUEUES; q++) {
    drops += port->q[q].drops_buffer;
  }
  uint64_t seg = 1500 - 28 - 44;
  uint64_t npkts = 32 * ((1000000 + seg - 1) / seg);
  uint64_t wire = 32 * 1000000ull + npkts * (28 + 44);
  dlcp_sim_ps ideal = dlcp_sim_serialization_ps(wire, GBPS100) +
                      2 * dlcp_sim_time_from_us(12);
  double ratio = (double)last / (double)ideal;
  print_message("incast 32-to-1: %llu drops of %llu packets (%.3f%%), "
                "last flow %.1f us, ideal %.1f us (%.3fx)\n",
                (unsigned long long)drops, (unsigned long long)pkts,
                100.0 * (double)drops / (double)pkts,
                dlcp_sim_time_to_us(last), dlcp_sim_time_to_us(ideal), ratio);
  assert_true(drops * 100 < pkts);
  assert_true(ratio <= 1.2);
  dlcp_sim_del(sim);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clean_fct),
      cmocka_unit_test(test_eager_flows),
      cmocka_unit_test(test_server_posts_ahead),
      cmocka_unit_test(test_incast_32_to_1),
      cmocka_unit_test(test_host_serves_shortest_first),
      cmocka_unit_test(test_loss_no_timeout_tail),
      cmocka_unit_test(test_reliable_p0),
      cmocka_unit_test(test_paths_spread_over_spines),
      cmocka_unit_test(test_pairs_spread_over_fat_tree_cores),
      cmocka_unit_test(test_selective_drop),
      cmocka_unit_test(test_determinism),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
