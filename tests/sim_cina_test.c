/*
 * sim_cina_test.c: CINA and HINA in the simulator: a src/proto/agg core at
 * every ToR of aggregation.chain, or every switch of aggregation.tree
 * (src/sim/agg_switch.c), and masters that ring-reduce their host's GPUs
 * in pipelined chunks (src/sim/coll_cina.c).
 *
 * Every GPU's input is small integers, so the block floating point is
 * exact and every master's output must equal the sum over all GPUs of all
 * hosts (verify_errors == 0).  Runs are deterministic.
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
#include "simtest.h"

/* 1 MB = 250000 floats in groups of 4 blocks of 64: 977 groups. */
#define GROUPS_1MB 977u

/* |tors| ToRs of 2 hosts, 2 spines, 100 Gbps and 1 us everywhere; the
 * chain is tor0 -> tor1 -> ... in order; one cina job over every host. */
static dlcp_sim *load_chain(uint32_t tors, const char *job_fields,
                            const char *extra) {
  char chain[256] = "";
  size_t off = 0;
  for (uint32_t i = 0; i < tors; i++) {
    off += (size_t)snprintf(chain + off, sizeof(chain) - off, "%stor%u",
                            i ? ", " : "", i);
  }
  char yaml[2048];
  snprintf(yaml, sizeof(yaml),
           "topology: {kind: leaf_spine, tors: %u, spines: 2, "
           "hosts_per_tor: 2,\n"
           "           link_rate: 100Gbps, link_delay: 1us}\n"
           "aggregation: {chain: [%s], memory: 1MiB}\n"
           "workload:\n"
           "  collective: {algo: cina, bytes: 1MB, %s}\n%s",
           tors, chain, job_fields, extra);
  return simtest_load(yaml, NULL, 0);
}

static dlcp_sim_coll_report run_exact(dlcp_sim *sim) {
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_true(dlcp_sim_finished(sim));
  dlcp_sim_coll_report r;
  dlcp_sim_coll_get_report(sim, 0, &r);
  if (r.status != 0) {
    print_message("failed: %s (rank %d)\n", dlcp_strerror(r.status),
                  r.failed_rank);
  }
  assert_int_equal(r.status, 0);
  assert_true(r.done);
  assert_int_equal(r.verify_errors, 0);
  for (uint32_t i = 0; i < r.iterations; i++) {
    assert_int_equal(r.iter[i].ranks_done, r.ranks);
  }
  return r;
}

/*
 * Chains of 1 to 4 ToRs, 1 and 4 GPUs per host, 2 iterations: exact, and
 * every packet accounted for.  Per group, switch i sums its 2 masters and
 * (i > 0) the partial sum of switch i-1, so the switches take 2L + (L-1)
 * contributions and claim L aggregator groups, L-1 partial sums travel up
 * the chain, the cores write a result per worker (2 masters, and a child
 * switch but at the leaf: the final going down) and every final is
 * acknowledged up once.  On the lossless hops nothing is sent twice.
 */
static void test_cina_exact(void **state) {
  (void)state;
  for (uint32_t tors = 1; tors <= 4; tors++) {
    for (uint32_t gpus = 1; gpus <= 4; gpus += 3) {
      char f[256];
      snprintf(f, sizeof(f),
               "iterations: 2, compute_time: 10us, window: 256, "
               "gpus_per_host: %u, chunks: 8",
               gpus);
      dlcp_sim *sim = load_chain(tors, f, "");
      dlcp_sim_coll_report r = run_exact(sim);
      uint64_t groups = 2ull * GROUPS_1MB;
      assert_string_equal(r.algo_name, "cina");
      assert_int_equal(r.ranks, 2 * tors);
      assert_int_equal(r.ina_groups, groups);
      assert_int_equal(r.ina_retransmits, 0);
      dlcp_agg_stats st;
      uint64_t qdrops;
      assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
      assert_int_equal(qdrops, 0);
      assert_int_equal(st.parent_nacks, 0);
      assert_int_equal(st.malformed, 0);
      assert_int_equal(st.abandoned, 0);
      assert_int_equal(st.nacks_sent, 0);
      assert_int_equal(st.forwards, (tors - 1) * groups);
      assert_int_equal(st.forward_resends, 0);
      assert_int_equal(st.finals, (tors - 1) * groups);
      assert_int_equal(st.acks_up, (tors - 1) * groups);
      assert_int_equal(st.contrib, (2 * tors + tors - 1) * groups);
      assert_int_equal(st.claims, tors * groups);
      assert_int_equal(st.results_sent, (3 * tors - 1) * groups);
      assert_int_equal(st.resent, 0);
      dlcp_sim_del(sim);
    }
  }
}

/*
 * The intra-host ring-reduce gates the master.  4 GPUs, 4 chunks of
 * 250 KB at 10 Gbit/s: one step is 200 us, and the last chunk is reduced
 * after n + k - 2 = 6 steps, 1200 us into the all-reduce.  Its 245 groups
 * then cross the host's 100 Gbit/s link (1084 bytes each on the wire:
 * 21.2 us) and the two-switch chain (4 links each way, 1 us each, and the
 * host links): the all-reduce ends between 1200 + 21.2 and 1200 + 40 us
 * after the ranks agreed on the groups' exponents, which comes first (977
 * int32, 3.9 KB, all-reduced through the network: a few one-way latencies
 * of 3-5 us across the racks).  With the same set-up on one GPU the master
 * has its vector at once.
 */
static void test_cina_intra_host_pipeline(void **state) {
  (void)state;
  dlcp_sim *sim = load_chain(2,
                             "window: 256, gpus_per_host: 4, chunks: 4, "
                             "intra_rate: 10Gbps",
                             "");
  dlcp_sim_coll_report r = run_exact(sim);
  dlcp_sim_ps t = r.iter[0].coll_ps - r.iter[0].agree_ps;
  print_message("all-reduce %.3f us, of which agreeing %.3f us\n",
                dlcp_sim_time_to_us(r.iter[0].coll_ps),
                dlcp_sim_time_to_us(r.iter[0].agree_ps));
  assert_true(t >= dlcp_sim_time_from_us(1221));
  assert_true(t <= dlcp_sim_time_from_us(1240));
  assert_true(r.iter[0].agree_ps >= dlcp_sim_time_from_us(6));
  assert_true(r.iter[0].agree_ps <= dlcp_sim_time_from_us(30));
  dlcp_sim_del(sim);

  sim = load_chain(2,
                   "window: 256, gpus_per_host: 1, chunks: 4, "
                   "intra_rate: 10Gbps",
                   "");
  r = run_exact(sim);
  /* 977 groups at 1084 bytes on the host link: 84.7 us, plus the chain. */
  t = r.iter[0].coll_ps - r.iter[0].agree_ps;
  assert_true(t >= dlcp_sim_time_from_us(84));
  assert_true(t <= dlcp_sim_time_from_us(110));
  dlcp_sim_del(sim);
}

/* 5 % loss on a master's cable (both directions): its contributions,
 * finals and ACKs are lost; its re-sends recover them, exactly (a re-sent
 * contribution to a complete group is answered with the final sum). */
static void test_cina_loss(void **state) {
  (void)state;
  dlcp_sim *sim = load_chain(3,
                             "iterations: 2, window: 256, rto: 50us, "
                             "gpus_per_host: 2, chunks: 4",
                             "faults:\n  - {link: [h2, tor1], loss: 0.05}\n");
  dlcp_sim_coll_report r = run_exact(sim);
  assert_true(r.ina_retransmits > 0);
  dlcp_agg_stats st;
  uint64_t qdrops;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  assert_true(st.duplicates > 0 || st.resent > 0);
  assert_int_equal(st.forwards - st.forward_resends, 2 * 2 * GROUPS_1MB);
  assert_int_equal(st.malformed, 0);
  assert_int_equal(st.abandoned, 0);
  dlcp_sim_del(sim);
}

static void test_cina_deterministic(void **state) {
  (void)state;
  dlcp_sim_ps t[2];
  for (int i = 0; i < 2; i++) {
    dlcp_sim *sim = load_chain(3, "window: 128, gpus_per_host: 4, chunks: 8",
                               "faults:\n  - {link: [h0, tor0], loss: 0.02}\n");
    t[i] = run_exact(sim).iter[0].coll_ps;
    dlcp_sim_del(sim);
  }
  assert_int_equal(t[0], t[1]);
}

/* A hina (|key| tree) or mtina (|key| trees) job over every host. */
static dlcp_sim *load_tree(const char *topology, const char *key,
                           const char *tree) {
  char yaml[2048];
  snprintf(yaml, sizeof(yaml),
           "topology: %s\n"
           "aggregation: {%s: %s, memory: 1MiB}\n"
           "workload:\n"
           "  collective: {algo: %s, bytes: 1MB, iterations: 2, "
           "window: 256, gpus_per_host: 4, chunks: 8}\n",
           topology, key, tree, strcmp(key, "tree") == 0 ? "hina" : "mtina");
  return simtest_load(yaml, NULL, 0);
}

/* Checks a HINA or MTINA run's counts: each group goes through one tree
 * of |switches| switches, each of which claims it once and all but the
 * root pass it up once. */
static void assert_tree_counts(dlcp_sim *sim, const char *algo,
                               uint32_t switches, uint32_t masters) {
  dlcp_sim_coll_report r = run_exact(sim);
  assert_string_equal(r.algo_name, algo);
  uint64_t groups = 2ull * GROUPS_1MB;
  assert_int_equal(r.ina_groups, groups);
  dlcp_agg_stats st;
  uint64_t qdrops;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  assert_int_equal(st.parent_nacks, 0);
  assert_int_equal(st.malformed, 0);
  assert_int_equal(st.abandoned, 0);
  assert_int_equal(st.forwards, (switches - 1) * groups);
  assert_int_equal(st.forward_resends, 0);
  assert_int_equal(st.finals, (switches - 1) * groups);
  assert_int_equal(st.acks_up, (switches - 1) * groups);
  assert_int_equal(st.claims, switches * groups);
  assert_int_equal(st.contrib, (masters + switches - 1) * groups);
}

/* HINA on a leaf-spine: the 4 ToRs sum their masters, spine0 (no masters)
 * sums the ToRs and multicasts the final back down. */
static void test_hina_leaf_spine(void **state) {
  (void)state;
  dlcp_sim *sim = load_tree(
      "{kind: leaf_spine, tors: 4, spines: 2, hosts_per_tor: 2, "
      "link_rate: 100Gbps, link_delay: 1us}",
      "tree",
      "[[tor0, spine0], [tor1, spine0], [tor2, spine0], [tor3, spine0]]");
  assert_tree_counts(sim, "hina", 5, 8);
  dlcp_sim_del(sim);
}

/* MTINA on a leaf-spine: one tree per spine, even groups through spine0
 * and odd ones through spine1; each group still meets 5 switches. */
static void test_mtina_leaf_spine(void **state) {
  (void)state;
  dlcp_sim *sim = load_tree(
      "{kind: leaf_spine, tors: 4, spines: 2, hosts_per_tor: 2, "
      "link_rate: 100Gbps, link_delay: 1us}",
      "trees",
      "[[[tor0, spine0], [tor1, spine0], [tor2, spine0], [tor3, spine0]],"
      " [[tor0, spine1], [tor1, spine1], [tor2, spine1], [tor3, spine1]]]");
  assert_tree_counts(sim, "mtina", 5, 8);
  dlcp_sim_del(sim);
}

/* HINA on a three-tier fat-tree (k = 4, 16 hosts): edge, aggregation and
 * core switches all aggregate, as the seed's HINA. */
static void test_hina_fat_tree(void **state) {
  (void)state;
  dlcp_sim *sim = load_tree(
      "{kind: fat_tree, k: 4, link_rate: 100Gbps, link_delay: 1us}", "tree",
      "[[edge0_0, agg0_0], [edge0_1, agg0_0], [edge1_0, agg1_0], "
      "[edge1_1, agg1_0], [edge2_0, agg2_0], [edge2_1, agg2_0], "
      "[edge3_0, agg3_0], [edge3_1, agg3_0], [agg0_0, core0], "
      "[agg1_0, core0], [agg2_0, core0], [agg3_0, core0]]");
  assert_tree_counts(sim, "hina", 13, 16);
  dlcp_sim_del(sim);
}

#define MT_TREES                                                             \
  "[[[tor0, spine0], [tor1, spine0], [tor2, spine0], [tor3, spine0]],"       \
  " [[tor0, spine1], [tor1, spine1], [tor2, spine1], [tor3, spine1]]]"

/* Two MTINA jobs sharing the trees (|memory| per switch): job 0 on the
 * first two hosts of each ToR, job 1 on |hosts1|. */
static void two_jobs_yaml(char *yaml, size_t len, const char *memory,
                          const char *hosts1) {
  snprintf(yaml, len,
           "topology: {kind: leaf_spine, tors: 4, spines: 2, "
           "hosts_per_tor: 4, link_rate: 100Gbps, link_delay: 1us}\n"
           "aggregation: {trees: %s, memory: %s}\n"
           "workload:\n"
           "  collective:\n"
           "    - {algo: mtina, bytes: 1MB, iterations: 2, window: 256,\n"
           "       hosts: [h0, h1, h4, h5, h8, h9, h12, h13]}\n"
           "    - {algo: mtina, bytes: 1MB, iterations: 2, window: 256,\n"
           "       hosts: %s}\n",
           MT_TREES, memory, hosts1);
}

/* Several jobs share the trees and the switches' pools (PANAMA's shared
 * cluster): both exact, every group of each through one tree. */
static void test_mtina_two_jobs(void **state) {
  char yaml[2048];
  (void)state;
  two_jobs_yaml(yaml, sizeof(yaml), "1MiB",
                "[h2, h3, h6, h7, h10, h11, h14, h15]");
  dlcp_sim *sim = simtest_load(yaml, NULL, 0);
  simtest_run_jobs_exact(sim, 2);
  for (uint32_t j = 0; j < 2; j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    assert_string_equal(r.algo_name, "mtina");
    assert_int_equal(r.ina_groups, 2ull * GROUPS_1MB);
  }
  dlcp_agg_stats st;
  uint64_t qdrops;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  uint64_t groups = 2u * 2ull * GROUPS_1MB; /* 2 jobs, 2 iterations */
  assert_int_equal(st.claims, 5u * groups);
  assert_int_equal(st.forwards, 4u * groups);
  assert_int_equal(st.contrib, (8u + 4u) * groups);
  assert_int_equal(st.parent_nacks, 0);
  assert_int_equal(st.abandoned, 0);
  dlcp_sim_del(sim);
}

/* Two CINA jobs over one chain without host lists: each takes the racks'
 * free hosts round-robin (two under every ToR, the second job the other
 * two), and both finish exactly, every group through the chain. */
static void test_cina_two_jobs_placed(void **state) {
  (void)state;
  static const char yaml[] =
      "topology: {kind: leaf_spine, tors: 4, spines: 2, hosts_per_tor: 4,\n"
      "           link_rate: 100Gbps, link_delay: 1us}\n"
      "aggregation: {chain: [tor0, tor1, tor2, tor3], memory: 1MiB}\n"
      "workload:\n"
      "  collective:\n"
      "    - {algo: cina, bytes: 1MB, iterations: 2, window: 256, ranks: 8}\n"
      "    - {algo: cina, bytes: 1MB, iterations: 2, window: 256, ranks: 8}\n";
  dlcp_sim *sim = simtest_load(yaml, NULL, 0);
  simtest_run_jobs_exact(sim, 2);
  for (uint32_t j = 0; j < 2; j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    assert_int_equal(r.ina_groups, 2ull * GROUPS_1MB);
    assert_int_equal(r.ring_groups, 0);
    for (uint32_t k = 0; k < 8; k++) {
      /* Rack k / 2, its hosts 0-1 (job 0) or 2-3 (job 1). */
      assert_int_equal(dlcp_sim_coll_rank_host(sim, j, k),
                       4 * (k / 2) + 2 * j + k % 2);
    }
  }
  dlcp_sim_del(sim);
}

/* The second job's masters per switch differ from the first's (the
 * switches' places in the trees are set once), or the pools cannot hold
 * both jobs' windows. */
static void test_mtina_two_jobs_errors(void **state) {
  char yaml[2048];
  (void)state;
  two_jobs_yaml(yaml, sizeof(yaml), "1MiB", "[h2, h3, h6, h7, h10, h11, h14]");
  simtest_expect_error(
      yaml,
      "test.yaml:7: field 'workload.collective[1].hosts': expected hosts "
      "below the aggregating switches: one or more below each switch of a "
      "chain and each leaf of a tree, a switch with hosts in every tree, at "
      "most 64 workers per switch, and as many below each switch as the "
      "first such job");
  two_jobs_yaml(yaml, sizeof(yaml), "768KiB",
                "[h2, h3, h6, h7, h10, h11, h14, h15]");
  simtest_expect_error(
      yaml,
      "test.yaml:2: field 'aggregation.memory': expected room for two "
      "windows of groups of every job at each aggregating switch (this "
      "job: 2048 blocks of 64 int32 for window 256)");
}

static void test_cina_errors(void **state) {
  (void)state;
  /* The default topology: 2 ToRs of 2 hosts each. */
  simtest_expect_error(
      "aggregation: {chain: [tor0, spine7]}\n",
      "test.yaml:1: field 'aggregation.chain[1]': expected the name of a "
      "switch of the topology, got 'spine7'");
  simtest_expect_error(
      "aggregation: {switch: tor0, chain: [tor0, tor1]}\n",
      "test.yaml:1: field 'aggregation.chain': expected one of 'switch', "
      "'chain', 'tree' and 'trees'");
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor0]}\n",
      "test.yaml:1: field 'aggregation.chain': expected each switch once, "
      "got 'tor0' twice");
  simtest_expect_error(
      "aggregation: {chain: tor0}\n",
      "test.yaml:1: field 'aggregation.chain': expected a list of 1..64 "
      "switch names (ToR0 first)");
  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB}\n",
      "test.yaml:3: field 'workload.collective.algo': expected an "
      "aggregation section with a chain");
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor1]}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, ranks: 2}\n",
      "test.yaml:3: field 'workload.collective.algo': expected an "
      "aggregation section naming one switch (a chain is for cina, a tree for "
      "hina, trees for mtina)");
  simtest_expect_error(
      "workload:\n  collective: {algo: ring, bytes: 1MB, chunks: 4}\n",
      "test.yaml:2: field 'workload.collective.chunks': expected algo cina, "
      "hina or mtina for this field");
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor1]}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB, gpus_per_host: 0}\n",
      "test.yaml:3: field 'workload.collective.gpus_per_host': expected an "
      "integer in [1, 64], got '0'");
  /* tor1 has no master: the chain would wait for it forever. */
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor1]}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB, hosts: [h0, h1]}\n",
      "test.yaml:3: field 'workload.collective.hosts': expected hosts below "
      "the aggregating switches: one or more below each switch of a chain "
      "and each leaf of a tree, a switch with hosts in every tree, at most "
      "64 workers per switch, and as many below each switch as the first "
      "such job");
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor1], memory: 64KiB}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB}\n",
      "test.yaml:1: field 'aggregation.memory': expected room for two "
      "windows of groups of every job at each aggregating switch (this "
      "job: 512 blocks of 64 int32 for window 64)");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, spine0], [tor1, tor0], [spine0, tor1]]}\n",
      "test.yaml:1: field 'aggregation.tree': expected a tree, got a cycle "
      "through 'tor0'");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, spine0], [tor1, spine1]]}\n",
      "test.yaml:1: field 'aggregation.tree': expected one root (a switch "
      "without parent), got 2");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, spine0], [tor0, spine1]]}\n",
      "test.yaml:1: field 'aggregation.tree': expected one parent per "
      "switch, another switch than itself ('tor0')");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, h1]]}\n",
      "test.yaml:1: field 'aggregation.tree': expected names of switches of "
      "the topology, got 'h1'");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, tor1]]}\n",
      "test.yaml:1: field 'aggregation.tree': expected linked switches, got "
      "'tor0' and its parent 'tor1'");
  simtest_expect_error(
      "aggregation: {tree: [[tor0, spine0], [tor1, spine0]]}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB}\n",
      "test.yaml:3: field 'workload.collective.algo': expected an "
      "aggregation section with a chain");
  simtest_expect_error(
      "aggregation: {chain: [tor0, tor1]}\n"
      "workload:\n  collective: {algo: hina, bytes: 1MB}\n",
      "test.yaml:3: field 'workload.collective.algo': expected an "
      "aggregation section with a tree");
  simtest_expect_error(
      "aggregation: {trees: [[[tor0, spine0]]]}\n",
      "test.yaml:1: field 'aggregation.trees': expected a list of 2..8 "
      "trees, each a list of [child, parent] pairs");
  simtest_expect_error(
      "aggregation: {trees: [[[tor0, spine0], [tor1, spine0]], "
      "[[tor0, spine1], [spine1, tor0]]]}\n",
      "test.yaml:1: field 'aggregation.trees[1]': expected a tree, got a "
      "cycle through 'tor0'");
  /* tor1 is in the first tree only: its masters' odd groups would have
   * nowhere to go. */
  simtest_expect_error(
      "aggregation: {trees: [[[tor0, spine0], [tor1, spine0]], "
      "[[tor0, spine1]]]}\n"
      "workload:\n  collective: {algo: mtina, bytes: 1MB}\n",
      "test.yaml:3: field 'workload.collective.hosts': expected hosts below "
      "the aggregating switches: one or more below each switch of a chain "
      "and each leaf of a tree, a switch with hosts in every tree, at most "
      "64 workers per switch, and as many below each switch as the first "
      "such job");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cina_exact),
      cmocka_unit_test(test_cina_intra_host_pipeline),
      cmocka_unit_test(test_cina_loss),
      cmocka_unit_test(test_cina_deterministic),
      cmocka_unit_test(test_hina_leaf_spine),
      cmocka_unit_test(test_hina_fat_tree),
      cmocka_unit_test(test_mtina_leaf_spine),
      cmocka_unit_test(test_mtina_two_jobs),
      cmocka_unit_test(test_mtina_two_jobs_errors),
      cmocka_unit_test(test_cina_two_jobs_placed),
      cmocka_unit_test(test_cina_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
