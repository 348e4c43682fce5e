/*
 * simtest.h: building simulations from scenario text in the simulator's
 * cmocka tests (tests/sim_*_test.c).  Header-only: the test-support
 * library does not link the simulator, and the helpers assert with cmocka,
 * so include this after <cmocka.h>.
 */
#ifndef DLCP_TESTS_SIMTEST_H
#define DLCP_TESTS_SIMTEST_H

#include <string.h>

#include "sim/scenario.h"
#include "sim/sim.h"

/* The simulation of scenario |yaml| ("test.yaml" in messages) with the
 * overrides |sets|; fails the test, printing why, if it cannot be built. */
static inline dlcp_sim *simtest_load(const char *yaml,
                                     const char *const *sets, size_t nsets) {
  dlcp_sim_config cfg;
  char err[512];
  int rv = dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml), "test.yaml", sets,
                                  nsets, err, sizeof(err));
  if (rv != 0) {
    print_message("scenario: %s\n", err);
  }
  assert_int_equal(rv, 0);
  dlcp_sim *sim;
  rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
  if (rv != 0) {
    print_message("new: %s\n", err);
  }
  assert_int_equal(rv, 0);
  dlcp_sim_config_free(&cfg);
  return sim;
}

/* Runs |sim| to its end and asserts that its |njobs| collective jobs all
 * finished, exactly, every rank in every iteration. */
static inline void simtest_run_jobs_exact(dlcp_sim *sim, uint32_t njobs) {
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_true(dlcp_sim_finished(sim));
  assert_int_equal(dlcp_sim_coll_jobs(sim), njobs);
  for (uint32_t j = 0; j < njobs; j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    if (r.status != 0) {
      print_message("job %u failed: %s (rank %d)\n", j,
                    dlcp_strerror(r.status), r.failed_rank);
    }
    assert_int_equal(r.status, 0);
    assert_true(r.done);
    assert_int_equal(r.verify_errors, 0);
    for (uint32_t i = 0; i < r.iterations; i++) {
      assert_int_equal(r.iter[i].ranks_done, r.ranks);
    }
  }
}

/* Asserts that scenario |yaml| is refused, by the loader or by
 * dlcp_sim_new, with exactly the message |want|. */
static inline void simtest_expect_error(const char *yaml, const char *want) {
  dlcp_sim_config cfg;
  char err[512];
  int rv = dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml), "test.yaml", NULL,
                                  0, err, sizeof(err));
  if (rv == 0) {
    dlcp_sim *sim = NULL;
    rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
  assert_int_not_equal(rv, 0);
  if (strcmp(err, want) != 0) {
    print_message("got:  %s\nwant: %s\n", err, want);
  }
  assert_string_equal(err, want);
}

#endif /* DLCP_TESTS_SIMTEST_H */
