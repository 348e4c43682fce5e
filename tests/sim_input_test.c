/*
 * sim_input_test.c: what the simulator checks before it runs: the output
 * directory (created, or refused with the reason, before any simulated
 * time is spent) and workloads that name hosts the topology does not
 * have (refused with file:line and the range that exists).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static const char DUMBBELL[] =
    "topology:\n"
    "  kind: explicit\n"
    "  nodes:\n"
    "    - {name: a0, kind: host}\n"
    "    - {name: b0, kind: host}\n"
    "    - {name: s, kind: switch}\n"
    "  links:\n"
    "    - {a: a0, b: s, rate: 10Gbps, delay: 1us}\n"
    "    - {a: b0, b: s, rate: 10Gbps, delay: 1us}\n"
    "workload:\n"
    "  flows:\n";

/* build_with_flow loads DUMBBELL plus |flow| and builds the world;
 * returns the code and the message in |err|. */
static int build_with_flow(const char *flow, char *err, size_t errlen) {
  char text[1024];
  dlcp_sim_config cfg;
  dlcp_sim *sim = NULL;
  int rv;
  snprintf(text, sizeof(text), "%s    - %s\n", DUMBBELL, flow);
  rv = dlcp_sim_scenario_load(&cfg, text, strlen(text), "in.yaml", NULL, 0,
                              err, errlen);
  if (rv != 0) {
    return rv;
  }
  rv = dlcp_sim_new(&sim, &cfg, NULL, err, errlen);
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);
  return rv;
}

static void test_flow_hosts_beyond_topology(void **state) {
  char err[512];
  (void)state;
  assert_int_equal(build_with_flow("{src: a0, dst: 2, size: 1MB}", err,
                                   sizeof(err)),
                   DLCP_ERR_CONFIG);
  assert_string_equal(err, "in.yaml:12: field 'workload.flows[0].dst': "
                           "expected a host name or an index in 0..1 (the "
                           "topology has 2 hosts), got '2'");
  assert_int_equal(build_with_flow("{src: h7, dst: b0, size: 1MB}", err,
                                   sizeof(err)),
                   DLCP_ERR_CONFIG);
  assert_string_equal(err, "in.yaml:12: field 'workload.flows[0].src': "
                           "expected a host name or an index in 0..1 (the "
                           "topology has 2 hosts), got 'h7'");
  assert_int_equal(build_with_flow("{src: 1, dst: b0, size: 1MB}", err,
                                   sizeof(err)),
                   DLCP_ERR_CONFIG);
  assert_string_equal(err, "in.yaml:12: field 'workload.flows[0].dst': "
                           "expected a host other than src, got 'b0'");
  assert_int_equal(build_with_flow("{src: 0, dst: b0, size: 1MB}", err,
                                   sizeof(err)),
                   0);
}

/* A PS job or a collective with more ranks than hosts: refused at the
 * field, before anything runs. */
static void test_ranks_beyond_topology(void **state) {
  static const char PS[] =
      "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4}\n"
      "workload:\n"
      "  ps: {workers: 6, servers: 3, model_size: 1MB}\n";
  static const char COLL[] =
      "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 4}\n"
      "transport: {kind: mlt}\n"
      "workload:\n"
      "  collective: {algo: ring, bytes: 1MiB, ranks: 9}\n";
  const char *texts[] = {PS, COLL};
  const char *want[] = {
      "ps.yaml:3: field 'workload.ps.servers': expected workers >= 1, "
      "servers >= 1 and workers + servers <= 8 hosts",
      "ps.yaml:4: field 'workload.collective.ranks': expected 1..8 ranks"};
  (void)state;
  for (int i = 0; i < 2; i++) {
    dlcp_sim_config cfg;
    dlcp_sim *sim = NULL;
    char err[512];
    int rv = dlcp_sim_scenario_load(&cfg, texts[i], strlen(texts[i]),
                                    "ps.yaml", NULL, 0, err, sizeof(err));
    if (rv == 0) {
      rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
      dlcp_sim_del(sim);
      dlcp_sim_config_free(&cfg);
    }
    assert_int_equal(rv, DLCP_ERR_CONFIG);
    assert_string_equal(err, want[i]);
  }
}

static void test_outdir(void **state) {
  char dir[] = "/tmp/dlcp-sim-input-XXXXXX";
  char path[256];
  char err[512];
  struct stat st;
  FILE *f;
  (void)state;
  assert_non_null(mkdtemp(dir));

  /* Missing: created, and left empty (the probe file is gone). */
  snprintf(path, sizeof(path), "%s/out", dir);
  assert_int_equal(dlcp_sim_prepare_outdir(path, err, sizeof(err)), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(rmdir(path), 0); /* fails unless empty */

  /* Its parent missing: refused, naming the path and the reason. */
  snprintf(path, sizeof(path), "%s/no/out", dir);
  assert_int_equal(dlcp_sim_prepare_outdir(path, err, sizeof(err)),
                   DLCP_ERR_SYSTEM);
  assert_non_null(strstr(err, "/no/out: cannot create directory: No such "
                              "file or directory"));

  /* A file in the way. */
  snprintf(path, sizeof(path), "%s/file", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(dlcp_sim_prepare_outdir(path, err, sizeof(err)),
                   DLCP_ERR_SYSTEM);
  assert_non_null(strstr(err, "/file: not a directory"));
  assert_int_equal(unlink(path), 0);

  /* Not writable (unless root, whom permissions do not stop). */
  if (geteuid() != 0) {
    snprintf(path, sizeof(path), "%s/ro", dir);
    assert_int_equal(mkdir(path, 0555), 0);
    assert_int_equal(dlcp_sim_prepare_outdir(path, err, sizeof(err)),
                     DLCP_ERR_SYSTEM);
    assert_non_null(strstr(err, "/ro: cannot create files in it"));
    assert_int_equal(rmdir(path), 0);
  }
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flow_hosts_beyond_topology),
      cmocka_unit_test(test_ranks_beyond_topology),
      cmocka_unit_test(test_outdir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
