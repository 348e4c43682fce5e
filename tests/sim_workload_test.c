/*
 * sim_workload_test.c: training profiles (workloads/profiles, read by
 * profile.c) driving a PS job with backward/communication overlap, and
 * background traffic drawn from the published flow-size distributions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static void load(dlcp_sim_config *cfg, const char *text) {
  char err[512];
  int rv = dlcp_sim_scenario_load(cfg, text, strlen(text), "t.yaml", NULL, 0,
                                  err, sizeof(err));
  if (rv != 0) {
    print_error("%s\n", err);
  }
  assert_int_equal(rv, 0);
}

static int by_size_desc(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

static dlcp_sim *build(const dlcp_sim_config *cfg) {
  dlcp_sim *sim = NULL;
  char err[512];
  int rv = dlcp_sim_new(&sim, cfg, NULL, err, sizeof(err));
  if (rv != 0) {
    print_error("%s\n", err);
  }
  assert_int_equal(rv, 0);
  return sim;
}

/* Every profile the script writes loads, with its sizes summing to
 * model_bytes, a forward time and a backward time per tensor. */
static void test_profiles_load(void **state) {
  (void)state;
  const char *models[] = {"resnet50", "vgg16", "vgg19", "googlenet",
                          "transformer"};
  for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
    char text[256];
    snprintf(text, sizeof(text),
             "workload:\n  ps: {workers: 3, servers: 1, profile: %s}\n",
             models[m]);
    dlcp_sim_config cfg;
    load(&cfg, text);
    const dlcp_sim_ps_spec *ps = &cfg.ps[0];
    assert_string_equal(ps->profile, models[m]);
    assert_true(ps->ntensors > 10);
    uint64_t sum = 0;
    dlcp_sim_ps bwd = 0;
    for (uint32_t t = 0; t < ps->ntensors; t++) {
      assert_true(ps->tensor_bytes[t] > 0);
      assert_int_equal(ps->tensor_bytes[t] % 4, 0);
      sum += ps->tensor_bytes[t];
      bwd += ps->tensor_bwd_ps[t];
    }
    assert_int_equal(sum, ps->model_bytes);
    assert_true(ps->forward_ps > 0);
    /* The script's backward = 2 x forward, to rounding per tensor. */
    double ratio = (double)bwd / (double)ps->forward_ps;
    assert_true(ratio > 1.999 && ratio < 2.001);
    print_message("%-12s %3u tensors %9.3f MB forward %8.1f us\n", models[m],
                  ps->ntensors, (double)sum / 1e6,
                  (double)ps->forward_ps / 1e6);
    dlcp_sim_config_free(&cfg);
  }
}

/* A GoogleNet PS job of 6 workers and 2 servers on 8 hosts, 2 iterations
 * from 10 us, with |extra| (more fields of workload.ps, or "") added. */
static void load_googlenet_ps(dlcp_sim_config *cfg, const char *extra) {
  char text[512];
  snprintf(text, sizeof(text),
           "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4,\n"
           "           spines: 2}\n"
           "workload:\n"
           "  ps: {workers: 6, servers: 2, profile: googlenet,\n"
           "       iterations: 2, start: 10us%s}\n",
           extra);
  load(cfg, text);
}

/* The backward time summed over a profile's tensors. */
static dlcp_sim_ps backward_total(const dlcp_sim_ps_spec *ps) {
  dlcp_sim_ps bwd_total = 0;
  for (uint32_t t = 0; t < ps->ntensors; t++) {
    bwd_total += ps->tensor_bwd_ps[t];
  }
  return bwd_total;
}

/* A profile-driven PS job: per iteration, every worker pushes every
 * partition (<= 4 MB, assigned round-robin in backward order) and gets it
 * back, so a worker's pushes of one iteration sum to the model; iteration
 * 0's pushes leave when their layer's backward pass is done: the first
 * partition (of the last tensor) at forward + its backward time, the last
 * one at forward + the whole backward pass.  The job runs to completion,
 * and an iteration takes at least its compute time. */
static void test_ps_profile(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  load_googlenet_ps(&cfg, "");
  const dlcp_sim_ps_spec *ps = &cfg.ps[0];
  uint32_t parts = 0;
  for (uint32_t t = 0; t < ps->ntensors; t++) {
    parts += (uint32_t)((ps->tensor_bytes[t] + 3999999) / 4000000);
  }
  dlcp_sim_ps bwd_total = backward_total(ps);
  dlcp_sim_ps fwd = ps->forward_ps;
  dlcp_sim_ps last_bwd = ps->tensor_bwd_ps[ps->ntensors - 1];
  uint64_t model = ps->model_bytes;
  dlcp_sim *sim = build(&cfg);
  assert_int_equal(sim->nflows, 2 * 2 * 6 * parts);
  uint64_t pushed = 0;
  dlcp_sim_ps first = DLCP_SIM_PS_NEVER, last = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == DLCP_SIM_GROUP_PS_PUSH && f->iteration == 0 &&
        f->src == sim->flows[0].src) {
      pushed += f->size_bytes;
      first = f->release_ps < first ? f->release_ps : first;
      last = f->release_ps > last ? f->release_ps : last;
    }
  }
  assert_int_equal(pushed, model);
  assert_int_equal(first, dlcp_sim_time_from_us(10) + fwd + last_bwd);
  assert_int_equal(last, dlcp_sim_time_from_us(10) + fwd + bwd_total);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  /* Iteration 1's first push waits for iteration 0's last pull to the
   * worker plus a forward pass and that layer's backward time. */
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == DLCP_SIM_GROUP_PS_PUSH && f->iteration == 1) {
      assert_true(f->start_ps >= fwd + last_bwd + last);
    }
  }
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* The bytes each server receives from one worker in iteration 0, sorted
 * (largest first) into |got| (nhosts entries, zero beyond the servers). */
static void pushed_per_server(const dlcp_sim *sim, uint64_t *got) {
  memset(got, 0, sim->net.nhosts * sizeof(*got));
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == DLCP_SIM_GROUP_PS_PUSH && f->iteration == 0 &&
        f->src == sim->flows[0].src) {
      got[f->dst] += f->size_bytes;
    }
  }
  qsort(got, sim->net.nhosts, sizeof(*got), by_size_desc);
}

/* What each of |S| servers should get, sorted as above: the profile's
 * partitions (<= 4 MB) in backward order, to server c mod S, or with
 * |balanced| to the one with the fewest bytes so far (lowest first). */
static void expected_per_server(const dlcp_sim_ps_spec *ps, uint32_t S,
                                bool balanced, uint64_t *want,
                                uint32_t nhosts) {
  memset(want, 0, nhosts * sizeof(*want));
  uint32_t c = 0;
  for (uint32_t t = ps->ntensors; t-- > 0;) {
    for (uint64_t left = ps->tensor_bytes[t]; left > 0; c++) {
      uint64_t b = left < 4000000 ? left : 4000000;
      uint32_t k = c % S;
      if (balanced) {
        k = 0;
        for (uint32_t j = 1; j < S; j++) {
          k = want[j] < want[k] ? j : k;
        }
      }
      want[k] += b;
      left -= b;
    }
  }
  qsort(want, nhosts, sizeof(*want), by_size_desc);
}

/* placement: balanced gives each partition to the least-loaded server:
 * every server's bytes are those of an independent computation, and the
 * busiest server holds less than round-robin's.  GoogleNet on 4 servers:
 * round-robin gives the busiest server 8.89 MB, balanced 6.83. */
static void test_ps_placement(void **state) {
  (void)state;
  uint64_t got[16], want[16], rr_max = 0;
  for (int balanced = 0; balanced <= 1; balanced++) {
    dlcp_sim_config cfg;
    char text[512];
    snprintf(text, sizeof(text),
             "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 8,\n"
             "           spines: 2}\n"
             "workload:\n"
             "  ps: {workers: 12, servers: 4, profile: googlenet%s}\n",
             balanced ? ", placement: balanced" : "");
    load(&cfg, text);
    assert_int_equal(cfg.ps[0].balanced_placement, balanced);
    dlcp_sim *sim = build(&cfg);
    assert_int_equal(sim->net.nhosts, 16);
    pushed_per_server(sim, got);
    expected_per_server(&cfg.ps[0], 4, balanced, want, 16);
    for (uint32_t h = 0; h < 16; h++) {
      assert_int_equal(got[h], want[h]);
    }
    assert_int_equal(got[4], 0);
    if (!balanced) {
      rr_max = got[0];
    } else {
      assert_true(got[0] < rr_max);
    }
    print_message("placement %s: busiest server %.2f MB\n",
                  balanced ? "balanced" : "round_robin",
                  (double)got[0] / 1e6);
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
}

/* With forward_overlap a pull carries the share of the forward pass from
 * its layer on (all of it for the front layer, the last layer's own for
 * the last), and a worker's next iteration begins when the latest of its
 * pulls plus that share is reached: its first push (the last layer's)
 * starts there plus the last layer's backward time, and no later than it
 * would after the last pull and a whole forward pass. */
static void test_forward_overlap(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  load_googlenet_ps(&cfg, ", forward_overlap: true");
  const dlcp_sim_ps_spec *ps = &cfg.ps[0];
  dlcp_sim_ps bwd_total = backward_total(ps);
  dlcp_sim_ps fwd = ps->forward_ps;
  dlcp_sim_ps last_bwd = ps->tensor_bwd_ps[ps->ntensors - 1];
  dlcp_sim_ps last_share = (dlcp_sim_ps)((double)fwd * (double)last_bwd /
                                         (double)bwd_total);
  dlcp_sim *sim = build(&cfg);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  uint32_t worker = DLCP_SIM_NONE;
  dlcp_sim_ps due = 0, last_pull = 0, first_push = DLCP_SIM_PS_NEVER;
  dlcp_sim_ps least = DLCP_SIM_PS_NEVER, most = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == DLCP_SIM_GROUP_PS_PUSH && f->iteration == 1) {
      worker = worker == DLCP_SIM_NONE ? f->src : worker;
      if (f->src == worker && f->start_ps < first_push) {
        first_push = f->start_ps;
      }
    }
  }
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->group == DLCP_SIM_GROUP_PS_PULL && f->iteration == 0) {
      least = f->barrier_offset_ps < least ? f->barrier_offset_ps : least;
      most = f->barrier_offset_ps > most ? f->barrier_offset_ps : most;
      if (f->dst == worker) {
        dlcp_sim_ps d = f->finish_ps + f->barrier_offset_ps;
        due = d > due ? d : due;
        last_pull = f->finish_ps > last_pull ? f->finish_ps : last_pull;
      }
    }
  }
  assert_int_equal(most, fwd);
  assert_true(least + 1 >= last_share && least <= last_share + 1);
  assert_int_equal(first_push, due + last_bwd);
  assert_true(first_push <= last_pull + fwd + last_bwd);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* Background web-search traffic at load 0.3 on 8 hosts for 0.5 s: the
 * offered bytes are within 6% of 0.3 x 8 x 100 Gbps x 0.5 s, the sizes
 * follow the CDF (15% <= 10 KB, 70% <= 1 MB, within 2 points), every
 * flow has distinct ends and starts inside the window, in order. */
static void test_background(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  load(&cfg, "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4,\n"
             "           spines: 2}\n"
             "workload:\n"
             "  background: {distribution: websearch, load: 0.3,\n"
             "               start: 1ms, duration: 500ms}\n");
  dlcp_sim *sim = build(&cfg);
  uint64_t bytes = 0, small = 0, medium = 0;
  dlcp_sim_ps prev = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    assert_int_equal(f->group, DLCP_SIM_GROUP_BACKGROUND);
    assert_int_not_equal(f->src, f->dst);
    assert_true(f->size_bytes >= 1 && f->size_bytes <= 30000000);
    assert_true(f->release_ps >= prev);
    assert_true(f->release_ps >= dlcp_sim_time_from_ms(1) &&
                f->release_ps < dlcp_sim_time_from_ms(501));
    prev = f->release_ps;
    bytes += f->size_bytes;
    small += f->size_bytes <= 10000;
    medium += f->size_bytes <= 1000000;
  }
  double want = 0.3 * 8 * 100e9 / 8 * 0.5;
  double fs = (double)small / sim->nflows, fm = (double)medium / sim->nflows;
  print_message("%u flows, %.3f GB offered (%.3f GB wanted), <=10KB %.3f, "
                "<=1MB %.3f\n", sim->nflows, (double)bytes / 1e9, want / 1e9,
                fs, fm);
  assert_true((double)bytes > 0.94 * want && (double)bytes < 1.06 * want);
  assert_true(fs > 0.13 && fs < 0.17);
  assert_true(fm > 0.68 && fm < 0.72);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
}

/* profile_scale s multiplies sizes (rounded up to whole float32s) and
 * compute times; compression c divides sizes only; layer_priorities N
 * gives the front layers the most urgent queues. */
static void test_profile_knobs(void **state) {
  (void)state;
  dlcp_sim_config a, b, c;
  load(&a, "workload:\n  ps: {workers: 3, servers: 1, profile: resnet50}\n");
  load(&b, "workload:\n  ps: {workers: 3, servers: 1, profile: resnet50,\n"
           "       profile_scale: 0.5}\n");
  load(&c, "workload:\n  ps: {workers: 3, servers: 1, profile: resnet50,\n"
           "       compression: 4}\n");
  const dlcp_sim_ps_spec *pa = &a.ps[0], *pb = &b.ps[0], *pc = &c.ps[0];
  assert_int_equal(pa->ntensors, pb->ntensors);
  for (uint32_t t = 0; t < pa->ntensors; t++) {
    uint64_t half = (pa->tensor_bytes[t] / 4 + 1) / 2 * 4;
    uint64_t quarter = (pa->tensor_bytes[t] / 4 + 3) / 4 * 4;
    assert_int_equal(pb->tensor_bytes[t], half);
    assert_int_equal(pc->tensor_bytes[t], quarter);
    assert_true(pb->tensor_bwd_ps[t] == (pa->tensor_bwd_ps[t] + 1) / 2 ||
                pb->tensor_bwd_ps[t] == pa->tensor_bwd_ps[t] / 2);
    assert_int_equal(pc->tensor_bwd_ps[t], pa->tensor_bwd_ps[t]);
  }
  assert_true(pb->forward_ps == (pa->forward_ps + 1) / 2 ||
              pb->forward_ps == pa->forward_ps / 2);
  assert_int_equal(pc->forward_ps, pa->forward_ps);
  dlcp_sim_config_free(&a);
  dlcp_sim_config_free(&b);
  dlcp_sim_config_free(&c);

  /* layer_priorities 4: tensor t's partitions get priority t * 4 / T. */
  dlcp_sim_config d;
  load(&d, "workload:\n  ps: {workers: 3, servers: 1, profile: googlenet,\n"
           "       layer_priorities: 4, iterations: 1}\n");
  uint32_t T = d.ps[0].ntensors;
  dlcp_sim *sim = build(&d);
  /* Partitions are in backward order: flow 0 is the last tensor's. */
  assert_int_equal(sim->flows[0].prio, (T - 1) * 4 / T);
  uint32_t lowest = 7;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    lowest = sim->flows[i].prio < lowest ? sim->flows[i].prio : lowest;
  }
  assert_int_equal(lowest, 0);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&d);
}

static void expect_error(const char *text, const char *want) {
  dlcp_sim_config cfg;
  char err[1024];
  int rv = dlcp_sim_scenario_load(&cfg, text, strlen(text), "t.yaml", NULL, 0,
                                  err, sizeof(err));
  assert_int_equal(rv, DLCP_ERR_CONFIG);
  if (strncmp(err, want, strlen(want)) != 0) {
    print_error("got  '%s'\nwant '%s...'\n", err, want);
  }
  assert_true(strncmp(err, want, strlen(want)) == 0);
}

static void test_errors(void **state) {
  (void)state;
  expect_error("workload:\n  ps: {workers: 3, servers: 1, profile: nope}\n",
               "t.yaml:2: field 'workload.ps.profile': expected a readable "
               "training profile: ");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, profile: 'a b'}\n",
               "t.yaml:2: field 'workload.ps.profile': expected a model "
               "name");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, profile: vgg16,\n"
               "       model_size: 1MB}\n",
               "t.yaml:2: field 'workload.ps.profile': expected either a "
               "profile or model_size and compute_time, not both");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, model_size: 1MB,\n"
               "       compression: 4}\n",
               "t.yaml:3: field 'workload.ps.compression': expected a "
               "profile (this field acts on its tensors)");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, model_size: 1MB,\n"
               "       compute_time: 1us, forward_overlap: true}\n",
               "t.yaml:3: field 'workload.ps.forward_overlap': expected a "
               "profile (this field acts on its tensors)");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, profile: vgg16,\n"
               "       placement: even}\n",
               "t.yaml:3: field 'workload.ps.placement': expected one of "
               "round_robin, balanced, got 'even'");
  expect_error("workload:\n  ps: {workers: 3, servers: 1, model_size: 1MB,\n"
               "       compute_time: 1us, placement: balanced}\n",
               "t.yaml:3: field 'workload.ps.placement': expected a "
               "profile (this field acts on its tensors)");
  expect_error("workload:\n  background: {distribution: web, load: 0.3,\n"
               "               duration: 1ms}\n",
               "t.yaml:2: field 'workload.background.distribution': "
               "expected one of websearch, datamining");
  expect_error("workload:\n  background: {distribution: websearch,\n"
               "               duration: 1ms}\n",
               "t.yaml:2: field 'workload.background.load': expected this "
               "field to be present");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profiles_load),
      cmocka_unit_test(test_ps_profile),
      cmocka_unit_test(test_ps_placement),
      cmocka_unit_test(test_forward_overlap),
      cmocka_unit_test(test_profile_knobs),
      cmocka_unit_test(test_background),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
