/*
 * sim_ina_test.c: in-network aggregation in the simulator: the
 * src/proto/agg core at a ToR (src/sim/agg_switch.c) and src/coll/ina on
 * the hosts (src/sim/ina_host.c), for ina and ra_ina collective jobs.
 *
 * Every rank's input is small integers (collective.c), so the block
 * floating point of src/coll/ina is exact for them: the documented bound
 * (dlcp_ina_error_bound) is not needed, and every output element must
 * equal the exact sum (verify_errors == 0).  Runs are deterministic.
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

/* One ToR with 12 hosts (and one idle spine), 100 Gbps, 1 us links; the
 * ToR aggregates. */
static const char star[] =
    "topology: {kind: leaf_spine, tors: 1, spines: 1, hosts_per_tor: 12,\n"
    "           link_rate: 100Gbps, link_delay: 1us}\n"
    "aggregation: {switch: tor0, memory: 1MiB}\n";

static dlcp_sim *load(const char *workload, const char *const *sets,
                      size_t nsets) {
  char yaml[4096];
  snprintf(yaml, sizeof(yaml), "%s%s", star, workload);
  return simtest_load(yaml, sets, nsets);
}

static dlcp_sim_coll_report report(const dlcp_sim *sim, uint32_t job) {
  dlcp_sim_coll_report r;
  dlcp_sim_coll_get_report(sim, job, &r);
  return r;
}

/*
 * Every group the switch reduced was freed after its last ACK, except the
 * ones whose ACKs were still on their way (or lost, awaiting the 1 ms
 * re-send) when the last rank's all-reduce ended, which ends the run: they
 * hold 4 aggregators each.  None was abandoned.
 */
static void assert_all_groups_accounted(const dlcp_agg_stats *st,
                                        uint64_t groups) {
  assert_int_equal(st->abandoned, 0);
  assert_int_equal(st->aggs_used % 4, 0);
  assert_int_equal(st->freed + st->aggs_used / 4, groups);
}

/* 1 MB = 250000 floats; groups of 4 blocks of 64 (plain INA's default,
 * and RA-INA's n = 4) make ceil(250000 / 256) = 977 groups. */
#define GROUPS_1MB 977u

static void test_ina_exact(void **state) {
  (void)state;
  static const char *const algos[] = {"ina", "ra_ina"};
  for (int a = 0; a < 2; a++) {
    char w[256];
    snprintf(w, sizeof(w),
             "workload:\n  collective: {algo: %s, bytes: 1MB, ranks: 4, "
             "iterations: 2, compute_time: 10us}\n",
             algos[a]);
    dlcp_sim *sim = load(w, NULL, 0);
    simtest_run_jobs_exact(sim, 1);
    dlcp_sim_coll_report r = report(sim, 0);
    /* The pool (4096 aggregators) holds a whole window (64 groups of 4
     * blocks): every group goes through the switch, none is re-sent. */
    assert_int_equal(r.ina_groups, 2 * GROUPS_1MB);
    assert_int_equal(r.ring_groups, 0);
    assert_int_equal(r.ina_retransmits, 0);
    dlcp_agg_stats st;
    uint64_t qdrops;
    assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
    assert_int_equal(qdrops, 0);
    assert_int_equal(st.contrib, 4 * 2 * GROUPS_1MB);
    assert_int_equal(st.results_sent, 4 * 2 * GROUPS_1MB);
    assert_all_groups_accounted(&st, r.ina_groups);
    /* Before the switch, the ranks agree on the groups' exponents as the
     * runtime does: an all-reduce of one int32 per group through the
     * network, the same plan in both iterations; no other transfer. */
    uint64_t agree_bytes[2] = {0, 0};
    for (uint32_t i = 0; i < sim->nflows; i++) {
      const dlcp_sim_flow *f = &sim->flows[i];
      assert_int_equal(f->group, DLCP_SIM_GROUP_COLL);
      assert_true(f->size_bytes <= 4 * GROUPS_1MB);
      assert_true(f->iteration < 2);
      agree_bytes[f->iteration] += f->size_bytes;
    }
    assert_true(agree_bytes[0] >= 4 * GROUPS_1MB);
    assert_int_equal(agree_bytes[0], agree_bytes[1]);
    dlcp_sim_ps agreed_coll[2];
    for (uint32_t i = 0; i < 2; i++) {
      assert_true(r.iter[i].agree_ps > 0);
      assert_true(r.iter[i].agree_ps < r.iter[i].coll_ps);
      agreed_coll[i] = r.iter[i].coll_ps;
    }
    dlcp_sim_del(sim);

    /* Exponents given: straight to the switch, nothing else on the wire,
     * every iteration shorter by about the agreement. */
    const char *given[] = {"workload.collective.exponents=given"};
    sim = load(w, given, 1);
    simtest_run_jobs_exact(sim, 1);
    dlcp_sim_coll_report g = report(sim, 0);
    assert_int_equal(sim->nflows, 0);
    assert_int_equal(g.ina_groups, 2 * GROUPS_1MB);
    for (uint32_t i = 0; i < 2; i++) {
      assert_int_equal(g.iter[i].agree_ps, 0);
      assert_true(g.iter[i].coll_ps < agreed_coll[i]);
    }
    dlcp_sim_del(sim);
  }
}

/* 5% loss on one rank's cable (both directions): contributions, results
 * and ACKs are lost; re-sends recover every one, exactly. */
static void test_ina_loss(void **state) {
  (void)state;
  static const char *const algos[] = {"ina", "ra_ina"};
  for (int a = 0; a < 2; a++) {
    char w[512];
    snprintf(w, sizeof(w),
             "workload:\n  collective: {algo: %s, bytes: 1MB, ranks: 4, "
             "iterations: 2, rto: 50us}\n"
             "faults:\n  - {link: [h1, tor0], loss: 0.05}\n",
             algos[a]);
    dlcp_sim *sim = load(w, NULL, 0);
    simtest_run_jobs_exact(sim, 1);
    dlcp_sim_coll_report r = report(sim, 0);
    assert_int_equal(r.ina_groups + r.ring_groups, 2 * GROUPS_1MB);
    assert_true(r.ina_retransmits > 0);
    dlcp_agg_stats st;
    uint64_t qdrops;
    assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
    assert_int_equal(qdrops, 0);
    assert_true(st.duplicates > 0 || st.resent > 0);
    assert_all_groups_accounted(&st, r.ina_groups);
    dlcp_sim_del(sim);
  }
}

/*
 * Jobs sharing a pool smaller than one job's demand: 32 aggregators (8
 * KiB), where one job's window alone wants 64 groups x 4 blocks.  RA-INA:
 * everything finishes exactly and every job gets ring groups as well as
 * switch groups; plain INA waits for aggregators and finishes exactly;
 * static partitions (one per job) too.
 */
static void test_jobs_share_small_pool(void **state) {
  (void)state;
  static const char *const algos[] = {"ra_ina", "ina"};
  for (uint32_t njobs = 2; njobs <= 3; njobs++) {
    for (int a = 0; a < 2; a++) {
      for (int p = 0; p < 2; p++) {
        char w[1024];
        int off = snprintf(w, sizeof(w), "workload:\n  collective:\n");
        for (uint32_t j = 0; j < njobs; j++) {
          off += snprintf(w + off, sizeof(w) - (size_t)off,
                          "    - {algo: %s, bytes: 256KB, iterations: 2, "
                          "rto: 50us, hosts: [h%u, h%u, h%u, h%u]}\n",
                          algos[a], 4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3);
        }
        char parts[64];
        snprintf(parts, sizeof(parts), "aggregation.static_parts=%u", njobs);
        const char *sets[] = {"aggregation.memory=8KiB",
                              p ? "aggregation.policy=static"
                                : "aggregation.policy=shared",
                              parts};
        dlcp_sim *sim = load(w, sets, p ? 3 : 2);
        simtest_run_jobs_exact(sim, njobs);
        dlcp_agg_stats st;
        uint64_t qdrops;
        assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
        assert_int_equal(qdrops, 0);
        assert_int_equal(st.aggs_total, 32);
        uint64_t switch_groups = 0;
        for (uint32_t j = 0; j < njobs; j++) {
          dlcp_sim_coll_report r = report(sim, j);
          switch_groups += r.ina_groups;
          /* 256 KB = 64000 floats: 250 groups of 256 per iteration. */
          assert_int_equal(r.ina_groups + r.ring_groups, 2 * 250);
          assert_true(r.ina_groups > 0);
          if (a == 0) {
            assert_true(r.ring_groups > 0);
          } else {
            assert_int_equal(r.ring_groups, 0);
          }
        }
        assert_all_groups_accounted(&st, switch_groups);
        dlcp_sim_del(sim);
      }
    }
  }
}

/* The processing cost: each group costs the switch 4 contributions and 4
 * ACKs, one at a time.  At 1 us each the contributions alone take 4 x 977
 * us, and all packets (the last groups' ACKs come after the end) at most
 * 8 x 977 us plus the network; without the cost it takes a fraction. */
/*
 * Three plain-INA jobs on a shared 8 KiB pool with 0.5 % loss on every
 * link: every job finishes exactly.  A BUSY sends a rank's groups back,
 * and the result of one whose earlier copy the switch had counted then
 * finds it unsent: the operation refuses it.  The driver took such a
 * result for one of an earlier operation and acknowledged it with the mark
 * after it, so the switch forgot groups the operation still needed, which
 * came back GONE and failed the job (DLCP_ERR_PEER_ABORTED).
 */
static void test_jobs_share_pool_under_loss(void **state) {
  (void)state;
  char w[1024];
  int off = snprintf(w, sizeof(w), "workload:\n  collective:\n");
  for (uint32_t j = 0; j < 3; j++) {
    off += snprintf(w + off, sizeof(w) - (size_t)off,
                    "    - {algo: ina, bytes: 1MB, iterations: 2, "
                    "rto: 50us, hosts: [h%u, h%u, h%u, h%u]}\n",
                    4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3);
  }
  const char *sets[] = {"aggregation.memory=8KiB", "aggregation.policy=shared",
                        "faults=[{link: \"*\", loss: 0.005}]"};
  dlcp_sim *sim = load(w, sets, 3);
  simtest_run_jobs_exact(sim, 3);
  for (uint32_t j = 0; j < 3; j++) {
    dlcp_sim_coll_report r = report(sim, j);
    assert_int_equal(r.ina_groups, 2 * GROUPS_1MB);
  }
  dlcp_sim_del(sim);
}

static void test_per_packet_cost(void **state) {
  (void)state;
  static const char w[] = "workload:\n  collective: {algo: ina, bytes: 1MB, "
                          "ranks: 4}\n";
  const char *slow[] = {"aggregation.per_packet=1us"};
  dlcp_sim *sim = load(w, slow, 1);
  simtest_run_jobs_exact(sim, 1);
  dlcp_sim_ps t_slow = report(sim, 0).iter[0].coll_ps;
  dlcp_sim_del(sim);
  sim = load(w, NULL, 0);
  simtest_run_jobs_exact(sim, 1);
  dlcp_sim_ps t_fast = report(sim, 0).iter[0].coll_ps;
  dlcp_sim_del(sim);
  print_message("1 MB, 4 ranks: %.1f us at 1 us per packet, %.1f us at 0\n",
                (double)t_slow / 1e6, (double)t_fast / 1e6);
  assert_true(t_slow >= 4ull * GROUPS_1MB * DLCP_SIM_PS_PER_US);
  assert_true(t_slow <= (8ull * GROUPS_1MB + 100) * DLCP_SIM_PS_PER_US);
  assert_true(t_fast * 10 < t_slow);
}

/* A processor slower than the hosts' windows with a queue of 16 packets:
 * packets that find it full are dropped and counted, and the re-sends
 * still end exactly. */
static void test_switch_queue_full(void **state) {
  (void)state;
  static const char w[] = "workload:\n  collective: {algo: ra_ina, bytes: "
                          "256KB, ranks: 4, rto: 500us}\n";
  const char *sets[] = {"aggregation.per_packet=1us", "aggregation.queue=16"};
  dlcp_sim *sim = load(w, sets, 2);
  simtest_run_jobs_exact(sim, 1);
  dlcp_agg_stats st;
  uint64_t qdrops;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  print_message("queue of 16: %llu dropped, %llu re-sent\n",
                (unsigned long long)qdrops,
                (unsigned long long)report(sim, 0).ina_retransmits);
  assert_true(qdrops > 0);
  assert_true(report(sim, 0).ina_retransmits > 0);
  dlcp_sim_del(sim);
}

/* The same processor and queue with PFC on the aggregation traffic's
 * priority (PANAMA's lossless fabric): nothing is dropped, the hosts'
 * links are PAUSEd instead, no contribution is re-sent for a loss, and
 * the result is exact.  (The run ends with the last rank's result, when
 * stray ACKs may still wait for the processor, so the hold is not
 * checked empty here.) */
static void test_switch_queue_pfc(void **state) {
  (void)state;
  static const char w[] =
      "switch: {pfc: {priorities: [0], xoff: 30KB, xon: 20KB,"
      " headroom: 40KB}}\n"
      "workload:\n  collective: {algo: ra_ina, bytes: 256KB, ranks: 4,"
      " rto: 5ms}\n";
  const char *sets[] = {"aggregation.per_packet=1us", "aggregation.queue=16"};
  dlcp_sim *sim = load(w, sets, 2);
  simtest_run_jobs_exact(sim, 1);
  dlcp_agg_stats st;
  uint64_t qdrops, pauses = 0, headroom = 0;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  assert_non_null(sim->net.pfc_in);
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    pauses += sim->net.pfc_in[p].pauses;
    headroom += sim->net.pfc_in[p].headroom_drops;
  }
  print_message("queue of 16 with PFC: %llu dropped, %llu PAUSE frames, "
                "%llu re-sent\n", (unsigned long long)qdrops,
                (unsigned long long)pauses,
                (unsigned long long)report(sim, 0).ina_retransmits);
  assert_int_equal(qdrops, 0);
  assert_int_equal(headroom, 0);
  assert_true(pauses > 0);
  assert_int_equal(report(sim, 0).ina_retransmits, 0);
  dlcp_sim_del(sim);
}

static void test_deterministic(void **state) {
  (void)state;
  static const char w[] =
      "workload:\n  collective: {algo: ra_ina, bytes: 512KB, ranks: 4,"
      " rto: 50us}\n"
      "faults:\n  - {link: [h2, tor0], loss: 0.02}\n";
  const char *sets[] = {"aggregation.memory=4KiB"};
  dlcp_sim_ps end[2];
  for (int i = 0; i < 2; i++) {
    dlcp_sim *sim = load(w, sets, 1);
    simtest_run_jobs_exact(sim, 1);
    end[i] = report(sim, 0).iter[0].end_ps;
    dlcp_sim_del(sim);
  }
  assert_int_equal(end[0], end[1]);
}

/* The default topology (2 ToRs of 2 hosts, spines between them) with the
 * switch at tor0 and ranks in both racks, as the runtime's ranks reach a
 * dlcp-switch in another rack: h2 and h3's datagrams cross the fabric to
 * tor0 and its answers come back the same way; exact, every contribution
 * summed at tor0, with and without 2 % loss on a fabric link. */
static void test_switch_in_another_rack(void **state) {
  (void)state;
  static const char *const algos[] = {"ina", "ra_ina"};
  for (int a = 0; a < 4; a++) {
    char yaml[512];
    snprintf(yaml, sizeof(yaml),
             "aggregation: {switch: tor0, memory: 1MiB}\n"
             "workload:\n  collective: {algo: %s, bytes: 1MB, iterations: "
             "2, rto: 50us, hosts: [h0, h2, h1, h3]}\n%s",
             algos[a % 2],
             a >= 2 ? "faults:\n  - {link: [tor1, spine0], loss: 0.02}\n"
                    : "");
    dlcp_sim *sim = simtest_load(yaml, NULL, 0);
    simtest_run_jobs_exact(sim, 1);
    dlcp_sim_coll_report r = report(sim, 0);
    assert_int_equal(r.ina_groups + r.ring_groups, 2 * GROUPS_1MB);
    assert_true(r.ina_groups > 0);
    assert_int_equal(r.ina_retransmits > 0, a >= 2);
    dlcp_agg_stats st;
    uint64_t qdrops;
    assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
    assert_int_equal(st.malformed + st.foreign, 0);
    if (a < 2) {
      assert_int_equal(st.contrib, 4 * r.ina_groups);
    }
    assert_all_groups_accounted(&st, r.ina_groups);
    dlcp_sim_del(sim);
  }
}

static void test_scenario_errors(void **state) {
  (void)state;
  simtest_expect_error(
      "workload:\n  collective: {algo: ring, bytes: 1MB, exponents: given}\n",
      "test.yaml:2: field 'workload.collective.exponents': expected algo ina "
      "or ra_ina for this field");
  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, exponents: known}\n",
      "test.yaml:3: field 'workload.collective.exponents': expected one of "
      "agreed, given, got 'known'");
  simtest_expect_error(
      "workload:\n  collective: {algo: ina, bytes: 1MB}\n",
      "test.yaml:2: field 'workload.collective.algo': expected an "
      "aggregation section naming the switch");
  simtest_expect_error(
      "aggregation: {switch: h0}\n",
      "test.yaml:1: field 'aggregation.switch': expected the name "
      "of a switch of the topology, got 'h0'");
  simtest_expect_error(
      "aggregation: {memory: 1MiB}\n",
      "test.yaml:1: field 'aggregation.switch': expected this field "
      "to be present");
  /* The default topology: 2 ToRs of 2 hosts under spines; a spine has
   * no host to route towards. */
  simtest_expect_error(
      "aggregation: {switch: spine0}\n"
      "workload:\n  collective: {algo: ra_ina, bytes: 1MB,\n"
      "               hosts: [h0, h2]}\n",
      "test.yaml:3: field 'workload.collective.hosts[0]': expected "
      "a host attached to the aggregation switch spine0 (to a switch of "
      "its chain or trees; ranks elsewhere reach a single switch only if "
      "a host is attached to it)");
  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, ranks: 3}\n",
      "test.yaml:3: field 'workload.collective.ranks': expected at "
      "most as many ranks as hosts attached to the aggregation "
      "switch");
  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, ranks: 2,\n"
      "               loss_bound: 0.1}\n",
      "test.yaml:3: field 'workload.collective.loss_bound': "
      "expected 0 (INA is exact)");
  simtest_expect_error(
      "workload:\n  collective: {algo: ring, bytes: 1MB, rto: 1ms}\n",
      "test.yaml:2: field 'workload.collective.rto': expected algo "
      "ina or ra_ina for this field");
  simtest_expect_error(
      "aggregation: {switch: tor0, policy: shared, static_parts: 2}\n",
      "test.yaml:1: field 'aggregation.static_parts': expected "
      "policy: static for this field");
  simtest_expect_error(
      "workload:\n  collective: {bytes: 1MB, ranks: 2, hosts: [h0]}\n",
      "test.yaml:2: field 'workload.collective.hosts': expected a "
      "list of 1..4096 host names (the ranks in order), without "
      "'ranks'");
}

/* RA-INA with header-only claims on a pool too small for every group:
 * exact, and the switch sums the contributions of the groups it
 * aggregated only (a ring group is never uploaded).  Plain INA with
 * PANAMA's window: exact. */
/* RA-INA's claims; PANAMA's window; its size for aggregation. */
static void test_claims_and_cc(void **state) {
  (void)state;
  const char *sets[] = {"aggregation.memory=8KiB"};
  dlcp_sim *sim = load("workload:\n  collective: {algo: ra_ina, bytes: 256KB, "
                       "iterations: 2, rto: 50us, claim: always,\n"
                       "    hosts: [h0, h1, h2, h3]}\n",
                       sets, 1);
  simtest_run_jobs_exact(sim, 1);
  dlcp_sim_coll_report r = report(sim, 0);
  dlcp_agg_stats st;
  uint64_t qdrops;
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  assert_true(r.ina_groups > 0 && r.ring_groups > 0);
  assert_int_equal(st.contrib, 4u * r.ina_groups);
  assert_true(st.claims_granted >= 4u * r.ina_groups);
  dlcp_sim_del(sim);

  sim = load("workload:\n  collective: {algo: ina, bytes: 1MB, ranks: 4, "
             "iterations: 2, window: 512, cc: panama, min_bytes: 1MB}\n",
             NULL, 0);
  simtest_run_jobs_exact(sim, 1);
  assert_int_equal(report(sim, 0).ina_groups, 2 * GROUPS_1MB);
  dlcp_sim_del(sim);

  /* PANAMA aggregates only reduce flows above 40 MB by default: this one
   * runs as ring, exact, and the switch never hears of it */
  sim = load("workload:\n  collective: {algo: ina, bytes: 1MB, ranks: 4, "
             "cc: panama}\n",
             NULL, 0);
  simtest_run_jobs_exact(sim, 1);
  assert_int_equal(report(sim, 0).ina_groups, 0);
  assert_true(dlcp_sim_agg_get_stats(sim, &st, &qdrops));
  assert_int_equal(st.packets, 0);
  dlcp_sim_del(sim);

  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, claim: auto}\n",
      "test.yaml:3: field 'workload.collective.claim': expected algo "
      "ra_ina for this field (plain INA waits for aggregators)");
  simtest_expect_error(
      "aggregation: {switch: tor0}\n"
      "workload:\n  collective: {algo: ina, bytes: 1MB, cc: dctcp}\n",
      "test.yaml:3: field 'workload.collective.cc': expected one of "
      "none, panama, got 'dctcp'");
  simtest_expect_error(
      "aggregation: {chain: [tor0]}\n"
      "workload:\n  collective: {algo: cina, bytes: 1MB, min_bytes: 0}\n",
      "test.yaml:3: field 'workload.collective.min_bytes': expected algo ina "
      "or ra_ina for this field (a chain or tree job has no ring to fall "
      "back to)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ina_exact),
      cmocka_unit_test(test_ina_loss),
      cmocka_unit_test(test_jobs_share_small_pool),
      cmocka_unit_test(test_jobs_share_pool_under_loss),
      cmocka_unit_test(test_per_packet_cost),
      cmocka_unit_test(test_switch_queue_full),
      cmocka_unit_test(test_switch_queue_pfc),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_switch_in_another_rack),
      cmocka_unit_test(test_scenario_errors),
      cmocka_unit_test(test_claims_and_cc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
