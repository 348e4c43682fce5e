/*
 * pathset_test: which paths a connection's rotation uses
 * (src/proto/pathset.c) on its own: seeded losses charged per path, the
 * judgement after each report, spells that double and end, the last
 * usable path kept, routes that move with the evidence.  Time is an argument;
 * nothing sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/pathset.h"
#include "proto/rng.h"

#define DRAIN 1000u /* ns: a spell is 16 of these, doubling */

/* Sends |rounds| rounds of |per_path| packets on each of |ps|'s usable
 * paths, losing each with probability loss[path], and judges after each
 * round at |*now|, which moves on a drain interval per round. */
static void run_rounds(dlcp_pathset *ps, dlcp_rng *rng, const double *loss,
                       uint32_t rounds, uint32_t per_path, dlcp_tstamp *now) {
  for (uint32_t r = 0; r < rounds; r++) {
    for (uint32_t p = 0; p < ps->n; p++) {
      if (!dlcp_pathset_usable(ps, p, *now)) {
        continue;
      }
      for (uint32_t i = 0; i < per_path; i++) {
        dlcp_pathset_sent(ps, p);
        if (dlcp_rng_unit(rng) < loss[p]) {
          dlcp_pathset_lost(ps, p);
        }
      }
    }
    dlcp_pathset_judge(ps, DRAIN, *now);
    *now += DRAIN;
  }
}

/* 64 runs (seeds 1-64) of four paths of |routes| routes, each losing
 * |rate| at random, 3,200 packets a path: the spells and reroutes they
 * had, summed. */
static void uniform_loss_runs(double rate, uint32_t routes, uint64_t *spells,
                              uint64_t *reroutes) {
  *spells = *reroutes = 0;
  for (uint64_t seed = 1; seed <= 64; seed++) {
    dlcp_pathset ps;
    assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 4, routes), 0);
    dlcp_rng rng;
    dlcp_rng_seed(&rng, seed);
    double loss[4] = {rate, rate, rate, rate};
    dlcp_tstamp now = 1;
    run_rounds(&ps, &rng, loss, 400, 8, &now);
    *spells += ps.spells;
    *reroutes += ps.reroutes;
    dlcp_pathset_fini(&ps, dlcp_mem_default());
  }
}

/* The same loss on every path (as a host's own cable, or a fabric that
 * drops at random) leaves no path out at 1 % or 5 %, and at 30 % only
 * rarely (the least lossy of four paths' early counts can be lucky): 3
 * spells of 16 drain intervals over 64 runs of 3,200 packets a path
 * (seeds 1-64). */
static void test_uniform_loss_leaves_nothing_out(void **state) {
  (void)state;
  const double rates[] = {0.0, 0.01, 0.05, 0.3};
  const uint64_t most[] = {0, 0, 0, 3};
  for (size_t k = 0; k < sizeof(rates) / sizeof(rates[0]); k++) {
    uint64_t spells, reroutes;
    uniform_loss_runs(rates[k], 1, &spells, &reroutes);
    assert_true(spells <= most[k]);
  }
}

/* One path of four losing 30 % (a gray link), the others 0.5 %: it is
 * left out after a few reports, and while out carries nothing. */
static void test_gray_path_left_out(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    dlcp_pathset ps;
    assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 4, 1), 0);
    dlcp_rng rng;
    dlcp_rng_seed(&rng, seed);
    double loss[4] = {0.005, 0.005, 0.3, 0.005};
    dlcp_tstamp now = 1;
    run_rounds(&ps, &rng, loss, 16, 8, &now);
    assert_false(dlcp_pathset_usable(&ps, 2, now));
    assert_int_equal(dlcp_pathset_usable_from(&ps, 2, now), 3);
    assert_int_equal(ps.spells, 1);
    for (uint32_t p = 0; p < 4; p++) {
      assert_true(p == 2 || dlcp_pathset_usable(&ps, p, now));
    }
    dlcp_pathset_fini(&ps, dlcp_mem_default());
  }
}

/* A dead path: its first spell is 16 drain intervals, it rejoins with
 * its counts cleared, loses again and is left out for twice as long,
 * and so on up to 256 times the first spell. */
static void test_spells_double(void **state) {
  (void)state;
  dlcp_pathset ps;
  assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 2, 1), 0);
  dlcp_tstamp now = 1;
  dlcp_duration want = 16 * DRAIN;
  for (uint32_t strike = 0; strike < 11; strike++) {
    for (uint32_t i = 0; i < 16; i++) {
      dlcp_pathset_sent(&ps, 0);
      dlcp_pathset_sent(&ps, 1);
      dlcp_pathset_lost(&ps, 1);
    }
    dlcp_pathset_judge(&ps, DRAIN, now);
    assert_int_equal(ps.path[1].out_until, now + want);
    assert_int_equal(ps.path[1].strikes, strike + 1);
    assert_false(dlcp_pathset_usable(&ps, 1, now + want - 1));
    now += want;
    assert_true(dlcp_pathset_usable(&ps, 1, now));
    dlcp_pathset_judge(&ps, DRAIN, now);
    assert_int_equal(ps.path[1].sent, 0);
    assert_int_equal(ps.path[1].lost, 0);
    want = strike + 1 <= 8 ? want * 2 : want;
  }
  assert_int_equal(ps.spells, 11);
  dlcp_pathset_fini(&ps, dlcp_mem_default());
}

/* Three paths of four dead, then the fourth losing everything too: the
 * three are left out, the last usable path never, whatever it loses. */
static void test_last_path_stays(void **state) {
  (void)state;
  dlcp_pathset ps;
  assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 4, 1), 0);
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 3);
  dlcp_tstamp now = 1;
  double loss[4] = {1.0, 1.0, 0.0, 1.0};
  run_rounds(&ps, &rng, loss, 2, 8, &now);
  assert_int_equal(ps.spells, 3);
  assert_true(dlcp_pathset_usable(&ps, 2, now));
  assert_int_equal(dlcp_pathset_usable_from(&ps, 3, now), 2);
  loss[2] = 1.0;
  run_rounds(&ps, &rng, loss, 4, 8, &now);
  assert_int_equal(ps.spells, 3);
  assert_true(dlcp_pathset_usable(&ps, 2, now));
  dlcp_pathset_fini(&ps, dlcp_mem_default());
}

/* Counts are halved every 256 packets per path, and a path that then
 * carries its share without standing out is forgiven its strikes. */
static void test_halving_forgives(void **state) {
  (void)state;
  dlcp_pathset ps;
  assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 2, 1), 0);
  ps.path[0].strikes = 3;
  ps.path[1].strikes = 3;
  for (uint32_t i = 0; i < DLCP_PATHSET_HALVING; i++) {
    dlcp_pathset_sent(&ps, 0);
    dlcp_pathset_sent(&ps, 1);
    if (i % 4 == 0) {
      dlcp_pathset_lost(&ps, 1); /* a quarter: still standing out */
    }
  }
  assert_int_equal(ps.since_halving, 0);
  assert_int_equal(ps.path[0].sent, DLCP_PATHSET_HALVING / 2);
  assert_int_equal(ps.path[1].lost, DLCP_PATHSET_HALVING / 8);
  assert_int_equal(ps.path[0].strikes, 0);
  assert_int_equal(ps.path[1].strikes, 3);
  dlcp_pathset_fini(&ps, dlcp_mem_default());
}

/* Every path of four loses everything (a peer whose source ports all
 * hash onto a dead link): with one route none can be left out, as none
 * stands out, and nothing moves; with four each path takes its next
 * route, its counts cleared, and stays in the rotation. */
static void test_all_dead_paths_reroute(void **state) {
  (void)state;
  double loss[4] = {1.0, 1.0, 1.0, 1.0};
  for (uint32_t routes = 1; routes <= 4; routes += 3) {
    dlcp_pathset ps;
    assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 4, routes), 0);
    dlcp_rng rng;
    dlcp_rng_seed(&rng, 5);
    dlcp_tstamp now = 1;
    run_rounds(&ps, &rng, loss, 1, DLCP_PATHSET_REROUTE_LOSSES, &now);
    assert_int_equal(ps.spells, 0);
    for (uint32_t p = 0; p < 4; p++) {
      assert_true(dlcp_pathset_usable(&ps, p, now));
      assert_int_equal(dlcp_pathset_route(&ps, p), routes == 1 ? p : p + 4);
      assert_int_equal(ps.path[p].lost,
                       routes == 1 ? DLCP_PATHSET_REROUTE_LOSSES : 0);
    }
    assert_int_equal(ps.reroutes, routes == 1 ? 0 : 4);
    /* Round after round on dead routes, each path cycles through its
     * routes, distinct from every other path's. */
    run_rounds(&ps, &rng, loss, 3, DLCP_PATHSET_REROUTE_LOSSES, &now);
    for (uint32_t p = 0; p < 4; p++) {
      assert_int_equal(dlcp_pathset_route(&ps, p), p);
    }
    assert_int_equal(ps.reroutes, routes == 1 ? 0 : 16);
    dlcp_pathset_fini(&ps, dlcp_mem_default());
  }
}

/* A path left out takes its next route for when it rejoins; random loss
 * moves next to nothing (1 %, 5 % and 30 % on every path, 64 seeds of
 * 3,200 packets a path: no reroute but with the spells at 1 and 5 %, 4
 * of 256 paths at 30 %, whose first counts lost half; harmless, as every
 * route loses the same); the control channel's reroute moves its path at
 * once, and does nothing with one route. */
static void test_routes_move_with_evidence(void **state) {
  (void)state;
  dlcp_pathset ps;
  assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 4, 4), 0);
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 9);
  dlcp_tstamp now = 1;
  double gray[4] = {0.0, 0.0, 0.3, 0.0};
  run_rounds(&ps, &rng, gray, 8, 8, &now);
  assert_int_equal(ps.spells, 1);
  assert_false(dlcp_pathset_usable(&ps, 2, now));
  assert_int_equal(dlcp_pathset_route(&ps, 2), 2 + 4);
  assert_int_equal(dlcp_pathset_route(&ps, 0), 0);
  assert_int_equal(ps.reroutes, 1);
  dlcp_pathset_reroute(&ps, 0);
  assert_int_equal(dlcp_pathset_route(&ps, 0), 0 + 4);
  assert_int_equal(ps.reroutes, 2);
  dlcp_pathset_fini(&ps, dlcp_mem_default());

  const double rates[] = {0.01, 0.05, 0.3};
  const uint64_t most[] = {0, 0, 4};
  for (size_t k = 0; k < sizeof(rates) / sizeof(rates[0]); k++) {
    uint64_t spells, reroutes;
    uniform_loss_runs(rates[k], 4, &spells, &reroutes);
    uint64_t extra = reroutes - spells;
    print_message("%.0f %% on every path: %llu reroutes besides the "
                  "spells\n",
                  rates[k] * 100, (unsigned long long)extra);
    assert_true(extra <= most[k]);
  }

  assert_int_equal(dlcp_pathset_init(&ps, dlcp_mem_default(), 2, 1), 0);
  dlcp_pathset_reroute(&ps, 1);
  assert_int_equal(dlcp_pathset_route(&ps, 1), 1);
  assert_int_equal(ps.reroutes, 0);
  dlcp_pathset_fini(&ps, dlcp_mem_default());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uniform_loss_leaves_nothing_out),
      cmocka_unit_test(test_gray_path_left_out),
      cmocka_unit_test(test_spells_double),
      cmocka_unit_test(test_last_path_stays),
      cmocka_unit_test(test_halving_forgives),
      cmocka_unit_test(test_all_dead_paths_reroute),
      cmocka_unit_test(test_routes_move_with_evidence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
